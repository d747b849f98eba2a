"""Metrics travel in report.user_properties: they survive -n 2 and land in --junitxml."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from toyproject import Project


@pytest.mark.parametrize("xdist", [False, True], ids=["-n0", "-n2"])
def test_metrics_are_junitxml_properties(project: Project, xdist: bool) -> None:
    """Each item's metrics appear as <property> elements of its testcase in --junitxml, and the
    controller's summary table has every config."""
    project.bench()
    result = project.run("--regen-baselines", "--junitxml=junit.xml", xdist=xdist)
    result.assert_outcomes(passed=4)
    result.stdout.fnmatch_lines(["  new      32-slow  64 ns       10 GB/s"])
    cases = {
        case.get("name"): {p.get("name"): p.get("value") for p in case.iter("property")}
        for case in ET.parse(project.path / "junit.xml").iter("testcase")
    }
    assert sorted(cases) == ["toy[16-fast]", "toy[16-slow]", "toy[32-fast]", "toy[32-slow]"]
    props = cases["toy[32-slow]"]
    assert props["npubench.latency_ns"] == "64.0"
    assert props["npubench.throughput"] == "10.0"
    assert '"verdict": "new"' in props["npubench"]
