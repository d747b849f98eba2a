"""``--npubench-shard K/N`` at collection: keep this shard's part of the selected configs."""

from __future__ import annotations

import pytest

from pytest_npubench.item import BenchItem
from pytest_npubench.shard import partition
from pytest_npubench.state import RunState


class ShardSelector:
    """Keeps this shard's part of the configs that are left after -k/-m (hence ``trylast``)."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(
        self, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        shard = self.state.shard
        assert shard is not None
        costs = [(item.nodeid, _cost(item)) for item in items]
        owner = partition(costs, shard.count)
        keep = [item for item, s in zip(items, owner, strict=True) if s == shard.index - 1]
        others = [item for item, s in zip(items, owner, strict=True) if s != shard.index - 1]
        if others:
            config.hook.pytest_deselected(items=others)
        items[:] = keep


def _cost(item: pytest.Item) -> float:
    if not isinstance(item, BenchItem) or item.bench.cost is None:
        return 1.0
    return float(item.bench.cost(dict(item.bench_config.params)))
