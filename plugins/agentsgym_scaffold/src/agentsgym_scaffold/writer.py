"""What ``agentsgym new-env`` writes: a complete, installable env package, from templates.

The package passes ``agentsgym check-env`` and its own tests as written; its env module
stubs every hook with a working example game, for the author to replace. The templates
(``templates/*.tmpl``, package data of this distribution) are :class:`string.Template`
text (``$$`` is a literal ``$``).

Three kinds of package share those templates: the plain one (a ``MultistepEnv``); with
``tools=True`` (``new-env --tools``), a tool env (agentsgym-tools' ``ToolEnv``); with
``harness=True`` (``new-env --harness``), a harness env (agentsgym-gateway's
``HarnessEnv``: an unmodified program, ``program.py``, and a verifier). A kind is a
:class:`Kind`: its own templates for the files that differ (``tools_*.tmpl``,
``harness_*.tmpl``) and the words it puts into the shared ones.
"""

from __future__ import annotations

import logging
import re
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from string import Template
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from agentsgym.errors import RegistrationError
from agentsgym.runtime import ENV_ID_PATTERN, validate_env_id
from agentsgym_scaffold.errors import ScaffoldError

logger = logging.getLogger(__name__)

__all__ = [
    "FILES",
    "HARNESS_FILES",
    "KINDS",
    "TOOL_FILES",
    "Kind",
    "PackageNames",
    "kind_name",
    "package_names",
    "render_package",
    "write_package",
]

RESERVED_NAMESPACES = frozenset({"agentsgym"})

# output path (with ${package}) -> template file
FILES: dict[str, str] = {
    "pyproject.toml": "pyproject.toml.tmpl",
    "README.md": "README.md.tmpl",
    ".gitignore": "gitignore.tmpl",
    "src/${package}/__init__.py": "package_init.py.tmpl",
    "src/${package}/plugin.py": "plugin.py.tmpl",
    "src/${package}/env.py": "env.py.tmpl",
    "src/${package}/agent.py": "agent.py.tmpl",
    "src/${package}/tasks.py": "tasks.py.tmpl",
    "tests/test_contract.py": "test_contract.py.tmpl",
    "tests/test_env.py": "test_env.py.tmpl",
}

# ``new-env --tools``: these files differ, the others are the plain package's
TOOL_FILES: dict[str, str] = {
    **FILES,
    "src/${package}/env.py": "tools_env.py.tmpl",
    "src/${package}/agent.py": "tools_agent.py.tmpl",
    "tests/test_env.py": "tools_test_env.py.tmpl",
}

# ``new-env --harness``: an agentsgym-gateway HarnessEnv running program.py, a plain openai
# client loop; its env, program, agent and tests are its own, the others are shared
HARNESS_FILES: dict[str, str] = {
    **FILES,
    "src/${package}/env.py": "harness_env.py.tmpl",
    "src/${package}/program.py": "harness_program.py.tmpl",
    "src/${package}/agent.py": "harness_agent.py.tmpl",
    "tests/test_env.py": "harness_test_env.py.tmpl",
}

CONTRACT_PLAYS_HOOKS = (
    "plays episodes with the default\n"
    "    # agent (with and without a tokenizer, one at a time and concurrently) and checks\n"
    "    # tokens, hooks and determinism; raises EnvCheckError listing every failure."
)
"""test_contract.py's comment of what check_env plays, for the envs of turn hooks."""

# placeholder -> template, rendered first and given to every file (text both kinds share)
FRAGMENTS: dict[str, str] = {"hook_rules": "hook_rules.tmpl"}


CLONE_FOLDERS: dict[str, tuple[str, ...]] = {
    "agentsgym-tools": ("agentsgym_tools",),
    # the gateway runs on agentsgym-serve, which no package index has either
    "agentsgym-gateway": ("agentsgym_serve", "agentsgym_gateway"),
}
"""The folders of a clone of agentsgym that install a distribution a package may need,
the distributions it needs first: none of them is on a package index."""


