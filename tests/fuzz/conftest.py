"""Fixtures of the plugin-level fuzz suites: the toy bench project of tests/plugin."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "plugin"))
from toyproject import Project


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A fresh toy bench project (as in tests/plugin), bytecode not cached."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    return Project(pytester)
