"""Interactive paging through the selected episodes in a terminal.

One episode fills the screen; a prompt at the bottom reads a command:
``n`` or Enter (next), ``p`` (previous), ``N`` or ``j N`` (jump to episode #N),
``f``/``l`` (first/last), ``t`` (tokens on/off), ``?`` (the list), ``q`` (quit).
Input comes from a function so that tests (and other front ends) can drive it.
A search text is highlighted and counted in every episode shown (``--search``).

In a file of an env with roles a page is a game: the selected rows of its roles side
by side (:func:`~agentsgym_viewer.terminal.render_game`, as the printed view draws
them), each with its own rewards; ``n``/``p`` go to the next or previous game and
``N`` opens the game of row #N.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console
from rich.text import Text

from agentsgym_viewer.filtering import group_games, side_by_side
from agentsgym_viewer.model import ViewedEpisode
from agentsgym_viewer.terminal import episode_table, render_game
from agentsgym_viewer.tokens import TokenDecoder

HELP = "[n]ext (Enter)  [p]rev  [j]ump N  [f]irst  [l]ast  [t]okens  [?] list  [q]uit"


class Pager:
    """Pages through ``episodes`` (a filtered selection, in file order), a game (the
    rows of one trial's roles) a page; an episode without a role is a game alone."""

    def __init__(
        self,
        episodes: Sequence[ViewedEpisode],
        console: Console,
        *,
        decoder: TokenDecoder | None = None,
        show_tokens: bool = True,
        read: Callable[[str], str] | None = None,
        clear: bool = True,
        search: str | None = None,
    ) -> None:
        if not episodes:
            raise ValueError("nothing to page through")
        self.episodes = list(episodes)
        self.console = console
        self.decoder = decoder
        self.show_tokens = show_tokens
        self.read = read or (lambda prompt: console.input(prompt))
        self.clear = clear
        self.search = search
        self.games = group_games(self.episodes)
        self.position = 0
        self.focus: ViewedEpisode | None = None
        """The row jumped to (its role's column shows it), else the game's first."""
        self._positions = {e.index: i for i, game in enumerate(self.games) for e in game}
        self._rows = {e.index: e for e in self.episodes}

    def run(self, start_index: int | None = None) -> None:
        """Show episodes until the user quits (``q``, Ctrl-D or Ctrl-C)."""
        if start_index is not None and start_index in self._positions:
            self._go(self._positions[start_index], self._rows[start_index])
        message = ""
        show_list = False
        while True:
            self._draw(message, show_list)
            message, show_list = "", False
            try:
                command = self.read(f"{HELP}\n> ").strip().lower()
            except (EOFError, KeyboardInterrupt):
                return
            if command in ("q", "quit", "exit"):
                return
            message, show_list = self.handle(command)

    def handle(self, command: str) -> tuple[str, bool]:
        """Apply one command; returns a message to show and whether to show the list."""
        last = len(self.games) - 1
        unit = "game" if self.with_roles else "episode"
        if command in ("", "n", "next"):
            if self.position == last:
                return f"this is the last {unit}", False
            self._go(self.position + 1)
        elif command in ("p", "prev", "previous"):
            if self.position == 0:
                return f"this is the first {unit}", False
            self._go(self.position - 1)
        elif command == "f":
            self._go(0)
        elif command == "l":
            self._go(last)
        elif command == "t":
            self.show_tokens = not self.show_tokens
        elif command == "?":
            return "", True
        else:
            target = command[1:].strip() if command.startswith("j") else command
            if not target.lstrip("#").isdigit():
                return f"unknown command {command!r}", False
            index = int(target.lstrip("#"))
            if index not in self._positions:
                return f"episode #{index} is not in this selection", False
            self._go(self._positions[index], self._rows[index])
        return "", False

    def _go(self, position: int, focus: ViewedEpisode | None = None) -> None:
        self.position = position
        self.focus = focus

    @property
    def with_roles(self) -> bool:
        """Whether any page shows a game of several rows."""
        return any(len(game) > 1 for game in self.games)

    @property
    def current(self) -> ViewedEpisode:
        """The row jumped to, else the first row of the game shown."""
        return self.focus or self.games[self.position][0]

    @property
    def shown(self) -> list[ViewedEpisode]:
        """The rows the page draws: a row per role of the current game."""
        return side_by_side(self.current, self.games[self.position])

    def _draw(self, message: str, show_list: bool) -> None:
        if self.clear:
            self.console.clear()
        if show_list:
            self.console.print(episode_table(self.episodes, f"{len(self.episodes)} episodes"))
        else:
            self.console.print(
                render_game(
                    self.shown,
                    self.decoder,
                    show_tokens=self.show_tokens,
                    color=self.console.color_system is not None,
                    search=self.search,
                )
            )
        status = Text(self._where(), "bold")
        if message:
            status.append(f"  {message}", "yellow")
        self.console.print(status)

    def _where(self) -> str:
        """``episode 3 of 6 (#2)``, or ``game 1 of 2 (#0 x, #1 o)`` with roles."""
        if not self.with_roles:
            return f"episode {self.position + 1} of {len(self.games)} (#{self.current.index})"
        rows = ", ".join(f"#{e.index} {e.role}" for e in self.shown)
        return f"game {self.position + 1} of {len(self.games)} ({rows})"