def clone_install(needs: tuple[str, ...] = ()) -> str:
    """The line that installs, from a clone of agentsgym, the core and the plugin
    distributions ``needs`` (see :data:`CLONE_FOLDERS`)."""
    folders = [folder for distribution in needs for folder in CLONE_FOLDERS[distribution]]
    return " ".join(["pip install -e ./core", *(f"-e ./plugins/{f}" for f in folders)])


class Kind(NamedTuple):
    """A kind of package: its files (output path -> template), its wording of the
    shared templates (placeholder -> text, which may use the names' placeholders), and
    the agentsgym plugin distributions it depends on."""

    files: dict[str, str]
    wording: dict[str, str]
    needs: tuple[str, ...] = ()


KINDS: dict[str, Kind] = {
    "plain": Kind(
        FILES,
        {
            "new_env_options": "",
            "dependencies": '"${agentsgym_requirement}"',
            "game": "guess the secret word among a few candidates",
            "summary": "Guess the secret word among a few candidates",
            "task_draws": "candidates and the secret",
            "env_module": "`${config_class}` (env_config keys) and `${env_class}` (every episode hook)",
            "agent_module": "`${agent_class}`, a scripted agent seeded per rollout",
            "agent_description": "guesses the candidates in a seeded order (option: seed=N)",
            "hard_variant": "num_candidates=12",
            "contract_plays": CONTRACT_PLAYS_HOOKS,
            "kind_notes": "",
            "clone_install": clone_install(),
        },
    ),
    "tools": Kind(
        TOOL_FILES,
        {
            "new_env_options": " --tools",
            "dependencies": '"${agentsgym_requirement}", "${tools_requirement}"',
            "game": "find the candidate word with the highest Scrabble score, with a tool",
            "summary": "Find the highest-scoring word with a Scrabble tool",
            "task_draws": "candidates",
            "env_module": "the tool `scrabble_score`, `${config_class}` (env_config keys) and "
            "`${env_class}` (an agentsgym-tools `ToolEnv`: its tools and episode hooks)",
            "agent_module": "`${agent_class}`, a `ScriptedToolAgent`: calls the tool, then answers",
            "agent_description": "calls the tool, then answers (options: tokenizer, token_out)",
            "hard_variant": "num_candidates=8",
            "contract_plays": CONTRACT_PLAYS_HOOKS,
            "kind_notes": "",
            "clone_install": clone_install(("agentsgym-tools",)),
        },
        ("agentsgym-tools",),
    ),
    "harness": Kind(
        HARNESS_FILES,
        {
            "new_env_options": " --harness",
            "dependencies": '"${agentsgym_requirement}", "${gateway_requirement}", "openai>=1"',
            "game": "spell a word backwards, by an unmodified agent program",
            "summary": "Spell a word backwards, by a plain openai client program",
            "task_draws": "word to spell",
            "env_module": "`${config_class}` (env_config keys) and `${env_class}`, an "
            "agentsgym-gateway `HarnessEnv`: the program's command line, the task's input "
            "and the verifier of `answer.txt`; `src/${package}/program.py` is the program, "
            "a plain `openai` client loop that knows nothing of agentsgym",
            "agent_module": "`${agent_class}`, a scripted model the gateway calls with the "
            "program's requests",
            "agent_description": "spells the word backwards, then answers when asked",
            "hard_variant": "max_turns=1",
            "contract_plays": "runs the program on tasks with the\n"
            "    # default agent through the gateway (its calls, tokens, exit and verifier), makes a\n"
            "    # crashing and a hanging program fail only their episodes; raises EnvCheckError\n"
            "    # listing every failure (checks of turn hooks are skipped: a program has none).",
            "kind_notes": "\nThe model the program calls is the\n"
            "agent's: with no `--agent`, the scripted default agent (`${agent_name}`) answers\n"
            "through the gateway, offline; `--agent openai --agent-option base_url=URL\n"
            "--agent-option model=NAME` runs it against a model server (vLLM reports the token\n"
            "ids); `agentsgym train` trains the policy on the program's calls. See\n"
            "agentsgym's `docs/harness.md`.",
            "clone_install": clone_install(("agentsgym-gateway",)),
        },
        ("agentsgym-gateway",),
    ),
}


