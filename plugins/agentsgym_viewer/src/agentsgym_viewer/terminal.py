"""The terminal view of an episode, as rich renderables (the CLI prints them).

An episode is drawn as a header (env, task/rollout index, final reward, turns,
truncated, error), its messages by role (an assistant's tool calls as ``call
name(arguments)`` lines) with each assistant turn's step reward and reward terms
(and a judge model's judgement of the step, whole: its prompt, reply and score),
and a token view: every token on a background coloured by who wrote it (grey: the
env and the chat template; blue/green/red: the agent, by the sign of the reward on
that token), alternating shades so token boundaries show. Without a colour terminal
(a pipe) agent tokens are bracketed ``⟦...⟧`` instead.

With a search text, its matches are highlighted in the text ``--search`` looks in
(env id, session, error, task data, messages; ``⟪...⟫`` without colour) and a line
under the header says how many there are, or that the episode has none.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from agentsgym_viewer.model import REPLY_TRUNCATED_KEY, ViewedEpisode, ViewedStep
from agentsgym_viewer.tokens import TokenDecoder, visible

ROLE_STYLES = {"system": "magenta", "user": "cyan", "assistant": "green", "tool": "yellow"}
ENV_STYLES = ("on grey15", "on grey27")
AGENT_STYLES = {
    0: ("on navy_blue", "on dark_blue"),
    1: ("on dark_green", "on green4"),
    -1: ("on dark_red", "on red3"),
}
AGENT_OPEN, AGENT_CLOSE = "\u27e6", "\u27e7"  # ⟦ ⟧
MATCH_STYLE = "bold black on yellow"
MATCH_OPEN, MATCH_CLOSE = "\u27ea", "\u27eb"  # ⟪ ⟫
MAX_INFO_CHARS = 160


@dataclass(frozen=True)
class Highlight:
    """Marks the matches of a search text, any case, in the text it draws."""

    search: str | None = None
    color: bool = True

    def text(self, plain: str, style: str = "") -> Text:
        text = Text(style=style)
        start = 0
        if self.search:
            for match in re.finditer(re.escape(self.search), plain, re.IGNORECASE):
                text.append(plain[start : match.start()])
                if self.color:
                    text.append(match.group(), MATCH_STYLE)
                else:  # a pipe drops styles: brackets keep the matches visible
                    text.append(MATCH_OPEN + match.group() + MATCH_CLOSE)
                start = match.end()
        text.append(plain[start:])
        return text


def fmt_reward(value: float) -> str:
    """A reward with its sign, e.g. ``+1``, ``-0.01``, ``+0.3333``."""
    return f"{value:+.4g}"


def episode_title(episode: ViewedEpisode, mark: Highlight | None = None) -> Text:
    """``#3  env-id  task 1 · rollout 0`` (plus episode and segment when they matter);
    in an env with roles ``#3  role x  env-id ...``: a narrow panel (a game's roles side
    by side) cuts the end of its title, never the role."""
    mark = mark or Highlight()
    role = [(f"role {episode.role}", "bold"), "  "] if episode.role is not None else []
    parts = []
    if episode.task_index is not None:
        parts.append(f"task {episode.task_index}")
    if episode.rollout_index is not None:
        parts.append(f"rollout {episode.rollout_index}")
    if episode.episode_index:
        parts.append(f"episode {episode.episode_index}")
    if (episode.num_segments or 1) > 1:
        parts.append(f"segment {(episode.segment_index or 0) + 1}/{episode.num_segments}")
    env = mark.text(episode.env_id, "bold cyan") if episode.env_id else "(env unknown)"
    return Text.assemble(
        (f"#{episode.index}", "bold"), "  ", *role, env, "  ", " \u00b7 ".join(parts)
    )


def status_text(episode: ViewedEpisode) -> Text:
    """``ok`` / ``failed`` (``failed, no reward`` when its reward could not be computed:
    a judge failed), ``truncated`` (out of steps), ``reply-cut`` (a reply cut at the
    generation limit), and ``correct``/``wrong`` for eval rows."""
    text = Text()
    if episode.unscored:
        text.append("failed, no reward", "bold red")
    elif episode.failed:
        text.append("failed", "bold red")
    else:
        text.append("ok", "green")
    if episode.truncated:
        text.append(" truncated", "yellow")
    if episode.cut_replies:
        text.append(" reply-cut", "yellow")
    if episode.free_shot:
        text.append(" free-shot", "dim")
    if episode.correct is not None:
        text.append(
            " correct" if episode.correct else " wrong", "green" if episode.correct else "red"
        )
    return text


def header(episode: ViewedEpisode, mark: Highlight | None = None) -> Panel:
    mark = mark or Highlight()
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row(
        "final reward", Text(fmt_reward(episode.final_reward), _reward_style(episode.final_reward))
    )
    grid.add_row("turns", str(episode.num_turns))
    grid.add_row("status", status_text(episode))
    cut = episode.truncated or bool(episode.cut_replies)
    grid.add_row("truncated", Text(episode.truncation, "yellow" if cut else ""))
    if episode.error is not None:
        grid.add_row("error", mark.text(episode.error, "red"))
    terms = episode.episode_reward_terms()
    if terms:
        grid.add_row("reward by source", _terms_text(terms))
    if episode.kind == "eval":
        if episode.answer is not None:
            grid.add_row("answer", Text(episode.answer))
        elif episode.role is None:  # a game's role gives none: nothing to say
            grid.add_row("answer", Text("none given", "dim"))
        if episode.graded is False:
            grid.add_row("graded", Text("no (a grader could not judge it)", "yellow"))
    if episode.session_id:
        grid.add_row("session", mark.text(episode.session_id, "dim"))
    grid.add_row("task", mark.text(_clip(episode.task_json), "dim"))
    border = "red" if episode.failed else "green" if episode.final_reward > 0 else "blue"
    title = episode_title(episode, mark)
    return Panel(grid, title=title, title_align="left", border_style=border)


def search_line(episode: ViewedEpisode, search: str) -> Text:
    """How many matches of ``search`` the episode has, or that it has none."""
    count = episode.search_matches(search)
    line = Text(f"search {search!r}: ", "bold")
    if count:
        line.append(f"{count} match{'es' if count > 1 else ''} in this episode", "yellow")
    else:
        line.append("no match in this episode (env id, session, error, task data, messages)", "red")
    return line


def step_line(step: ViewedStep | None, token_reward: float | None, token_count: int | None) -> Text:
    """What the file records about the step an assistant turn made."""
    line = Text(style="dim")
    if step is None:
        line.append("no step recorded (the episode failed at this turn)", "red")
        return line
    line.append(f"step {step.index}", "bold")
    if step.info.get(REPLY_TRUNCATED_KEY):
        line.append("  reply cut at the generation limit", "yellow")
    if step.reward is not None:
        line.append("  reward ")
        line.append(fmt_reward(step.reward), _reward_style(step.reward))
    if step.reward_terms:
        line.append("  terms ")
        line.append_text(_terms_text(step.reward_terms))
    if token_reward is not None:
        line.append(f"  reward on its {token_count} tokens ")
        line.append(fmt_reward(token_reward), _reward_style(token_reward))
    info = step.other_info
    if info:
        line.append("  info ")
        line.append(_clip(json.dumps(info, ensure_ascii=False, default=str)))
    return line


def judgement_lines(step: ViewedStep | None) -> list[RenderableType]:
    """A judge model's judgements of the step, whole: why the step scored what it did."""
    lines: list[RenderableType] = []
    for judgement in step.judgements if step is not None else ():
        head = Text("judge", "bold magenta")
        if judgement.score is not None:
            head.append("  score ")
            head.append(fmt_reward(judgement.score), _reward_style(judgement.score))
        if judgement.model is not None:
            head.append(f"  model {judgement.model}", "dim")
        if judgement.reused:
            head.append("  (the answer of an earlier request with the same prompt)", "dim")
        said = Table.grid(padding=(0, 1))
        said.add_column(style="bold")
        said.add_column()
        if judgement.prompt is not None:
            said.add_row("  prompt", Text(judgement.prompt, "dim"))
        if judgement.reply is not None:
            said.add_row("  reply", Text(judgement.reply))
        lines += [head, said]
    return lines


