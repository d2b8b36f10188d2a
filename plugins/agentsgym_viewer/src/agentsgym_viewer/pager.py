"""Interactive paging through the selected episodes in a terminal.

One episode fills the screen; a prompt at the bottom reads a command:
``n`` or Enter (next), ``p`` (previous), ``N`` or ``j N`` (jump to episode #N),
``f``/``l`` (first/last), ``t`` (tokens on/off), ``?`` (the list), ``q`` (quit).
Input comes from a function so that tests (and other front ends) can drive it.
A search text is highlighted and counted in every episode shown (``--search``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rich.console import Console
from rich.text import Text

from agentsgym_viewer.model import ViewedEpisode
from agentsgym_viewer.terminal import episode_table, render_episode
from agentsgym_viewer.tokens import TokenDecoder

HELP = "[n]ext (Enter)  [p]rev  [j]ump N  [f]irst  [l]ast  [t]okens  [?] list  [q]uit"


class Pager:
    """Pages through ``episodes`` (a filtered selection, in file order)."""

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
        self.position = 0
        self._positions = {e.index: i for i, e in enumerate(self.episodes)}

    def run(self, start_index: int | None = None) -> None:
        """Show episodes until the user quits (``q``, Ctrl-D or Ctrl-C)."""
        if start_index is not None:
            self.position = self._positions.get(start_index, 0)
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
        last = len(self.episodes) - 1
        if command in ("", "n", "next"):
            if self.position == last:
                return "this is the last episode", False
            self.position += 1
        elif command in ("p", "prev", "previous"):
            if self.position == 0:
                return "this is the first episode", False
            self.position -= 1
        elif command == "f":
            self.position = 0
        elif command == "l":
            self.position = last
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
            self.position = self._positions[index]
        return "", False

    @property
    def current(self) -> ViewedEpisode:
        return self.episodes[self.position]

    def _draw(self, message: str, show_list: bool) -> None:
        if self.clear:
            self.console.clear()
        if show_list:
            self.console.print(episode_table(self.episodes, f"{len(self.episodes)} episodes"))
        else:
            self.console.print(
                render_episode(
                    self.current,
                    self.decoder,
                    show_tokens=self.show_tokens,
                    color=self.console.color_system is not None,
                    search=self.search,
                )
            )
        status = Text(
            f"episode {self.position + 1} of {len(self.episodes)} (#{self.current.index})",
            "bold",
        )
        if message:
            status.append(f"  {message}", "yellow")
        self.console.print(status)
