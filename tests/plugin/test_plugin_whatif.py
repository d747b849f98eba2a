"""Hardware what-ifs (DESIGN, Baselines; ADR 0007): a run on a topology other than the
baselines' names the changed keys once, compares every config, fails until accepted; a regen
reports every re-measured entry as changed with its deltas and stores the new topology."""

from __future__ import annotations

import pytest
from toyproject import Project, assert_no_plugin_traceback, output

SLOWER_LINK = {"link": {"bw_gbs": 50, "latency_ns": 1500}}


def measured(project: Project) -> str:
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    return project.read("baselines/toy.json")


def test_baseline_records_the_topology_content_beside_its_fingerprint(project: Project) -> None:
    """The regen stores the bench's normalised topology as flat dotted keys."""
    measured(project)
    data = project.baseline()
    assert data["fingerprint"] == "toy-hw:1"
    assert data["topology"] == {"link.bw_gbs": 50, "link.latency_ns": 1000}


@pytest.mark.parametrize("xdist", [False, True], ids=["n0", "n2"])
def test_whatif_names_changed_keys_once_and_compares_every_config(
    project: Project, xdist: bool
) -> None:
    """A topology change whose numbers do not move passes; the changed key is named once
    (not one error per config), in the terminal, summary.md and index.html."""
    before = measured(project)
    project.knobs(fingerprint="toy-hw:2", topology=SLOWER_LINK)
    result = project.run("--npubench", "toy", "-q", xdist=xdist)  # -q keeps the what-if
    result.assert_outcomes(passed=4)  # the numbers did not move: a what-if that changes nothing
    text = output(result)
    assert text.count("link.latency_ns 1000 -> 1500") == 1, text
    result.stdout.fnmatch_lines(
        [
            "what-if: the topology differs from the baseline's in 1 constant: "
            "link.latency_ns 1000 -> 1500",
            "  toy: 0 of 4 configs run moved beyond tolerance; latency_ns: median 0 %, worst 0 %*",
            "  if the new hardware is intended, accept it: pytest --npubench toy --regen-baselines",
        ]
    )
    assert "ERROR collecting" not in text
    assert_no_plugin_traceback(result)
    assert project.read("baselines/toy.json") == before
    summary = project.read("npubench-artifacts/summary.md")
    assert "toy: hardware what-if" in summary and "link.latency_ns 1000 -> 1500" in summary
    assert "link.latency_ns 1000 -&gt; 1500" in project.read("npubench-artifacts/index.html")


def test_whatif_flow_fails_then_regen_reports_changed_with_deltas_then_passes(
    project: Project,
) -> None:
    """Edit the hardware so latency doubles: deltas shown and the run fails; the regen reports
    4 changed (with their deltas, none 'added') and stores the new topology; then it passes."""
    measured(project)
    project.knobs(
        fingerprint="toy-hw:2", topology={"link": {"bw_gbs": 25, "latency_ns": 1000}}, scale=2.0
    )
    failed = project.run("--npubench", "toy")
    failed.assert_outcomes(failed=4)
    failed.stdout.fnmatch_lines(
        [
            "what-if: the topology differs from the baseline's in 1 constant: link.bw_gbs 50 -> 25",
            "  toy: 4 of 4 configs run moved beyond tolerance; latency_ns: median +100.00 %, "
            "worst +100.00 % (16-fast)",
            "toy: 4 run: 0 passed, 4 failed (4 regressions)",
            "  regression  16-fast: latency_ns +100.00 % (16 ns -> 32 ns)",
        ]
    )
    regen = project.run("--regen-baselines")
    regen.assert_outcomes(passed=4)
    regen.stdout.fnmatch_lines(
        [
            "wrote baselines/toy.json: 0 added, 4 changed, 0 unchanged",
            "  fingerprint changed (was toy-hw:1)",
            "  topology changed: link.bw_gbs 50 -> 25",
            "  changed    16-fast: latency_ns 16 ns -> 32 ns (+100.00 %)",
        ]
    )
    data = project.baseline()
    assert data["fingerprint"] == "toy-hw:2"
    assert data["topology"]["link.bw_gbs"] == 25
    project.run("--npubench", "toy").assert_outcomes(passed=4)


def test_partial_regen_on_a_new_topology_writes_nothing(project: Project) -> None:
    """A -k regen on other hardware would mix two topologies in one file: it stops, names the
    configs not re-measured and the command, and leaves the file byte for byte."""
    before = measured(project)
    project.knobs(fingerprint="toy-hw:2", scale=2.0)
    result = project.run("--regen-baselines", "-k", "fast")
    assert result.ret != 0
    result.stdout.fnmatch_lines(
        [
            "ERROR baselines/toy.json: not written: it was measured on toy-hw:1, this run uses "
            "another topology, and 2 config(s) of bench 'toy' were not re-measured (16-slow, "
            "32-slow);*pytest --npubench toy --regen-baselines (without -k)"
        ]
    )
    assert project.read("baselines/toy.json") == before
