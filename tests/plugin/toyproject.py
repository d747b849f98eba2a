"""A toy bench project in a pytester folder, and ways to run pytest on it as a user would.

Runs without xdist go in-process (``runpytest_inprocess``, fast); runs with ``-n 2`` go to a
subprocess, which is how xdist has to be driven from pytester.
"""

from __future__ import annotations

import json
import re
import textwrap
from pathlib import Path
from typing import Any

import matplotlib.pyplot  # noqa: F401  (imported once here: in-process runs never re-import it)
import pytest

TOY = """\
import json
from pathlib import Path

from pytest_npubench import Bench, Metric, Result

KNOBS = Path(__file__).with_name("{name}_knobs.json")


def knobs():
    return json.loads(KNOBS.read_text()) if KNOBS.exists() else {{}}


def run(params):
    k = knobs()
    slow = 2 if params["variant"] == "slow" else 1
    metrics = {{
        "latency_ns": params["size"] * slow * k.get("scale", 1.0),
        "throughput": k.get("throughput", 10.0),
        "util": k.get("util", 0.5),
    }}
    metrics.update(k.get("override", {{}}))
    for name in k.get("drop", []):
        del metrics[name]
    return Result(metrics=metrics, ok=k.get("ok", True), message=k.get("message", ""))


def figures(results, outdir):
    import matplotlib.pyplot as plt

    seen = {{
        cid: {{"source": r.source, "params": repr(r.params), "latency": r.metrics["latency_ns"]}}
        for cid, r in results.items()
    }}
    (outdir / "seen.json").write_text(json.dumps(seen, sort_keys=True))
    if knobs().get("figures_raise"):
        raise ValueError("the figure function broke")
    fig, ax = plt.subplots(figsize=(3, 2), dpi=50)
    ax.bar(list(results), [r.metrics["latency_ns"] for r in results.values()])
    ax.set_ylabel("latency [ns]")
    fig.savefig(outdir / "latency.png")
    plt.close(fig)
    return [outdir / "latency.png"]


BENCH = Bench(
    name="{name}",
    sweep={{"size": [16, 32], "variant": ["fast", "slow"]}},
    run=run,
    metrics={{
        "latency_ns": Metric(unit="ns", direction="lower", tolerance=0.01),
        "throughput": Metric(unit="GB/s", direction="higher"),
        "util": Metric(unit="1", direction="higher", gate=False),
    }},
    fingerprint=lambda: knobs().get("fingerprint", "toy-hw:1"),
    topology=lambda: knobs().get("topology", {{"link": {{"bw_gbs": 50, "latency_ns": 1000}}}}),
    summary_metrics=["latency_ns", "throughput"],
{extra}
)
"""

REGEN_ONLY = '    regen_only=lambda p: p["size"] == 32 and p["variant"] == "slow",'


class Project:
    """A pytester folder with benches/, a pytest.ini, and helpers to run and inspect it."""

    def __init__(self, pytester: pytest.Pytester) -> None:
        self.pytester = pytester
        self.path = pytester.path
        pytester.makeini("[pytest]\nfilterwarnings = error\n")
        (self.path / "benches").mkdir()

    def bench(self, name: str = "toy", *, regen_only: bool = False, figures: bool = False) -> None:
        """Write benches/<name>.py: the toy bench, optionally with regen-only configs/figures."""
        extra = [REGEN_ONLY] if regen_only else []
        if figures:
            extra.append("    figures=figures,")
        self.write(f"benches/{name}.py", TOY.format(name=name, extra="\n".join(extra)))

    def knobs(self, name: str = "toy", **values: Any) -> None:
        """Change what the toy bench measures from now on (read at run time)."""
        self.write(f"benches/{name}_knobs.json", json.dumps(values))

    def write(self, relpath: str, text: str) -> Path:
        """Write a file of the project (dedented)."""
        path = self.path / relpath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
        return path

    def run(self, *args: str, xdist: bool = False) -> pytest.RunResult:
        """Run pytest in the project: in-process, or with -n 2 in a subprocess."""
        args = ("-p", "no:hypothesispytest", *args)  # not needed here, and slow to re-import
        if xdist:
            return self.pytester.runpytest_subprocess(*args, "-n", "2", timeout=120)
        return self.pytester.runpytest_inprocess(*args)

    def baseline(self, name: str = "toy") -> dict[str, Any]:
        """The parsed baseline file of a bench."""
        data: dict[str, Any] = json.loads(self.read(f"baselines/{name}.json"))
        return data

    def read(self, relpath: str) -> str:
        """The text of a project file."""
        return (self.path / relpath).read_text()

    def results(self) -> dict[str, Any]:
        """The parsed npubench-artifacts/results.json."""
        data: dict[str, Any] = json.loads(self.read("npubench-artifacts/results.json"))
        return data


def output(result: pytest.RunResult) -> str:
    """Everything a run printed (stdout and stderr)."""
    return result.stdout.str() + "\n" + result.stderr.str()


def assert_no_plugin_traceback(result: pytest.RunResult) -> None:
    """No traceback through the plugin's own code reached the user."""
    text = output(result)
    assert "pytest_npubench/" not in text, text
    assert "INTERNALERROR" not in text, text


_INVOCATION = re.compile(rb'^ *"invocation": "[^"\n]*",\n', re.MULTILINE)


def same_run(name: str, data: bytes) -> bytes:
    """An artifact's bytes as runs of the same command compare them: results.json without its
    one ``run.invocation`` line (how the run was typed: ``-n``, shards, a merge; ADR 0030),
    every other byte kept."""
    if not name.endswith("results.json"):
        return data
    stripped, count = _INVOCATION.subn(b"", data)
    assert count == 1, f"{name}: expected one run.invocation line, found {count}"
    return stripped
