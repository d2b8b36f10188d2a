"""``agentsgym view --html``: the page in a real headless Chromium (Debian's).

Driven with Playwright against /usr/bin/chromium (no browser download). Skipped with
the reason when Chromium or Playwright is absent. The page must open without a
script error or a network request, list the episodes, and filter them exactly as
the terminal's EpisodeFilter does.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from agentsgym.cli import build_app
from agentsgym.testing import run_cli
from agentsgym_viewer import EpisodeFilter, TrajectoryFile, load_trajectories
from viewer_episodes import COUNTDOWN, GUESS, HOSTILE, play, with_step_columns, write

pytestmark = pytest.mark.timeout(120)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    if CHROMIUM is None:
        pytest.skip("Chromium is not installed (apt-get install -y chromium)")
    sync_api = pytest.importorskip(
        "playwright.sync_api", reason="playwright is not installed (pip install playwright)"
    )
    with sync_api.sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            str(tmp_path_factory.mktemp("chromium-profile")),
            executable_path=CHROMIUM,
            headless=True,
            args=CHROMIUM_ARGS,
        )
        context.set_default_timeout(15_000)
        yield context
        context.close()


@pytest.fixture(scope="module")
def rollouts(tmp_path_factory: pytest.TempPathFactory) -> tuple[TrajectoryFile, Path]:
    """The played episodes with per-step reward columns, and their page."""
    folder = tmp_path_factory.mktemp("viewer-html")
    source = write(with_step_columns(play()), folder / "rollouts.parquet")
    page = folder / "rollouts.html"
    result = CliRunner().invoke(build_app(), ["view", str(source), "--html", str(page)])
    assert result.exit_code == 0, (result.output, result.exception)
    assert "wrote 6 episodes" in result.output
    return load_trajectories(source), page


class Page:
    """One opened page, with every script error and request it made."""

    def __init__(self, browser: Any, path: Path) -> None:
        self.errors: list[str] = []
        self.requests: list[str] = []
        self.page = browser.new_page()
        self.page.on("pageerror", lambda exc: self.errors.append(str(exc)))
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("request", lambda r: self.requests.append(r.url))
        self.page.goto(path.as_uri())
        self.page.wait_for_selector("#list .item, #list .none")

    def listed(self) -> list[int]:
        return [
            int(i)
            for i in self.page.eval_on_selector_all(
                "#list .item", "els => els.map(e => e.dataset.i)"
            )
        ]

    def reset(self) -> None:
        self.page.click("#f-reset")


def indices(trajectories: TrajectoryFile, **filters: Any) -> list[int]:
    return [e.index for e in EpisodeFilter(**filters).apply(trajectories.episodes)]


def test_the_page_lists_the_episodes_and_filters_change_the_list(
    browser: Any, rollouts: tuple[TrajectoryFile, Path]
) -> None:
    trajectories, path = rollouts
    view = Page(browser, path)
    page = view.page
    everything = [e.index for e in trajectories.episodes]
    assert view.listed() == everything == [0, 1, 2, 3, 4, 5]
    assert page.text_content("#count") == "6 of 6 episodes"
    assert page.eval_on_selector_all("#f-env option", "els => els.map(e => e.value)") == [
        "",
        GUESS,
        COUNTDOWN,
    ]

    page.select_option("#f-env", COUNTDOWN)
    assert view.listed() == indices(trajectories, env=COUNTDOWN) == [4, 5]
    page.check("#f-failed")
    assert view.listed() == indices(trajectories, env=COUNTDOWN, failed=True) == [5]
    view.reset()
    assert view.listed() == everything

    page.check("#f-failed")
    assert view.listed() == indices(trajectories, failed=True) == [2, 5]
    view.reset()

    page.fill("#f-min", "0.9")
    assert view.listed() == indices(trajectories, min_reward=0.9) == [0, 3, 4]
    page.fill("#f-max", "1")
    assert view.listed() == indices(trajectories, min_reward=0.9, max_reward=1) == [0, 3]
    page.fill("#f-min", "")
    page.fill("#f-max", "0")
    assert view.listed() == indices(trajectories, max_reward=0) == [1, 2]
    view.reset()

    for text in ("EXPLODED", '"target": 1000', "[12]", "guessthenumber", "Say 2."):
        page.fill("#f-search", text)
        assert view.listed() == indices(trajectories, search=text), text
    page.fill("#f-search", "no episode says this")
    assert view.listed() == [] and "No episode matches" in page.text_content("#list")
    assert page.text_content("#count") == "0 of 6 episodes"

    assert view.errors == []
    assert all(url.startswith("file://") for url in view.requests), view.requests
    page.close()


def test_the_selected_episode_shows_messages_step_rewards_and_tokens(
    browser: Any, rollouts: tuple[TrajectoryFile, Path]
) -> None:
    trajectories, path = rollouts
    view = Page(browser, path)
    page = view.page
    page.click('#list .item[data-i="1"]')
    detail = page.text_content("#detail")
    assert "#1  " + GUESS in detail and "truncated" in detail
    assert "25 is wrong; the number is lower." in detail and "My guess is [12]." in detail
    steps = page.eval_on_selector_all("#detail .step", "els => els.map(e => e.textContent)")
    assert len(steps) == 3
    assert all(
        "reward -0.05" in s and "terms format -0.05" in s and "reward on its" in s for s in steps
    )

    episode = trajectories.episodes[1]
    assert episode.tokens is not None
    tokens = page.eval_on_selector_all(
        "#tokens-section .tokens span", "els => els.map(e => [e.className, e.textContent])"
    )
    assert len(tokens) == len(episode.tokens.ids)
    assert [cls == "a" for cls, _ in tokens] == [
        bool(m) for m in episode.tokens.agent_mask.tolist()
    ]
    assert "".join(text for _, text in tokens).startswith("<|im_start|>user\u21b5\nI am thinking")

    page.keyboard.press("j")  # keyboard: next episode in the list
    assert "#2  " in page.text_content("#detail h2")
    assert "ValueError: task_data target 1000" in page.text_content("#detail")
    assert page.evaluate("location.hash") == "#ep=2"
    assert view.errors == []
    page.close()


def test_episode_text_is_shown_as_text_never_run(
    browser: Any, rollouts: tuple[TrajectoryFile, Path]
) -> None:
    _, path = rollouts
    view = Page(browser, path)
    page = view.page
    page.click('#list .item[data-i="3"]')
    contents = page.eval_on_selector_all(
        "#detail .msg.assistant .content", "els => els.map(e => e.textContent)"
    )
    assert contents == [HOSTILE]
    assert page.evaluate("window.__pwned") is None
    assert page.eval_on_selector_all("#detail .content *", "els => els.length") == 0
    assert len(page.query_selector_all("script")) == 2  # the data and the viewer's own
    assert view.errors == []
    page.close()


def test_a_large_file_is_listed_in_chunks(
    browser: Any, rollouts: tuple[TrajectoryFile, Path], tmp_path: Path
) -> None:
    trajectories, _ = rollouts
    records = [
        {**e.model_dump(exclude={"index", "kind", "tokens"}), "full_token_ids": None}
        for e in trajectories.episodes
    ] * 110
    source = write(records, tmp_path / "many.jsonl")
    path = tmp_path / "many.html"
    result = CliRunner().invoke(build_app(), ["view", str(source), "--html", str(path)])
    assert result.exit_code == 0, result.output
    view = Page(browser, path)
    page = view.page
    assert page.text_content("#count") == "660 of 660 episodes"
    assert len(view.listed()) == 300  # the first chunk only
    page.click("#list .more")
    assert len(view.listed()) == 600
    page.click("#list .more")
    assert view.listed() == list(range(660))
    page.check("#f-failed")
    assert len(view.listed()) == 220
    assert view.errors == []
    page.close()


def test_wrong_only_selects_as_the_terminal_does(
    browser: Any, rollouts: tuple[TrajectoryFile, Path]
) -> None:
    trajectories, path = rollouts
    view = Page(browser, path)
    page = view.page
    page.check("#f-wrong")
    assert view.listed() == indices(trajectories, wrong=True) == [1, 2, 5]
    page.check("#f-failed")
    assert view.listed() == indices(trajectories, wrong=True, failed=True) == [2, 5]
    assert view.errors == []
    page.close()


@pytest.fixture(scope="module")
def eval_page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An `agentsgym eval` file (tasks 0 and 1 right, task 2 wrong, nothing failed)."""
    pytest.importorskip("agentsgym_eval", reason="agentsgym-eval writes eval files")
    folder = tmp_path_factory.mktemp("eval-html")
    out, page = folder / "results.parquet", folder / "results.html"
    result = run_cli(
        "eval",
        GUESS,
        "-k",
        "2",
        "--num-tasks",
        "3",
        "--env-config",
        "max_steps_per_episode=1",
        "--env-config",
        "high=4",
        "--out",
        str(out),
    )
    assert result.code == 0, result.output
    result = run_cli("view", str(out), "--html", str(page))
    assert result.code == 0, result.output
    return page


