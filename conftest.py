"""Repo-root conftest.

The plugin itself is found through its ``pytest11`` entry point, and ``pyproject.toml`` points
it at ``benches/`` and ``baselines/`` (ini ``npubench_paths`` and ``npubench_baselines``).
This file only enables ``pytester``, which the plugin's black-box tests in ``tests/plugin``
need (``pytest_plugins`` is only allowed in a root conftest).
"""

from __future__ import annotations

pytest_plugins = ["pytester"]
