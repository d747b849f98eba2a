"""Collection: finding the benches, selecting those of ``--npubench``, and making their pytest
items instead of the ordinary tests' (a bench run imports no test file)."""

from __future__ import annotations

import inspect
from collections.abc import Sequence
from pathlib import Path

import pytest

from pytest_npubench.bench import Bench
from pytest_npubench.context import BenchContext
from pytest_npubench.discover import BenchImportError, discover
from pytest_npubench.item import BenchCollector, BenchItem, ReusedConfigs
from pytest_npubench.state import RunState


class Collection:
    """The session's benches and their items."""

    def __init__(self, state: RunState, context: BenchContext) -> None:
        self.state = state
        self.context = context  # what the items read (the session)

    # -- finding and selecting benches -------------------------------------------------------

    def find(self) -> list[Bench]:
        """Every bench the ``pytest_npubench_add_benches`` hooks give, selected by --npubench;
        bad names and modules are usage errors."""
        config = self.state.config
        found: list[Bench] = []
        for group in config.hook.pytest_npubench_add_benches(config=config):
            for bench in group:
                if not isinstance(bench, Bench):
                    raise pytest.UsageError(
                        f"pytest_npubench_add_benches returned {bench!r}; it must return a "
                        "list of pytest_npubench.Bench"
                    )
                if all(bench is not b for b in found):
                    found.append(bench)
        self._check_unique(found)
        return self._select(found)

    def discovered(self, config: pytest.Config) -> list[Bench]:
        """Every module-level Bench of the modules in ``npubench_paths`` (their files noted)."""
        try:
            found = discover(self.state.bench_paths, config.rootpath)
        except BenchImportError as exc:
            raise pytest.UsageError(str(exc)) from None
        for bench, path in found:
            self.state.sources[bench] = path
        return [bench for bench, _ in found]

    def _check_unique(self, benches: Sequence[Bench]) -> None:
        seen: dict[str, Bench] = {}
        for bench in benches:
            if bench.name in seen:
                where = [self._source_text(b) for b in (seen[bench.name], bench)]
                raise pytest.UsageError(
                    f"two benches are named {bench.name!r} ({where[0]} and {where[1]}); "
                    "bench names must be unique"
                )
            seen[bench.name] = bench

    def _source_text(self, bench: Bench) -> str:
        source = self.source(bench)
        return self.state.relpath(source) if source else "a pytest_npubench_add_benches hook"

    def source(self, bench: Bench) -> Path | None:
        """The file that defines a bench: its bench module, else the module of its run function."""
        if bench in self.state.sources:
            return self.state.sources[bench]
        try:
            name = inspect.getsourcefile(bench.run)
        except TypeError:
            return None
        return Path(name) if name else None

    def _select(self, benches: Sequence[Bench]) -> list[Bench]:
        names = self.state.names
        if (names is None or "all" in names) and not benches:
            raise pytest.UsageError(self._none_found())
        known = {b.name: b for b in benches}
        for name in names or ():
            if name != "all" and name not in known:
                listed = ", ".join(sorted(known)) or "none"
                raise pytest.UsageError(
                    f"--npubench: unknown bench {name!r}; known benches: {listed} "
                    f"(found in {self._paths_text()} and pytest_npubench_add_benches hooks)"
                )
        if names is None or "all" in names:
            return list(benches)
        return [b for b in benches if b.name in names]

    def _paths_text(self) -> str:
        return ", ".join(self.state.relpath(p) for p in self.state.bench_paths) or "no paths"

    def _none_found(self) -> str:
        return (
            f"no benches found: no module-level pytest_npubench.Bench in {self._paths_text()} "
            "(ini npubench_paths) and none added by a pytest_npubench_add_benches hook"
        )

    # -- collection ---------------------------------------------------------------------------

    def ignore(self, collection_path: Path) -> bool | None:
        """A bench run collects no ordinary test file, nor walks a folder off the way to the
        bench paths (so it imports no conftest there): its items come from the bench modules
        (below), so a broken file under tests/ cannot stop a bench run or a regen. Folders that
        hold a bench path are walked, so their conftests load as in a plain run."""
        if collection_path.is_dir():
            on_the_way = any(
                p == collection_path or collection_path in p.parents for p in self.state.bench_paths
            )
            return None if on_the_way else True
        return True

    @staticmethod
    def empty_report(collector: pytest.Collector) -> pytest.CollectReport | None:
        """Files named on the command line are not imported either (they would be deselected)."""
        if isinstance(collector, pytest.File):
            return pytest.CollectReport(collector.nodeid, "passed", None, [])
        return None

    def replace_items(
        self, session: pytest.Session, config: pytest.Config, items: list[pytest.Item]
    ) -> None:
        """Replace the collected tests by the configs of the selected benches."""
        bench_items: list[pytest.Item] = []
        for bench in self.state.benches:
            collector = self._collector(session, bench)
            report = collector.ihook.pytest_make_collect_report(collector=collector)
            # The report carries its CallInfo, which cannot travel to the xdist controller;
            # pytest's own collect_one_node drops it the same way.
            report.__dict__.pop("call", None)
            collector.ihook.pytest_collectreport(report=report)
            if report.passed:
                bench_items.extend(i for i in report.result if isinstance(i, BenchItem))
        others = [item for item in items if not isinstance(item, BenchItem)]
        if others:
            config.hook.pytest_deselected(items=others)
        items[:] = bench_items

    @staticmethod
    def fold(items: list[pytest.Item]) -> None:
        """Each bench's reused configs become one skipped item (:class:`ReusedConfigs`)."""
        items[:] = ReusedConfigs.fold(items)

    def _collector(self, session: pytest.Session, bench: Bench) -> BenchCollector:
        source = self.source(bench)
        relative = self.state.relpath(source) if source else ""
        inside = source is not None and not Path(relative).is_absolute()
        return BenchCollector.from_parent(
            session,
            name=bench.name,
            path=source if inside else self.state.config.rootpath,
            nodeid=relative if inside else bench.name,
            bench=bench,
            npubench=self.context,
        )
