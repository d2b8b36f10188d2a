"""``agentsgym finish-output OUT``: write the output of an interrupted run from its journal."""

from __future__ import annotations

from pathlib import Path

import typer

from agentsgym.cli import app, console
from agentsgym.output import finish_output
from agentsgym.output.paths import OutputPaths


@app.command("finish-output")
def finish_output_command(
    out: Path = typer.Argument(..., help="the --out of an interrupted rollout or eval run"),
) -> None:
    """Write OUT from the trials an interrupted run journaled (a .parquet output is
    written, a torn end of a .jsonl output is cut). The run can still be continued
    with --resume afterwards; an eval run gets its summary once every sample is in."""
    result = finish_output(out)
    command = result.manifest.command
    console.print(f"{result.path}: {result.trials} of {result.planned} trials", highlight=False)
    if not result.complete:
        left = result.planned - result.trials
        console.print(
            f"[yellow]the run is not complete[/]: run its command again with --resume to play "
            f"the other {left} trials (its journal "
            f"{OutputPaths(result.path).journal.name} is kept)",
            highlight=False,
        )
    elif command == "eval":
        from agentsgym.cli.evaluate import write_summary

        write_summary(result)
        console.print(f"summary: {OutputPaths(result.path).summary}", highlight=False)