class PackageNames(BaseModel):
    """Every name the templates use, derived from ``NAMESPACE/Name``."""

    model_config = ConfigDict(frozen=True)

    env_id: str
    namespace: str
    name: str
    distribution: str
    package: str
    entry_point_name: str
    env_class: str
    config_class: str
    state_class: str
    agent_class: str
    agent_name: str
    snake_name: str
    agentsgym_requirement: str
    tools_requirement: str
    gateway_requirement: str


def package_names(env_name: str) -> PackageNames:
    """Names for ``NAMESPACE/Name`` (version ``-v0`` added) or ``NAMESPACE/Name-vN``.

    :raises ScaffoldError: not a valid env id, a variant, or a namespace agentsgym reserves.
    """
    raw = env_name.strip()
    if raw.count("/") != 1:
        raise ScaffoldError(
            f"{env_name!r} is not NAMESPACE/Name: give a namespace (your package's, e.g. "
            "'acme') and an env name, e.g. `agentsgym new-env acme/Maze`"
        )
    env_id = raw if re.search(r"-v\d+(-[A-Za-z0-9_.-]+)?$", raw) else f"{raw}-v0"
    try:
        validate_env_id(env_id)
    except RegistrationError as exc:
        raise ScaffoldError(
            f"{exc}. Namespace and name may use letters, digits, '_', '.' and '-', "
            "e.g. `agentsgym new-env acme/Maze`"
        ) from None
    match = ENV_ID_PATTERN.match(env_id)
    assert match is not None
    if match.group("variant"):
        raise ScaffoldError(
            f"{env_name!r} names a variant ({match.group('variant')[1:]!r}): scaffold the base "
            f"env ({env_id[: match.start('variant')]}) and register the variant next to it in "
            "plugin.py, with its own default env_config"
        )
    namespace, name = match.group("namespace"), match.group("name")
    if namespace.lower() in RESERVED_NAMESPACES:
        raise ScaffoldError(
            f"namespace {namespace!r} belongs to agentsgym's own envs; pick your package's "
            "namespace, e.g. your organisation or project name"
        )
    words = [w for w in re.split(r"[^A-Za-z0-9]+", name) if w]
    prefix = "".join(w[0].upper() + w[1:] for w in words)
    if not prefix or prefix[0].isdigit():
        prefix = f"Env{prefix}"
    slug = re.sub(r"[^a-z0-9]+", "_", namespace.lower()).strip("_") or "env"
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", prefix).lower()
    return PackageNames(
        env_id=env_id,
        namespace=namespace,
        name=name,
        snake_name=snake,
        distribution=f"agentsgym-{slug.replace('_', '-')}",
        package=f"agentsgym_{slug}",
        entry_point_name=slug,
        agentsgym_requirement=_requirement("agentsgym"),
        tools_requirement=_requirement("agentsgym-tools"),
        gateway_requirement=_requirement("agentsgym-gateway"),
        env_class=f"{prefix}Env",
        config_class=f"{prefix}Config",
        state_class=f"{prefix}State",
        agent_class=f"{prefix}Agent",
        agent_name=f"{namespace}/{snake.replace('_', '-')}-scripted",
    )


def _requirement(distribution: str) -> str:
    """``NAME>=X.Y``: the minor version of ``distribution`` the package was scaffolded against."""
    try:
        major, minor = version(distribution).split(".")[:2]
    except (PackageNotFoundError, ValueError):
        return distribution
    return f"{distribution}>={major}.{minor}"


