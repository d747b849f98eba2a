"""pytest-npubench: the pytest plugin half (bench API, baselines, regression gate, artifacts)."""
