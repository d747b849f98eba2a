"""``pytest --npubench BENCH --npubench-sweep KEY=V1,V2,...``: the selected configs on each
hardware variant, side by side (issue 28).

A variant is the run's topology with some keys replaced. The plugin does not read topologies
(it imports nothing of ``sim``): each variant runs as a pytest run of its own, in a child
process, with ``$NPUBENCH_TOPOLOGY_SET`` holding the replaced keys as JSON. The benches'
topology loader (``sim.topology.topology_from_env``) applies them and validates the result
like any topology file, so a bad value is one message naming the key and the file. Each child
gets the command line as given (``-k``, ``-m``, ``-n`` and the rest; ``-n`` parallelises the
configs of a variant) plus ``--npubench-sweep-variant``, under which every config is measured
and none is gated or compared for a verdict. Regen-only (heavy) configs are measured when the
command selects with ``-k``; otherwise they are the baseline's numbers, measured on other
hardware, so the sweep draws and lists only measured configs.

A sweep is split over machines by variant: ``--npubench-shard K/N`` runs the variants whose
1-based index is K modulo N; ``python -m pytest_npubench sweep-merge DIR... --out DIR`` reads
the shards' folders and writes what one run writes (:func:`merge_folders`).

Nothing is written to ``baselines/``. The sweep's folder (``--npubench-artifacts``, default
``npubench-artifacts/sweep``) holds ``variants/<id>/`` (each child's own artifacts),
``results.json`` (every variant's measured metrics under its topology fingerprint),
``sweep.md`` and per bench ``<bench>/sweep.png`` (:mod:`pytest_npubench.sweep_report`).
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml

from pytest_npubench.inputs import InputError, loads, read_text
from pytest_npubench.sweep_runs import Variant, VariantRun

#: The environment variable the benches' topology loader reads (sim.topology.OVERRIDES_ENV;
#: the plugin names it, it does not import sim: tests/plugin/test_sweep.py checks they agree).
OVERRIDES_ENV = "NPUBENCH_TOPOLOGY_SET"

#: Variants one sweep runs at most (each is a pytest run of its own).
MAX_VARIANTS = 256

_OWN_OPTIONS = (
    "--npubench-sweep",
    "--npubench-sweep-file",
    "--npubench-artifacts",
    "--npubench-shard",
)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value)


def _scalar(option: str, key: str, text: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        value = None
    if not isinstance(value, (int, float, str, bool)) or text.strip() == "":
        raise pytest.UsageError(
            f"{option} {key}={text!r}: each value must be a number, a word or true/false "
            "(lists and mappings go in a --npubench-sweep-file)"
        )
    return value


def parse_axis(value: str) -> tuple[str, list[Any]]:
    """``KEY=V1,V2,...`` of ``--npubench-sweep``."""
    key, eq, values = value.partition("=")
    key = key.strip()
    parts = [v.strip() for v in values.split(",")] if eq else []
    if not key or not eq or not all(parts) or "." not in key:
        raise pytest.UsageError(
            f"--npubench-sweep {value!r}: give a dotted topology key and its values, e.g. "
            "--npubench-sweep hbm.hbm_to_router_bw_gbs=128,256,512"
        )
    out = [_scalar("--npubench-sweep", key, v) for v in parts]
    if len(set(map(_text, out))) != len(out):
        raise pytest.UsageError(f"--npubench-sweep {value!r}: a value is given twice")
    return key, out


def load_sweep_file(path: Path) -> list[dict[str, Any]]:
    """The variants of a sweep file: ``{KEY: [V...]}`` (the product) or ``{variants: [...]}``."""
    where = f"--npubench-sweep-file {path}"
    try:
        text = read_text(path, 1 << 20)
    except (InputError, OSError) as exc:
        raise pytest.UsageError(f"{where}: cannot be read ({exc})") from None
    if text is None:
        raise pytest.UsageError(f"{where}: no such file")
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise pytest.UsageError(f"{where}: not valid YAML ({exc}); fix the syntax") from None
    if isinstance(data, dict) and set(data) == {"variants"}:
        listed = data["variants"]
        if (
            not isinstance(listed, list)
            or not listed
            or not all(
                isinstance(v, dict) and v and all(isinstance(k, str) and "." in k for k in v)
                for v in listed
            )
        ):
            raise pytest.UsageError(
                f"{where}: 'variants' must be a list of mappings of dotted key to value"
            )
        return [dict(v) for v in listed]
    if not isinstance(data, dict) or not data:
        raise pytest.UsageError(
            f"{where}: give a mapping of dotted topology key to a list of values, or "
            "{variants: [{key: value, ...}, ...]}"
        )
    axes: list[tuple[str, list[Any]]] = []
    for key, values in data.items():
        if not isinstance(key, str) or "." not in key or not isinstance(values, list) or not values:
            raise pytest.UsageError(
                f"{where}: key {key!r} must be a dotted topology key with a non-empty list "
                "of values"
            )
        axes.append((key, values))
    return product(axes)


def product(axes: Sequence[tuple[str, Sequence[Any]]]) -> list[dict[str, Any]]:
    keys = [k for k, _ in axes]
    if len(set(keys)) != len(keys):
        raise pytest.UsageError(f"--npubench-sweep: a key is swept twice ({keys})")
    return [
        dict(zip(keys, combo, strict=True)) for combo in itertools.product(*(v for _, v in axes))
    ]


def variants_of(config: pytest.Config) -> list[Variant]:
    option = config.option
    listed: list[dict[str, Any]] = []
    if option.npubench_sweep:
        listed = product([parse_axis(v) for v in option.npubench_sweep])
    if option.npubench_sweep_file is not None:
        if listed:
            raise pytest.UsageError(
                "--npubench-sweep and --npubench-sweep-file: give one of them (put every key "
                "in the file)"
            )
        listed = load_sweep_file(Path(option.npubench_sweep_file))
    if len(listed) > MAX_VARIANTS:
        raise pytest.UsageError(
            f"the sweep has {len(listed)} variants, more than {MAX_VARIANTS}; sweep fewer values"
        )
    return [Variant(i + 1, v) for i, v in enumerate(listed)]


def _check(config: pytest.Config) -> None:
    option = config.option
    if option.npubench is None:
        raise pytest.UsageError(
            "--npubench-sweep runs benches: add --npubench BENCH (e.g. --npubench gemm)"
        )
    if option.npubench_regen:
        raise pytest.UsageError(
            "--npubench-sweep never writes baselines: drop --regen-baselines (a sweep's numbers "
            "are other hardware's)"
        )
    for flag, value in (
        ("--npubench-replay", option.npubench_replay),
        ("--npubench-sweep-variant", option.npubench_sweep_variant),
    ):
        if value is not None:
            raise pytest.UsageError(
                f"{flag} cannot be combined with --npubench-sweep (a sweep is split over "
                "machines with --npubench-shard K/N: each machine runs every N-th variant)"
            )


def child_args(args: Iterable[str]) -> list[str]:
    """The command line without the sweep's own options (and their values)."""
    out: list[str] = []
    skip = False
    for arg in args:
        if skip:
            skip = False
            continue
        if arg in _OWN_OPTIONS:
            skip = True
            continue
        if any(arg.startswith(o + "=") for o in _OWN_OPTIONS):
            continue
        out.append(arg)
    return out