def render_package(
    names: PackageNames, *, tools: bool = False, harness: bool = False
) -> dict[str, str]:
    """The package's files: relative path -> content (``tools``: a tool env's package;
    ``harness``: a harness env's, an agent program run through agentsgym-gateway)."""
    kind = KINDS[kind_name(tools=tools, harness=harness)]
    values = names.model_dump()
    values.update({key: _render(text, values, key) for key, text in kind.wording.items()})
    for key, name in FRAGMENTS.items():
        values[key] = _render(_template(name), values, name).rstrip("\n")
    return {
        Template(target).substitute(values): _render(_template(template), values, template)
        for target, template in kind.files.items()
    }


def kind_name(*, tools: bool = False, harness: bool = False) -> str:
    """The :data:`KINDS` key of the options: ``plain``, ``tools`` or ``harness``.

    :raises ScaffoldError: both options (a harness env's tools are its program's).
    """
    if tools and harness:
        raise ScaffoldError(
            "--tools and --harness do not go together: a harness env's tools are its "
            "program's own (give the program its tools); pick one"
        )
    return "harness" if harness else "tools" if tools else "plain"


def _template(name: str) -> str:
    templates = resources.files(__package__).joinpath("templates")
    return templates.joinpath(name).read_text(encoding="utf-8")


def _render(text: str, values: dict[str, str], source: str) -> str:
    try:
        return Template(text).substitute(values)
    except (KeyError, ValueError) as exc:  # a template bug, not the user's
        raise ScaffoldError(f"scaffold template {source} is broken: {exc!r}") from exc


def write_package(
    env_name: str,
    directory: Path | str | None = None,
    *,
    tools: bool = False,
    harness: bool = False,
) -> tuple[PackageNames, Path, list[Path]]:
    """Write the package for ``env_name`` into ``directory`` (default ``./<distribution>``);
    return the names, the package folder, and the files written. ``tools``: a tool env
    (agentsgym-tools' ``ToolEnv``, a ``ScriptedToolAgent`` solver) instead of the plain one;
    ``harness``: a harness env (agentsgym-gateway's ``HarnessEnv`` running ``program.py``,
    a plain ``openai`` client loop, and a verifier of its answer file).

    :raises ScaffoldError: a bad name, both options, or a folder that is not empty (nothing
        is overwritten).
    """
    kind = kind_name(tools=tools, harness=harness)  # both options: refused first
    names = package_names(env_name)
    root = Path(directory) if directory is not None else Path(names.distribution)
    if _taken(root):
        raise ScaffoldError(
            f"{root} already exists and is not an empty folder; nothing was written. "
            + _free_name_advice(names, root, KINDS[kind].wording["new_env_options"])
        )
    written = []
    for relative, content in render_package(names, tools=tools, harness=harness).items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")
        written.append(path)
    logger.info("wrote %d files of %s into %s", len(written), names.distribution, root)
    return names, root, written


def _taken(folder: Path) -> bool:
    return folder.exists() and (not folder.is_dir() or any(folder.iterdir()))


def _installed(distribution: str) -> bool:
    try:
        version(distribution)
    except PackageNotFoundError:
        return False
    return True


def _free_name_advice(names: PackageNames, root: Path, options: str) -> str:
    """What to run instead when ``root`` is taken: a namespace whose distribution (the
    package's name, folder and entry point) is neither a folder beside ``root`` nor
    installed, so that both packages can be installed side by side."""
    tried = [f"{names.namespace}{options.replace(' --', '-')}"] if options else []
    tried += [f"{names.namespace}{n}" for n in range(2, 100)]
    for namespace in tried:
        free = package_names(f"{namespace}/{names.name}")
        if not _taken(root.parent / free.distribution) and not _installed(free.distribution):
            return (
                f"Another package takes a free name: `agentsgym new-env {free.namespace}/"
                f"{names.name}{options}` writes {free.distribution} (env "
                f"{free.env_id}) into ./{free.distribution}; or remove {root}. (--dir "
                f"another folder keeps the name {names.distribution}, which cannot be "
                "installed beside the one there.)"
            )
    return "Choose another namespace, or remove this folder"
