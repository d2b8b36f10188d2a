"""``agentsgym new-env`` on the command line: what it writes and says, and its errors;
the old ``agentsgym.scaffold`` import path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym_scaffold import package_names, render_package

runner = CliRunner()


def cli(*args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "agentsgym", *args],
        check=False,
        capture_output=True,
        text=True,
        cwd=cwd,
        env={**os.environ, "COLUMNS": "200", **env},
    )


def invoke(*args: str) -> str:
    result = runner.invoke(build_app(), list(args), env={"COLUMNS": "200"}, prog_name="agentsgym")
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def test_new_env_writes_the_package_and_says_what_next(tmp_path: Path) -> None:
    target = tmp_path / "pkg"
    text = invoke("new-env", "acme/Maze", "--dir", str(target))
    assert "env acme/Maze-v0" in text and "agentsgym check-env acme/Maze-v0" in text
    # the install line keeps its [test] extra (rich markup must not eat it)
    assert f"pip install -e '{target}[test]'" in text
    assert (target / "pyproject.toml").is_file()
    assert (target / "src" / "agentsgym_acme" / "env.py").is_file()


def test_new_env_tools_writes_a_tool_env(tmp_path: Path) -> None:
    target = tmp_path / "pkg"
    text = invoke("new-env", "acme/Maze", "--tools", "--dir", str(target))
    assert "env acme/Maze-v0" in text
    # the tool package that test_scaffold_tools installs and plays, file for file
    expected = render_package(package_names("acme/Maze"), tools=True)
    written = {
        path.relative_to(target).as_posix(): path.read_text()
        for path in target.rglob("*")
        if path.is_file()
    }
    assert written == expected


def test_new_env_harness_writes_a_harness_env(tmp_path: Path) -> None:
    target = tmp_path / "pkg"
    text = invoke("new-env", "acme/Spell", "--harness", "--dir", str(target))
    assert "env acme/Spell-v0" in text and "src/agentsgym_acme/program.py" in text
    # the harness package that test_scaffold_harness installs and checks, file for file
    expected = render_package(package_names("acme/Spell"), harness=True)
    written = {
        path.relative_to(target).as_posix(): path.read_text()
        for path in target.rglob("*")
        if path.is_file()
    }
    assert written == expected


def test_new_env_refuses_tools_with_harness(tmp_path: Path) -> None:
    result = cli("new-env", "acme/Maze", "--tools", "--harness", "--dir", str(tmp_path / "p"))
    assert result.returncode == 2, result.stdout
    assert "--tools and --harness do not go together" in result.stderr
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("Maze", "is not NAMESPACE/Name"),
        ("acme/Ma ze", "is not of the form 'namespace/Name-vN'"),
        ("acme/Maze-v0-hard", "names a variant"),
        ("agentsgym/Maze", "belongs to agentsgym's own envs"),
    ],
)
def test_new_env_refuses_bad_names_with_a_clear_error(
    tmp_path: Path, name: str, message: str
) -> None:
    result = cli("new-env", name, "--dir", str(tmp_path / "pkg"))
    assert result.returncode == 2, result.stdout
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "pkg").exists()


def test_new_env_never_overwrites(tmp_path: Path) -> None:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "mine.txt").write_text("keep")
    result = cli("new-env", "acme/Maze", "--dir", str(tmp_path / "pkg"))
    assert result.returncode == 2 and "not an empty folder; nothing was written" in result.stderr
    assert sorted(p.name for p in (tmp_path / "pkg").iterdir()) == ["mine.txt"]


def test_a_second_package_of_a_namespace_is_offered_a_free_name(tmp_path: Path) -> None:
    """`new-env NAME --harness` after the plain scaffold: the default folder, named after
    the distribution, is taken; the refusal names a namespace whose distribution is free
    (no folder, not installed), and that command works."""
    invoke("new-env", "acme/Maze", "--dir", str(tmp_path / "agentsgym-acme"))
    result = cli("new-env", "acme/Maze", "--harness", cwd=tmp_path)
    said = " ".join(result.stderr.split())
    assert result.returncode == 2 and "nothing was written" in said, said
    assert "`agentsgym new-env acme-harness/Maze --harness` writes agentsgym-acme-harness" in said
    again = cli("new-env", "acme-harness/Maze", "--harness", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert (tmp_path / "agentsgym-acme-harness" / "src" / "agentsgym_acme_harness").is_dir()
    # the plain one's next free name skips the taken folders
    third = cli("new-env", "acme/Maze", cwd=tmp_path)
    assert "`agentsgym new-env acme2/Maze` writes agentsgym-acme2" in " ".join(third.stderr.split())


WORKSPACE = Path(__file__).resolve().parents[3]
"""The clone of agentsgym these tests run in: the folders an install line names."""


def project_of(folder: Path) -> dict[str, Any]:
    tomllib = pytest.importorskip("tomllib" if sys.version_info >= (3, 11) else "tomli")
    return tomllib.loads((folder / "pyproject.toml").read_text())["project"]  # type: ignore[no-any-return]


def agentsgym_needs(project: dict[str, Any]) -> set[str]:
    """The agentsgym distributions a project depends on (none of them is on an index)."""
    from packaging.requirements import Requirement

    names = {Requirement(r).name for r in project.get("dependencies", [])}
    return {name for name in names if name == "agentsgym" or name.startswith("agentsgym-")}


@pytest.mark.parametrize("kind", ["--harness", "--tools"])
def test_the_printed_install_lines_work_in_their_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str
) -> None:
    """With nothing installed, the steps printed install, one after the other, each
    agentsgym distribution after those it depends on (read from each folder's
    pyproject: the gateway's needs, whatever they are), the written package last; no
    folder is named that the package does not need."""
    from agentsgym_scaffold import commands

    monkeypatch.setattr(commands, "find_spec", lambda module: None)  # nothing installed
    target = tmp_path / "pkg"
    text = invoke("new-env", "acme/Maze", kind, "--dir", str(target))
    steps = [line.split("#")[0].split() for line in text.splitlines() if "pip install" in line]
    assert [step[:3] for step in steps] == [["pip", "install", "-e"]] * 2, text
    clone, package = steps
    assert package[3:] == [repr(f"{target}[test]")]
    installed: set[str] = set()
    for flag, folder in zip(clone[2::2], clone[3::2], strict=True):
        assert flag == "-e" and (WORKSPACE / folder / "pyproject.toml").is_file(), folder
        project = project_of(WORKSPACE / folder)
        assert agentsgym_needs(project) - {project["name"]} <= installed, (folder, installed)
        installed.add(project["name"])
    needed = agentsgym_needs(project_of(target))
    assert needed <= installed
    closure = set(needed)
    for name in sorted(needed):
        folder = "core" if name == "agentsgym" else f"plugins/{name.replace('-', '_')}"
        closure |= agentsgym_needs(project_of(WORKSPACE / folder))
    assert installed == closure  # nothing the package does not need


def test_new_env_is_listed_with_the_authors_commands_and_completes() -> None:
    group = typer.main.get_command(build_app())
    command = group.commands["new-env"]  # type: ignore[attr-defined]
    assert command.rich_help_panel == "Write an env"
    names = cli(COMP_WORDS="agentsgym new", COMP_CWORD="1", _AGENTSGYM_COMPLETE="complete_bash")
    assert names.stdout.split() == ["new-env"]
