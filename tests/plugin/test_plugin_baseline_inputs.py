"""Baseline files as input (issue 22): only a regular file under a stated size limit is read,
as UTF-8; a regen writes through a symlink only inside the project or the baselines folder."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from toyproject import Project, assert_no_plugin_traceback, output

from pytest_npubench.baseline import MAX_BASELINE_BYTES, BaselineError, load, locked, write_atomic


def measured(project: Project) -> str:
    project.bench()
    project.run("--regen-baselines").assert_outcomes(passed=4)
    return project.read("baselines/toy.json")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs on this platform")
def test_a_fifo_in_place_of_the_baseline_is_refused_without_waiting(tmp_path: Path) -> None:
    """Opening a FIFO for reading waits for a writer forever; load() must not open it."""
    fifo = tmp_path / "toy.json"
    os.mkfifo(fifo)
    start = time.monotonic()
    with pytest.raises(BaselineError, match="is a FIFO, not a regular file"):
        load(fifo, "toy")
    assert time.monotonic() - start < 5


def test_a_device_in_place_of_the_baseline_is_refused(tmp_path: Path) -> None:
    """baselines/toy.json -> /dev/zero would be read until memory runs out."""
    if not Path("/dev/zero").exists():
        pytest.skip("no /dev/zero")
    link = tmp_path / "toy.json"
    link.symlink_to("/dev/zero")
    with pytest.raises(BaselineError, match="is a device, not a regular file"):
        load(link, "toy")


def test_a_baseline_over_the_size_limit_is_refused_before_it_is_read(tmp_path: Path) -> None:
    """A 305 MB file (sparse: costs no disk) is refused at once, naming its size and the
    limit, instead of being parsed for a minute and a GB of memory."""
    path = tmp_path / "toy.json"
    with path.open("wb") as handle:
        handle.truncate(305 * 10**6)
    start = time.monotonic()
    with pytest.raises(BaselineError) as info:
        load(path, "toy")
    assert time.monotonic() - start < 2
    assert str(path) in str(info.value)
    assert "is 290.9 MiB, over the 64.0 MiB limit" in str(info.value)
    assert MAX_BASELINE_BYTES == 64 * 2**20


def test_a_baseline_at_the_size_limit_is_still_read(tmp_path: Path) -> None:
    """The limit is a limit, not an off-by-one: the largest allowed file is parsed."""
    body = '{"schema": 1, "configs": {}}'
    path = tmp_path / "toy.json"
    path.write_text(body + " " * (MAX_BASELINE_BYTES - len(body)), encoding="utf-8")
    loaded = load(path, "toy")
    assert loaded is not None and loaded.entries == {}


def test_a_baseline_that_is_not_utf8_names_the_file_and_the_place(tmp_path: Path) -> None:
    """Latin-1 text is one BaselineError naming the file, the byte and its line."""
    path = tmp_path / "toy.json"
    path.write_bytes(b'{\n "schema": 1,\n "bench": "caf\xe9",\n "configs": {}}')
    with pytest.raises(BaselineError) as info:
        load(path, "toy")
    assert str(info.value) == (
        f"{path}: is not UTF-8 text (byte 0xe9 at line 3, offset 30); save it as UTF-8"
    )


def test_a_run_on_a_fifo_baseline_is_one_error_not_a_hang(project: Project) -> None:
    """End to end: the bench's collection error names the file; the FIFO stays."""
    if not hasattr(os, "mkfifo"):
        pytest.skip("no FIFOs on this platform")
    project.bench()
    (project.path / "baselines").mkdir()
    os.mkfifo(project.path / "baselines" / "toy.json")
    result = project.run("--npubench", "toy", "--regen-baselines")
    result.assert_outcomes(errors=1)
    assert "baselines/toy.json is a FIFO, not a regular file" in output(result)
    assert_no_plugin_traceback(result)


# -- writes through symlinks --------------------------------------------------------------------


def test_a_dangling_outward_symlink_is_refused_and_creates_nothing(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """baselines/toy.json -> <outside>/deep/er/toy.json (missing): the regen used to create
    <outside>/deep/er and write the file there. Now it names the link and the target, writes
    nothing and makes no folder."""
    project.bench()
    outside = tmp_path_factory.mktemp("outside")
    target = outside / "deep" / "er" / "toy.json"
    (project.path / "baselines").mkdir()
    (project.path / "baselines" / "toy.json").symlink_to(target)
    result = project.run("--npubench", "toy", "--regen-baselines")
    assert result.ret != 0
    text = output(result)
    assert f"baselines/toy.json is a symlink to {target}, which is outside" in text
    assert "not written through" in text
    assert not (outside / "deep").exists()
    assert list(outside.iterdir()) == []
    assert (project.path / "baselines" / "toy.json").is_symlink()
    assert_no_plugin_traceback(result)


def test_an_outward_symlink_to_an_existing_file_leaves_it_untouched(
    project: Project, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A link to a real file outside the project: the target keeps its bytes and no lock or
    temp file appears beside it."""
    text = measured(project)
    outside = tmp_path_factory.mktemp("outside")
    target = outside / "toy.json"
    target.write_text(text)
    link = project.path / "baselines" / "toy.json"
    link.unlink()
    link.symlink_to(target)
    project.knobs(scale=2.0)
    result = project.run("--npubench", "toy", "--regen-baselines")
    assert result.ret != 0
    assert f"is a symlink to {target}" in output(result)
    assert target.read_text() == text
    assert sorted(p.name for p in outside.iterdir()) == ["toy.json"]


def test_a_symlink_inside_the_project_is_still_written_through(project: Project) -> None:
    """The shared-baseline case keeps working: a dangling link to a folder inside the project
    gets its target (and the folder) made there."""
    project.bench()
    (project.path / "baselines").mkdir()
    target = project.path / "shared" / "perf" / "toy.json"
    (project.path / "baselines" / "toy.json").symlink_to(target)
    project.run("--npubench", "toy", "--regen-baselines").assert_outcomes(passed=4)
    assert target.is_file() and (project.path / "baselines" / "toy.json").is_symlink()


def test_write_atomic_and_locked_refuse_an_outward_link_by_name(tmp_path: Path) -> None:
    """The library functions themselves: OutsideLinkError (an OSError) before any mkdir."""
    root = tmp_path / "root"
    (root / "baselines").mkdir(parents=True)
    link = root / "baselines" / "x.json"
    link.symlink_to(tmp_path / "elsewhere" / "x.json")
    for attempt in (
        lambda: write_atomic(link, "{}", inside=[root]),
        lambda: locked(link, inside=[root]).__enter__(),
    ):
        with pytest.raises(OSError, match=f"{link} is a symlink to {tmp_path / 'elsewhere'}"):
            attempt()
    assert not (tmp_path / "elsewhere").exists()
