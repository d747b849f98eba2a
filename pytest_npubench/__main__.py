"""``python -m pytest_npubench merge SHARD_DIR... [--regen-baselines] [--npubench-artifacts=DIR]
[--recheck N|all]`` and ``python -m pytest_npubench history ...`` (:mod:`.history_cli`).

Merges the artifact folders of a sweep run as ``--npubench-shard K/N`` on several machines.
A shard.json is downloaded data, so it is checked before it is used (ADR 0018): read as a
regular UTF-8 file under 64 MiB, every field type-checked, its digest recomputed, its recorded
command checked against an allow-list (:mod:`pytest_npubench.shard_args`), the shards checked
against each other and against this checkout (:mod:`pytest_npubench.shard_load`). Then pytest
runs here, in this process (no child that could outlive a killed merge, no temp folder), with
the shards' command and a :class:`~pytest_npubench.replay.MergeReplay` plugin that re-derives
each part's configs from the split, checks every payload, re-simulates ``--recheck`` configs
per shard, and refuses before anything runs. Past that, results.json, the figures, summary.md,
index.html and (with --regen-baselines) the baselines are what one unsharded run writes.
"""

from __future__ import annotations

import argparse
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_npubench import artifacts
from pytest_npubench.replay import DEFAULT_RECHECK, MergeReplay
from pytest_npubench.shard import ShardError
from pytest_npubench.shard_load import ShardFile, load_shards


def _recheck(value: str) -> int | None:
    if value == "all":
        return None
    if not value.isdigit() or len(value) > 9:
        raise argparse.ArgumentTypeError(f"{value!r}: give a number of configs, or all")
    return int(value)


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
        help="where the merged artifacts go (default: npubench-artifacts)",
    )
    merge.add_argument(
        "--recheck",
        metavar="N|all",
        type=_recheck,
        default=DEFAULT_RECHECK,
        help=f"re-simulate N random measured configs of each shard and refuse the merge if "
        f"one differs (default: {DEFAULT_RECHECK}; 0: none; all: every config)",
    )
    commands.add_parser(
        "sweep-merge",
        add_help=False,
        help="one report from the folders of a sweep run as --npubench-shard K/N",
    )
    commands.add_parser(
        "history",
        add_help=False,
        help="the baselines' history from git: which commits moved which metric "
        "(python -m pytest_npubench history --help)",
    )
    return parser


def _check_commit(shards: Sequence[ShardFile]) -> None:
    """The shards' commit must be this checkout's (when both are known): their numbers are
    replayed as this code's, and a re-simulated sample is this code's."""
    here = artifacts.run_metadata((), Path.cwd())["commit"]
    theirs = shards[0].commit
    if here is not None and theirs is not None and here != theirs:
        raise ShardError(
            f"{shards[0].path}: the shards ran on commit {theirs}, this checkout is {here}; "
            "merge from a checkout of the shards' commit"
        )


def merge(argv: Sequence[str]) -> int:
    """Run the merge; the exit code is pytest's (0: every config passes its gate)."""
    args = _parser().parse_args(argv)
    try:
        shards = load_shards(args.shards)
        _check_commit(shards)
    except ShardError as exc:
        print(f"npubench merge: {exc}; nothing written", file=sys.stderr)
        return int(pytest.ExitCode.USAGE_ERROR)
    regen = shards[0].regen
    if regen != args.regen_baselines:
        ran = "with" if regen else "without"
        print(
            f"npubench merge: the shards ran {ran} --regen-baselines; "
            f"{'add' if regen else 'drop'} --regen-baselines to merge them (nothing written)",
            file=sys.stderr,
        )
        return int(pytest.ExitCode.USAGE_ERROR)
    command = list(shards[0].args)  # checked against the allow-list by load_shards
    if args.npubench_artifacts is not None:
        command.append(f"--npubench-artifacts={args.npubench_artifacts}")
    invocation = "python -m pytest_npubench " + shlex.join(argv)
    return int(pytest.main(command, plugins=[MergeReplay(shards, args.recheck, invocation)]))


def _sweep_merge(argv: Sequence[str]) -> int:
    """``python -m pytest_npubench sweep-merge DIR... --out DIR``: a sharded sweep's report."""
    from pytest_npubench.sweep import merge_folders

    parser = argparse.ArgumentParser(prog="python -m pytest_npubench sweep-merge")
    parser.add_argument("folders", nargs="+", type=Path, metavar="DIR")
    parser.add_argument("--out", type=Path, required=True, metavar="DIR")
    args = parser.parse_args(argv)
    try:
        written = merge_folders(args.folders, args.out)
    except (ValueError, OSError) as exc:
        print(f"npubench sweep-merge: {exc}; nothing written", file=sys.stderr)
        return 2
    print("npubench sweep-merge: wrote " + ", ".join(str(p) for p in written))
    return 0


def main() -> None:
    argv = sys.argv[1:]
    if argv[:1] == ["sweep-merge"]:
        sys.exit(_sweep_merge(argv[1:]))
    if argv[:1] == ["history"]:
        from pytest_npubench.history_cli import run

        sys.exit(run(argv[1:]))
    sys.exit(merge(argv))


if __name__ == "__main__":
    main()