def call_line(call: str, mark: Highlight) -> Text:
    """One tool call of an assistant turn: ``call multiply({"a": 2, "b": 3})``."""
    line = Text("call ", "bold yellow")
    line.append_text(mark.text(call))
    return line


def messages(episode: ViewedEpisode, mark: Highlight | None = None) -> list[RenderableType]:
    """Each message in a panel titled by role; assistant turns end with their step."""
    mark = mark or Highlight()
    steps = episode.steps()
    spans = episode.turn_token_spans()
    token_rewards = episode.turn_token_rewards()
    rendered: list[RenderableType] = []
    turn = 0
    for message in episode.messages:
        style = ROLE_STYLES.get(message.role, "white")
        lines = [mark.text(message.content)] if message.content or not message.tool_calls else []
        lines += [call_line(text, mark) for text in message.call_texts]
        body: RenderableType = Group(*lines)
        if message.role == "assistant":
            step = steps[turn] if turn < len(steps) else None
            reward = token_rewards[turn] if token_rewards is not None else None
            count = spans[turn][1] - spans[turn][0] if spans is not None else None
            body = Group(*lines, Text(), step_line(step, reward, count), *judgement_lines(step))
            turn += 1
        title = Text(message.title, style)
        rendered.append(Panel(body, title=title, title_align="left", border_style=style))
    if not episode.messages:
        rendered.append(Text("(no messages: the episode failed before its first prompt)", "dim"))
    return rendered


