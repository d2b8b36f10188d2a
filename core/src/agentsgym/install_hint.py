"""What to say when a command, executor, URL scheme, agent or trainer is not installed.

The core knows no plugin by name, so the hint points where the names are: the table of
distributions in agentsgym's README (with each one's folder in a clone), and ``agentsgym
--version`` (what is installed). When the user's load settings kept a plugin out, the
hint says so: that plugin may be the one that provides the name.
"""

from __future__ import annotations

from agentsgym.plugins import LoadSettings

README_TABLE = "the table of distributions in agentsgym's README (\"The distributions\")"


def restricted_loading(settings: LoadSettings | None = None) -> str:
    """The load settings that keep installed plugins out, as the user set them, or ""."""
    settings = settings or LoadSettings.from_environ()
    limits = []
    if not settings.autoload:
        limits.append("AGENTSGYM_DISABLE_PLUGIN_AUTOLOAD is set")
    if settings.allowlist is not None:
        limits.append(f"AGENTSGYM_PLUGINS={','.join(sorted(settings.allowlist))}")
    if settings.blocklist:
        limits.append(f"AGENTSGYM_BLOCK_PLUGINS={','.join(sorted(settings.blocklist))}")
    return "; ".join(limits)


def not_installed_hint(kind: str) -> str:
    """One sentence (with a leading space) for a ``kind`` ("command", "executor", "env
    source"...) that no loaded plugin registered: where to find the distribution that
    provides it, and the load settings that may hide an installed one."""
    hint = (
        f" {kind.capitalize()}s come from plugin distributions: {README_TABLE} names the "
        "one that provides each and its folder; from a clone, install it with "
        "`pip install -e ./plugins/FOLDER`. `agentsgym --version` lists those installed."
    )
    limits = restricted_loading()
    if limits:
        hint += f" Plugin loading is restricted ({limits})."
    return hint
