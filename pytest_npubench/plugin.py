"""The pytest entry point: the ``npubench`` option group, ini settings, markers and hooks.

Registered through the ``pytest11`` entry point. Without ``--npubench`` or
``--regen-baselines`` it only adds its options; with them it registers a
:class:`~pytest_npubench.session.NpubenchSession` that does the work.
"""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest

from pytest_npubench import hints, hookspecs
from pytest_npubench.session import STATE_KEY, NpubenchSession
from pytest_npubench.shard import parse_shard
from pytest_npubench.shard_select import ShardSelector

_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*\Z")


def parse_bench_names(value: str) -> tuple[str, ...]:
    """``--npubench`` value: comma-separated bench names, or ``all``."""
    names = tuple(name.strip() for name in value.split(","))
    bad = [name for name in names if not _NAME.match(name)]
    if bad:
        raise pytest.UsageError(
            f"--npubench {value!r}: {bad[0]!r} is not a bench name; give bench names separated "
            "by commas (--npubench gemm,ccl) or --npubench all"
        )
    return names


def parse_artifacts_dir(value: str) -> Path:
    """``--npubench-artifacts`` value: a folder (created if missing)."""
    path = Path(value)
    try:
        unusable = not value.strip() or (path.exists() and not path.is_dir())
    except OSError as exc:  # e.g. a name longer than the file system allows
        unusable, value = True, f"{value[:60]}..." if len(value) > 60 else value
        value += f" ({exc.strerror})"
    if unusable:
        raise pytest.UsageError(
            f"--npubench-artifacts {value!r}: give a folder to write results.json, "
            "summary.md and figures into (default: npubench-artifacts)"
        )
    return path.absolute()


DEFAULT_TRACE_LIMIT = 200_000


def parse_trace_limit(value: str) -> int:
    """``--npubench-trace-limit``: a positive number of trace events."""
    try:
        limit = int(value)
    except ValueError:
        limit = 0
    if limit < 1:
        raise pytest.UsageError(
            f"--npubench-trace-limit {value!r} is not a positive integer; "
            f"try --npubench-trace-limit {DEFAULT_TRACE_LIMIT}"
        )
    return limit


def _check_artifacts_spelling(config: pytest.Config) -> None:
    """``--npubench-artifacts DIR`` (two words) with DIR outside the invocation folder makes
    pytest take DIR for a test path when it picks the rootdir (it does so before plugins load),
    so the ini settings and benches are not found. Refuse it with the spelling that works."""
    args = list(config.invocation_params.args)
    for flag, value in itertools.pairwise(args):
        if flag != "--npubench-artifacts":
            continue
        where = (config.invocation_params.dir / value).resolve()
        inside = config.invocation_params.dir.resolve() in (where, *where.parents)
        if not inside:
            raise pytest.UsageError(
                f"--npubench-artifacts {value}: pytest takes a folder outside "
                f"{config.invocation_params.dir} that follows a plugin option for a test path "
                "when it chooses the rootdir and ini file, so benches are not found; write it as "
                "one word: "
                f"--npubench-artifacts={value}"
            )


def pytest_addhooks(pluginmanager: pytest.PytestPluginManager) -> None:
    """Register the ``pytest_npubench_*`` hookspecs."""
    pluginmanager.add_hookspecs(hookspecs)


