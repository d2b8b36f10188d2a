"""``agentsgym finish-output OUT``: write the output of an interrupted run from its journal."""

from __future__ import annotations

from pathlib import Path

import typer

from agentsgym.cli.terminal import console
from agentsgym.output import finish_output
from agentsgym.output.paths import OutputPaths


def finish_output_command(
    out: Path = typer.Argument(  # noqa: B008
        ..., help="the --out of an interrupted rollout or eval run"
    ),
) -> None:
    """Write the output of an interrupted run from the trials it journaled.

    A .parquet output is written, a torn end of a .jsonl output is cut. The run can
    still be continued with --resume afterwards; an eval run gets its summary once
    every sample is in (run its command again with --resume)."""
    result = finish_output(out)
    command = result.manifest.command
    console.print(f"{result.path}: {result.trials} of {result.planned} trials", highlight=False)
    if not result.complete:
        left, journal = result.planned - result.trials, OutputPaths(result.path).journal.name
        console.print(
            f"[yellow]the run is not complete[/]: run its command again with --resume to play "
            f"the other {left} trials (its journal {journal} is kept)",
            highlight=False,
        )
    elif command != "rollout":
        # A derived file such as eval's summary is the command's own to write.
        console.print(
            f"run the same `agentsgym {command}` command with --resume to finish what it "
            "writes from these trials (it plays nothing more)",
            highlight=False,
        )