def test_failed_only_on_an_eval_page_points_to_wrong_only(browser: Any, eval_page: Path) -> None:
    view = Page(browser, eval_page)
    page = view.page
    assert page.text_content("#run").startswith(f"run: agentsgym eval {GUESS} -k 2")
    page.check("#f-failed")
    assert view.listed() == []
    hint = page.text_content("#list .none")
    assert "None failed (ended with an error), but 2 have answers judged wrong" in hint
    page.uncheck("#f-failed")
    page.check("#f-wrong")
    assert view.listed() == [4, 5]
    page.fill("#f-min", "1")  # the wrong ones have reward 0: no hint that would not help
    page.check("#f-failed")
    assert "judged wrong" not in page.text_content("#list .none")
    assert view.errors == []
    page.close()


def test_search_matches_are_marked_and_counted(
    browser: Any, rollouts: tuple[TrajectoryFile, Path]
) -> None:
    trajectories, path = rollouts
    view = Page(browser, path)
    page = view.page
    page.click('#list .item[data-i="1"]')
    assert page.query_selector("#detail .search-count") is None  # no search, no line
    page.fill("#f-search", "LOWER")
    count = trajectories.episodes[1].search_matches("LOWER")
    assert count == 2
    assert page.text_content("#detail .search-count") == (
        "search \u201cLOWER\u201d: 2 matches in this episode"
    )
    marks = page.eval_on_selector_all("#detail mark", "els => els.map(e => e.textContent)")
    assert marks == ["lower"] * count
    page.fill("#f-search", "exploded")  # #1 stays shown, with no match
    assert "no match in this episode" in page.text_content("#detail .search-count")
    assert page.query_selector_all("#detail mark") == []
    assert view.errors == []
    page.close()


def test_an_episode_page_with_a_search_shows_the_episode_and_its_count(
    browser: Any, rollouts: tuple[TrajectoryFile, Path], tmp_path: Path
) -> None:
    trajectories, _ = rollouts
    source = trajectories.path
    for search, line in (("lower", "2 matches in this episode"), ("exploded", "no match")):
        path = tmp_path / f"{search}.html"
        result = run_cli(
            "view", str(source), "--episode", "1", "--search", search, "--html", str(path)
        )
        assert result.code == 0 and "wrote 1 episodes" in result.stdout, result.output
        view = Page(browser, path)
        page = view.page
        assert page.input_value("#f-search") == search  # the page opens with the search
        assert "#1  " in page.text_content("#detail h2")
        assert line in page.text_content("#detail .search-count")
        assert view.listed() == ([1] if search == "lower" else [])
        assert view.errors == []
        page.close()
