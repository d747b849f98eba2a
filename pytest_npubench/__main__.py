"""``python -m pytest_npubench merge SHARD_DIR... [--regen-baselines] [--npubench-artifacts=DIR]``

Merges the artifact folders of a sweep run as ``--npubench-shard K/N`` on several machines: it
checks that the shards belong together (see :mod:`pytest_npubench.shard`), then runs the
shards' own pytest command in replay mode, from the current folder (the project root), so
results.json, the figures, summary.md, index.html and (with --regen-baselines) the baselines
are what one unsharded run writes. pytest runs in a child process of the same interpreter.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_npubench.shard import ShardError, load_shards, replay_payloads


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m pytest_npubench")
    commands = parser.add_subparsers(dest="command", required=True)
    merge = commands.add_parser("merge", help="merge the artifact folders of sharded runs")
    merge.add_argument("shards", nargs="+", type=Path, metavar="SHARD_DIR")
    merge.add_argument(
        "--regen-baselines",
        action="store_true",
        help="the shards ran with --regen-baselines: write the merged baselines",
    )
    merge.add_argument(
        "--npubench-artifacts",
        metavar="DIR",
        default=None,
        help="where the merged artifacts go (default: the shards' own setting)",
    )
    return parser


def merge(argv: Sequence[str]) -> int:
    """Run the merge; the exit code is pytest's (0: every config passes its gate)."""
    args = _parser().parse_args(argv)
    try:
        shards = load_shards(args.shards)
    except ShardError as exc:
        print(f"npubench merge: {exc}", file=sys.stderr)
        return int(pytest.ExitCode.USAGE_ERROR)
    regen = bool(shards[0]["regen"])
    if regen != args.regen_baselines:
        ran = "with" if regen else "without"
        print(
            f"npubench merge: the shards ran {ran} --regen-baselines; "
            f"{'add' if regen else 'drop'} --regen-baselines to merge them (nothing written)",
            file=sys.stderr,
        )
        return int(pytest.ExitCode.USAGE_ERROR)
    command = list(shards[0]["args"])
    if args.npubench_artifacts is not None:
        command.append(f"--npubench-artifacts={args.npubench_artifacts}")
    with tempfile.TemporaryDirectory(prefix="npubench-merge-") as tmp:
        replay = Path(tmp) / "replay.json"
        replay.write_text(json.dumps(replay_payloads(shards)), encoding="utf-8")
        # A fresh interpreter: this one has imported the plugin already, which pytest's
        # assertion rewriting warns about (an error under filterwarnings = error).
        pytest_cmd = [sys.executable, "-m", "pytest", *command, f"--npubench-replay={replay}"]
        return subprocess.run(pytest_cmd, check=False).returncode


def main() -> None:
    sys.exit(merge(sys.argv[1:]))


if __name__ == "__main__":
    main()