def run_variant(config: pytest.Config, variant: Variant, root: Path) -> VariantRun:
    folder = root / "variants" / variant.id
    env = {**os.environ, OVERRIDES_ENV: json.dumps(variant.values, sort_keys=True)}
    command = [
        sys.executable,
        "-m",
        "pytest",
        *child_args(config.invocation_params.args),
        f"--npubench-artifacts={folder}",
        f"--npubench-sweep-variant={variant.id}",
    ]
    start = time.perf_counter()
    done = subprocess.run(
        command,
        cwd=config.invocation_params.dir,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    run = VariantRun(variant, folder, done.returncode, time.perf_counter() - start, done.stdout)
    if done.stderr.strip():
        run.output += "\n" + done.stderr
    try:
        text = read_text(folder / "results.json", 256 << 20)
        data = loads(text, "results.json") if text is not None else None
    except (InputError, OSError):
        data = None
    if isinstance(data, dict) and isinstance(data.get("benches"), dict):
        run.benches = data["benches"]
    return run


def run_sweep(config: pytest.Config) -> int:
    """Run every variant, then write the sweep's results, tables and figures."""
    from pytest_npubench.sweep_report import headline_metrics, summary_lines, write_report

    _check(config)
    variants = variants_of(config)
    shard = config.option.npubench_shard
    if shard is not None:  # a sweep splits by variant: part K of N runs every N-th one
        variants = [v for v in variants if (v.index - 1) % shard.count == shard.index - 1]
        print(
            f"npubench sweep: shard {shard}: {len(variants)} variant(s); merge the shards' "
            "folders with: python -m pytest_npubench sweep-merge DIR... --out DIR",
            flush=True,
        )
    root: Path = config.option.npubench_artifacts or (
        config.rootpath / "npubench-artifacts" / "sweep"
    )
    root.mkdir(parents=True, exist_ok=True)
    runs: list[VariantRun] = []
    total = time.perf_counter()
    for variant in variants:
        print(f"npubench sweep: {variant.id} {variant.label} ...", flush=True)
        run = run_variant(config, variant, root)
        runs.append(run)
        state = "ok" if run.exit_code == 0 else f"FAILED (exit {run.exit_code})"
        print(f"npubench sweep: {variant.id} {state} in {run.wall_s:.1f} s", flush=True)
        if run.exit_code != 0:
            tail = "\n".join(run.output.strip().splitlines()[-15:])
            print(f"npubench sweep: {variant.id} output (last lines):\n{tail}", flush=True)
    wall = time.perf_counter() - total
    heads = headline_metrics(config, runs)
    written = write_report(root, runs, heads, wall, list(config.invocation_params.args))
    for line in summary_lines(runs, heads):
        print(line)
    print(
        f"npubench sweep: {len(runs)} variants in {wall:.1f} s; wrote "
        + ", ".join(str(p.relative_to(root)) for p in written)
        + f" in {root}"
    )
    failed = [r for r in runs if r.exit_code != 0]
    if failed:
        print(
            f"npubench sweep: {len(failed)} of {len(runs)} variants failed: "
            + ", ".join(f"{r.variant.id} ({r.variant.label})" for r in failed)
        )
        return int(pytest.ExitCode.TESTS_FAILED)
    return int(pytest.ExitCode.OK)


def load_folder(folder: Path) -> list[VariantRun]:
    """The variant runs a sweep folder recorded (its results.json and variants/<id>/)."""
    text = read_text(folder / "results.json", 256 << 20)
    data = loads(text, "results.json") if text is not None else None
    listed = data.get("sweep") if isinstance(data, dict) else None
    if not isinstance(listed, list):
        raise ValueError(
            f"{folder}: not a sweep's folder (its results.json has no 'sweep' list); give the "
            "--npubench-artifacts folders of the sweep's shards"
        )
    runs = []
    for item in listed:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            raise ValueError(f"{folder}/results.json: a 'sweep' entry is not a variant")
        index = int(item["id"].lstrip("v"))
        run = VariantRun(
            Variant(index, dict(item.get("set") or {})),
            folder / "variants" / item["id"],
            int(item.get("exit", 1)),
            float(item.get("wall_s", 0.0)),
            "",
        )
        inner = read_text(run.folder / "results.json", 256 << 20)
        content = loads(inner, "results.json") if inner is not None else None
        if isinstance(content, dict) and isinstance(content.get("benches"), dict):
            run.benches = content["benches"]
        runs.append(run)
    return runs


def merge_folders(folders: Sequence[Path], out: Path) -> list[Path]:
    """One sweep's report from the folders of its shards (each variant once)."""
    from pytest_npubench.sweep_report import headline_from_results, write_report

    runs: dict[int, VariantRun] = {}
    for folder in folders:
        for run in load_folder(folder):
            if run.variant.index in runs:
                raise ValueError(f"{folder}: variant {run.variant.id} is in two shards")
            runs[run.variant.index] = run
    ordered = [runs[i] for i in sorted(runs)]
    heads = headline_from_results(ordered)
    wall = sum(r.wall_s for r in ordered)
    return write_report(out, ordered, heads, wall, ["sweep-merge", *map(str, folders)])


__all__ = ["OVERRIDES_ENV", "Variant", "VariantRun", "run_sweep"]