def token_view(
    episode: ViewedEpisode, decoder: TokenDecoder | None, *, color: bool
) -> Panel | None:
    """The coloured token stream, or None for rows without tokens (eval files)."""
    tokens = episode.tokens
    if tokens is None:
        return None
    text = Text()
    ids = tokens.ids.tolist()
    pieces: Sequence[str] = decoder.pieces(ids) if decoder is not None else [f"{i} " for i in ids]
    in_agent = False
    triples = zip(pieces, tokens.agent_mask.tolist(), tokens.rewards.tolist())
    for pos, (piece, mask, reward) in enumerate(triples):
        shown = visible(piece)
        if not color:
            if mask and not in_agent:
                text.append(AGENT_OPEN)
            elif not mask and in_agent:
                text.append(AGENT_CLOSE)
            in_agent = bool(mask)
            text.append(shown)
            continue
        if mask:
            sign = (reward > 0) - (reward < 0)
            style = AGENT_STYLES[sign][pos % 2]
        else:
            style = ENV_STYLES[pos % 2]
        text.append(shown, style)
    if in_agent:
        text.append(AGENT_CLOSE)
    agent = tokens.num_agent_tokens
    source = f"tokenizer {decoder.name}" if decoder is not None else "ids (no tokenizer)"
    title = f"tokens: {len(tokens.ids)}, {agent} by the agent \u00b7 {source}"
    return Panel(text, title=title, title_align="left", subtitle=legend(color), border_style="dim")


def legend(color: bool) -> Text:
    if not color:
        return Text(f"{AGENT_OPEN}agent tokens{AGENT_CLOSE}, the rest env/template")
    return Text.assemble(
        (" env/template ", ENV_STYLES[1]),
        " ",
        (" agent, reward 0 ", AGENT_STYLES[0][1]),
        " ",
        (" agent, reward > 0 ", AGENT_STYLES[1][1]),
        " ",
        (" agent, reward < 0 ", AGENT_STYLES[-1][1]),
    )


def render_episode(
    episode: ViewedEpisode,
    decoder: TokenDecoder | None = None,
    *,
    show_tokens: bool = True,
    color: bool = True,
    search: str | None = None,
) -> Group:
    """The whole terminal view of one episode; ``search``: its matches highlighted and
    counted."""
    mark = Highlight(search, color)
    parts: list[RenderableType] = [header(episode, mark)]
    if search:
        parts.append(search_line(episode, search))
    parts += messages(episode, mark)
    if show_tokens:
        tokens = token_view(episode, decoder, color=color)
        if tokens is not None:
            parts.append(tokens)
    return Group(*parts)


def render_game(
    game: Sequence[ViewedEpisode],
    decoder: TokenDecoder | None = None,
    *,
    show_tokens: bool = True,
    color: bool = True,
    search: str | None = None,
) -> RenderableType:
    """The roles of one game side by side: a column per role, each its own episode view
    (what that role saw and did); one episode alone is drawn as :func:`render_episode`."""
    if len(game) < 2:
        return render_episode(game[0], decoder, show_tokens=show_tokens, color=color, search=search)
    grid = Table.grid(expand=True, padding=(0, 1))
    for _ in game:
        grid.add_column(ratio=1)
    views = [
        render_episode(episode, decoder, show_tokens=show_tokens, color=color, search=search)
        for episode in game
    ]
    grid.add_row(*views)
    return grid


def episode_table(
    episodes: Sequence[ViewedEpisode], title: str, caption: str | None = None
) -> Table:
    """One line per episode: the list the pager and ``--list`` show."""
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left")
    with_roles = any(e.role is not None for e in episodes)  # a column only where it says something
    columns = [("#", "right"), ("env", "left"), ("task", "right"), ("rollout", "right")]
    columns += [("role", "left")] if with_roles else []
    columns += [("reward", "right"), ("turns", "right"), ("status", "left")]
    for name, justify in columns:
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for e in episodes:
        role = [e.role or ""] if with_roles else []
        table.add_row(
            str(e.index),
            e.env_id or "?",
            _opt(e.task_index),
            _opt(e.rollout_index),
            *role,
            Text(fmt_reward(e.final_reward), _reward_style(e.final_reward)),
            str(e.num_turns),
            status_text(e),
        )
    return table


def _opt(value: Any) -> str:
    return "" if value is None else str(value)


def _reward_style(value: float) -> str:
    return "green" if value > 0 else "red" if value < 0 else ""


def _terms_text(terms: dict[str, float]) -> Text:
    text = Text()
    for i, (name, value) in enumerate(terms.items()):
        if i:
            text.append(", ")
        text.append(f"{name} ")
        text.append(fmt_reward(value), _reward_style(value))
    return text


def _clip(text: str, limit: int = MAX_INFO_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "\u2026"