def pytest_addoption(parser: pytest.Parser) -> None:
    """One option group (``npubench``) and two ini settings."""
    group = parser.getgroup("npubench", "pytest-npubench: performance benches and baselines")
    group.addoption(
        "--npubench",
        dest="npubench",
        metavar="NAME[,NAME...]|all",
        type=parse_bench_names,
        default=None,
        help="run these benches (one test per config) and deselect every other test; the "
        "benches of this project are listed at the end of this help",
    )
    group.addoption(
        "--regen-baselines",
        dest="npubench_regen",
        action="store_true",
        default=False,
        help="also run regen-only configs and rewrite the baselines of the selected configs; "
        "without --npubench: every bench",
    )
    group.addoption(
        "--npubench-strict",
        dest="npubench_strict",
        action="store_true",
        default=False,
        help="fail on any change beyond tolerance, improvements too (the default; this flag "
        "overrides --npubench-allow-improvements and the ini setting)",
    )
    group.addoption(
        "--npubench-allow-improvements",
        dest="npubench_allow_improvements",
        action="store_true",
        default=False,
        help="let a gated metric that got better beyond tolerance pass (listed for acceptance); "
        "by default it fails until accepted with --regen-baselines",
    )
    group.addoption(
        "--npubench-prune",
        dest="npubench_prune",
        action="store_true",
        default=False,
        help="with --regen-baselines: drop baseline entries of configs the bench no longer has",
    )
    group.addoption(
        "--npubench-artifacts",
        dest="npubench_artifacts",
        metavar="DIR",
        type=parse_artifacts_dir,
        default=None,
        help="folder for results.json, summary.md and <bench>/*.png "
        "(default: npubench-artifacts in the rootdir)",
    )
    group.addoption(
        "--npubench-trace",
        dest="npubench_trace",
        action="store_true",
        default=False,
        help="also write a Chrome trace-event JSON of each selected config to "
        "<artifacts>/<bench>/traces/<config>-<hash>.json (the id cut to 80 safe characters, then "
        "a hash of the full id; pick configs with -k); open it in Perfetto",
    )
    group.addoption(
        "--npubench-trace-limit",
        dest="npubench_trace_limit",
        metavar="N",
        type=parse_trace_limit,
        default=DEFAULT_TRACE_LIMIT,
        help=f"trace at most N events per config; above that, consecutive operations of an "
        f"engine are merged into spans (default: {DEFAULT_TRACE_LIMIT})",
    )
    group.addoption(
        "--npubench-shard",
        dest="npubench_shard",
        metavar="K/N",
        type=parse_shard,
        default=None,
        help="run only the K-th of N deterministic parts of the selected configs (balanced by "
        "the bench's cost estimate) and write shard.json for 'python -m pytest_npubench merge'",
    )
    group.addoption(
        "--npubench-replay",
        dest="npubench_replay",
        metavar="FILE",
        default=None,
        help="(used by 'python -m pytest_npubench merge') take each config's measurement from "
        "FILE instead of running it",
    )
    group.addoption(
        "--npubench-sweep",
        dest="npubench_sweep",
        metavar="KEY=V1,V2,...",
        action="append",
        default=[],
        help="run the selected benches on each hardware variant: the topology with KEY (a "
        "dotted key of its YAML, e.g. hbm.hbm_to_router_bw_gbs) set to each value; repeat for "
        "the product of several keys. Writes sweep figures and tables, never baselines "
        "(default folder: npubench-artifacts/sweep)",
    )
    group.addoption(
        "--npubench-sweep-file",
        dest="npubench_sweep_file",
        metavar="FILE",
        default=None,
        help="a YAML sweep: {KEY: [V1, V2, ...], ...} (the product), or "
        "{variants: [{KEY: V, ...}, ...]} (each listed variant)",
    )
    group.addoption(
        "--npubench-sweep-variant",
        dest="npubench_sweep_variant",
        metavar="ID",
        default=None,
        help="(used by --npubench-sweep) this run is one variant of a sweep: measure, never gate",
    )
    parser.addini(
        "npubench_paths",
        type="paths",
        default=[],
        help="files or folders of bench modules (default: benches)",
    )
    parser.addini(
        "npubench_allow_improvements",
        type="bool",
        default=False,
        help="as --npubench-allow-improvements: improvements beyond tolerance pass "
        "(default: false, they fail until accepted)",
    )
    parser.addini(
        "npubench_baselines",
        default="baselines",
        help="folder of the baseline files <bench>.json (default: baselines)",
    )


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> int | None:
    """A hardware sweep runs each variant as a run of its own (:mod:`pytest_npubench.sweep`)."""
    if not (config.option.npubench_sweep or config.option.npubench_sweep_file):
        return None
    from pytest_npubench.sweep import run_sweep

    return run_sweep(config)


def pytest_configure(config: pytest.Config) -> None:
    """Declare the markers; start the session state when benches are asked for."""
    config.addinivalue_line("markers", "npubench: a config of a pytest-npubench bench")
    config.addinivalue_line(
        "markers", "regen: a heavy bench config that runs only under --regen-baselines"
    )
    option = config.option
    _check_artifacts_spelling(config)
    if option.npubench_prune and not option.npubench_regen:
        raise pytest.UsageError(
            "--npubench-prune only applies to a baseline rewrite; add --regen-baselines"
        )
    if option.npubench is None and not option.npubench_regen:
        return
    state = NpubenchSession(config)
    config.stash[STATE_KEY] = state
    _drop_idle_test_plugins(config)
    config.pluginmanager.register(state, "npubench-session")
    if state.shard is not None:
        config.pluginmanager.register(ShardSelector(state), "npubench-shard")


#: plugins that only serve ordinary tests, which a bench run never collects (ADR 0013)
IDLE_IN_BENCH_RUNS = ("hypothesispytest",)


def _drop_idle_test_plugins(config: pytest.Config) -> None:
    """Unregister plugins that have nothing to do in a bench run: hypothesis's terminal
    summary alone imports all of hypothesis (~1 s, most of it re-compiled when bytecode is
    not cached) at the end of every run, for tests a bench run never collects."""
    for name in IDLE_IN_BENCH_RUNS:
        plugin = config.pluginmanager.get_plugin(name)
        if plugin is not None:
            config.pluginmanager.unregister(plugin)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """A plain run given a bench module or folder as a test path says how to run the bench."""
    config = terminalreporter.config
    if STATE_KEY in config.stash:
        return
    for line in hints.collection_hint(config):
        terminalreporter.write_line(line)


@pytest.hookimpl(tryfirst=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    """``pytest --help`` ends with the benches of this project."""
    if not getattr(config.option, "help", False):
        return
    reporter = config.pluginmanager.get_plugin("terminalreporter")
    if reporter is None:
        return
    reporter.write_line("")
    for line in hints.help_lines(config):
        reporter.write_line(line)
