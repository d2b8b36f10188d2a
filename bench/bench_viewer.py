"""The trajectory viewer on a large file: load time, memory, page size, browser speed.

Usage: python bench/bench_viewer.py [--episodes N] [--turns T] [--no-browser]

Plays N GuessTheNumber episodes of about T turns each (bisection over a range of
2**T numbers, tiny-chatml tokenizer), writes them as parquet and JSONL, and times:
loading each file, drawing one episode for the terminal, printing the list, writing
the HTML page; then, in Debian's headless Chromium (Playwright), opening the page
until the list shows, selecting an episode (its messages and full token view) and
one search keystroke over every episode.
"""

from __future__ import annotations

import argparse
import io
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console

import agentsgym
from agentsgym.output import write_records
from agentsgym_classical import BisectAgent
from agentsgym_viewer import (
    EpisodeFilter,
    episode_table,
    load_decoder,
    load_trajectories,
    render_episode,
    write_html,
)


def timed(fn, repeats: int = 3):  # type: ignore[no-untyped-def]
    best, result = float("inf"), None
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def load_memory(path: Path, warm_up: Path) -> float:
    """RSS that loading ``path`` adds, in a fresh process warmed up on a small file."""
    script = (
        "import sys; from agentsgym_viewer import load_trajectories\n"
        "def rss():\n"
        "    status = open('/proc/self/status').read().split('VmRSS:')[1]\n"
        "    return int(status.split()[0]) / 1024\n"
        "load_trajectories(sys.argv[2])\n"
        "before = rss(); loaded = load_trajectories(sys.argv[1]); print(rss() - before)"
    )
    result = subprocess.run(
        [sys.executable, "-c", script, str(path), str(warm_up)],
        capture_output=True,
        text=True,
        check=True,
    )
    return float(result.stdout.strip())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=1000)
    parser.add_argument("--turns", type=int, default=20)
    parser.add_argument("--no-browser", action="store_true")
    args = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="bench-viewer-"))

    env = agentsgym.make(
        "agentsgym/GuessTheNumber-v0",
        tokenizer="agentsgym/tiny-chatml",
        env_config={"high": 2**args.turns, "max_steps_per_episode": args.turns + 2},
    )
    tasks = [{"seed": i} for i in range(args.episodes)]
    batch = env.run_trial(tasks, BisectAgent(), 1)
    records = batch.to_records()
    tokens = sum(len(r["full_token_ids"]) for r in records)
    turns = sum(r["num_turns"] for r in records) / len(records)
    print(f"{len(records)} episodes, {turns:.1f} turns and {tokens / len(records):.0f} tokens each")
    parquet = write_records(records, folder / "r.parquet")
    jsonl = write_records(records, folder / "r.jsonl")
    small = {
        suffix: write_records(records[:10], folder / f"small{suffix}")
        for suffix in (".parquet", ".jsonl")
    }
    del batch, records
    for path in (parquet, jsonl):
        print(f"{path.suffix} file: {path.stat().st_size / 2**20:.1f} MiB")

    seconds, loaded = timed(lambda: load_trajectories(parquet))
    print(f"load parquet: {seconds:.2f} s, {load_memory(parquet, small['.parquet']):.0f} MiB RSS")
    seconds, _ = timed(lambda: load_trajectories(jsonl))
    print(f"load jsonl: {seconds:.2f} s, {load_memory(jsonl, small['.jsonl']):.0f} MiB RSS")

    decoder = load_decoder("agentsgym/tiny-chatml")
    assert decoder is not None
    episode = loaded.episodes[len(loaded.episodes) // 2]

    def draw() -> None:
        out = Console(file=io.StringIO(), width=120, color_system="truecolor")
        out.print(render_episode(episode, decoder, color=True))

    seconds, _ = timed(draw)
    print(f"terminal: one episode with tokens: {seconds * 1000:.0f} ms")
    seconds, _ = timed(
        lambda: Console(file=io.StringIO(), width=120).print(episode_table(loaded.episodes, "all"))
    )
    print(f"terminal: list of every episode: {seconds * 1000:.0f} ms")
    seconds, _ = timed(lambda: EpisodeFilter(search="is higher").apply(loaded.episodes))
    print(f"filter --search over every episode: {seconds * 1000:.0f} ms")
    page = folder / "r.html"
    seconds, _ = timed(lambda: write_html(loaded, page, None, decoder))
    print(f"write html: {seconds:.2f} s, {page.stat().st_size / 2**20:.1f} MiB")
    if not args.no_browser:
        bench_browser(page, episode.index)
    shutil.rmtree(folder)


def bench_browser(page_path: Path, index: int) -> None:
    chromium = shutil.which("chromium")
    if chromium is None:
        print("browser: skipped (no chromium)")
        return
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        context = playwright.chromium.launch_persistent_context(
            tempfile.mkdtemp(prefix="bench-viewer-chromium-"),
            executable_path=chromium,
            headless=True,
            args=["--no-sandbox", "--disable-gpu", "--no-first-run"],
        )
        page = context.new_page()
        start = time.perf_counter()
        page.goto(page_path.as_uri())
        page.wait_for_selector("#list .item")
        print(f"browser: open until the list shows: {time.perf_counter() - start:.2f} s")
        ms = page.evaluate(
            """(i) => { const t = performance.now(); agentsgymViewer.select(i);
                 document.body.offsetHeight; return performance.now() - t; }""",
            index,
        )
        spans = page.eval_on_selector_all("#tokens-section .tokens span", "e => e.length")
        print(f"browser: select an episode ({spans} token spans): {ms:.0f} ms")
        ms = page.evaluate(
            """() => { const box = document.getElementById('f-search');
                 const t = performance.now(); box.value = 'is higher';
                 box.dispatchEvent(new Event('input')); document.body.offsetHeight;
                 return performance.now() - t; }"""
        )
        print(f"browser: one search keystroke over every episode: {ms:.0f} ms")
        nodes = page.evaluate("document.getElementsByTagName('*').length")
        print(f"browser: DOM elements: {nodes}")
        context.close()


if __name__ == "__main__":
    main()
