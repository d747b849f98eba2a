"""Fixtures of the plugin's black-box tests: a fresh toy bench project per test."""

from __future__ import annotations

import sys

import pytest
from toyproject import Project


@pytest.fixture
def project(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch) -> Project:
    """A fresh toy project; bytecode is not cached so rewritten modules are always re-read."""
    monkeypatch.setattr(sys, "dont_write_bytecode", True)
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    return Project(pytester)
