"""How many trained tokens were older than the staleness bound, from a run's rows alone.

    python bench/audit_staleness.py RUN_DIR --max-staleness K

Reads ``RUN_DIR/played.jsonl`` (the rows ``agentsgym train`` plays) with the standard
library only, nothing of agentsgym: a row of training step ``s`` was trained at
version ``s - 1``, so an agent token (``agent_token_mask`` 1) whose
``per_token_policy_versions`` entry is ``v`` was ``s - 1 - v`` versions old. Prints
the agent tokens, how many had a known version, the largest age and how many were
beyond ``K`` (``K`` = 0 for a synchronous run), per step and in all; exits 1 if any
was. Rows of failed episodes (never trained) and rows without a step are left out and
counted. A token beyond the bound in a row does not by itself mean it was trained:
the trainers mask such tokens (the step log's ``stale_tokens_masked``) and discard
groups beyond it (``groups_discarded``); both are 0 when this audit finds none.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from pathlib import Path


def audit(played: Path, bound: int) -> dict[str, int]:
    per_step: dict[int, list[int]] = defaultdict(lambda: [0, 0, 0, -1])
    skipped = 0
    for line in played.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        step = row.get("step")
        versions = row.get("per_token_policy_versions")
        if row.get("error") or not isinstance(step, int) or versions is None:
            skipped += 1
            continue
        counts = per_step[step]
        for mask, version in zip(row["agent_token_mask"], versions):
            if not mask:
                continue
            counts[0] += 1
            if version < 0:
                continue
            age = step - 1 - version
            counts[1] += 1
            counts[2] += age > bound
            counts[3] = max(counts[3], age)
    print(f"{'step':>5} {'agent tokens':>13} {'versioned':>10} {'max age':>8} {'beyond':>7}")
    for step in sorted(per_step):
        tokens, known, beyond, oldest = per_step[step]
        print(f"{step:>5} {tokens:>13} {known:>10} {oldest:>8} {beyond:>7}")
    total = [sum(c[i] for c in per_step.values()) for i in range(3)]
    oldest = max((c[3] for c in per_step.values()), default=-1)
    print(f"{'all':>5} {total[0]:>13} {total[1]:>10} {oldest:>8} {total[2]:>7}")
    print(f"rows left out (failed, or no step): {skipped}")
    return {"tokens": total[0], "versioned": total[1], "beyond": total[2], "max_age": oldest}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir", type=Path)
    parser.add_argument("--max-staleness", type=int, default=0)
    args = parser.parse_args()
    result = audit(args.run_dir / "played.jsonl", args.max_staleness)
    return 1 if result["beyond"] else 0


if __name__ == "__main__":
    sys.exit(main())
