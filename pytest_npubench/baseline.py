"""Baseline files: ``<baselines>/<bench>.json``, read strictly, merged, written atomically.

The format is made to be reviewed in a diff: sorted keys, one object per config id, floats as
Python's shortest round-trip repr, no timestamps. It carries a schema version and the
fingerprint of what the numbers were measured on.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, NamedTuple

from pytest_npubench.bench import Bench, is_real_number, json_params

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]
try:
    import msvcrt
except ImportError:  # not Windows
    msvcrt = None  # type: ignore[assignment]
from pytest_npubench.compare import ConfigResult, relative_change
from pytest_npubench.inputs import InputError, loads, read_text, short

SCHEMA_VERSION = 1


class BaselineError(Exception):
    """A baseline file that cannot be used: ``problem`` says what is wrong, ``advice`` the fix."""

    def __init__(self, path: Path, problem: str, advice: str = "") -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.advice = advice


@dataclass
class BaselineFile:
    """The content of one baseline file."""

    bench: str
    fingerprint: str | None
    meta: dict[str, Any] = field(default_factory=dict)
    entries: dict[str, dict[str, Any]] = field(default_factory=dict)
    topology: dict[str, Any] | None = None

    def metrics(self, config_id: str) -> dict[str, float] | None:
        """The baseline metric values of one config, or None if it has no entry."""
        entry = self.entries.get(config_id)
        return None if entry is None else dict(entry["metrics"])

    def render(self) -> str:
        """The file's text: stable, sorted, one trailing newline."""
        data = {
            "schema": SCHEMA_VERSION,
            "bench": self.bench,
            "fingerprint": self.fingerprint,
            "meta": self.meta,
            "configs": self.entries,
        }
        if self.topology is not None:
            data["topology"] = self.topology
        return json.dumps(data, indent=2, sort_keys=True, allow_nan=False) + "\n"


#: Largest baseline file read (the biggest committed one is under 1 MiB); a bigger one is
#: refused before it is read, not parsed for a minute.
MAX_BASELINE_BYTES = 64 * 2**20


def load(path: Path, bench: str | None = None) -> BaselineFile | None:
    """Read a baseline file; None if it does not exist; BaselineError if it cannot be used.

    Anything a hand edit or a bad merge can put in the file is a BaselineError naming the
    problem (never another exception): bad JSON, duplicate keys, absurd numbers, deep nesting,
    a directory, FIFO or device in its place, more than :data:`MAX_BASELINE_BYTES`, text that
    is not UTF-8, the file of another bench.
    """
    try:
        text = read_text(path, MAX_BASELINE_BYTES)
        if text is None:
            return None
        data = loads(text, "baseline file")
    except InputError as exc:
        raise BaselineError(path, str(exc)) from None
    except OSError as exc:
        raise BaselineError(path, f"cannot be read ({type(exc).__name__}: {exc})") from None
    found = _parse(path, data)
    if bench is not None and found.bench and found.bench != bench:
        raise BaselineError(
            path, f"is the baseline of bench {found.bench!r}, not of {bench!r} ('bench' field)"
        )
    return found


def parse_text(path: Path, text: str, bench: str | None = None) -> BaselineFile:
    """A baseline file's content from its text (a version read from git, say): the checks of
    :func:`load` without the file system; ``path`` names it in a BaselineError."""
    try:
        data = loads(text, "baseline file")
    except InputError as exc:
        raise BaselineError(path, str(exc)) from None
    found = _parse(path, data)
    if bench is not None and found.bench and found.bench != bench:
        raise BaselineError(
            path, f"is the baseline of bench {found.bench!r}, not of {bench!r} ('bench' field)"
        )
    return found


_short = short


def _parse(path: Path, data: object) -> BaselineFile:
    if not isinstance(data, dict):
        raise BaselineError(path, "must hold a JSON object at the top level")
    schema = data.get("schema")
    if not isinstance(schema, int) or isinstance(schema, bool) or schema < 1:
        raise BaselineError(path, f"has no valid schema version (got {_short(schema)}, expected 1)")
    if schema > SCHEMA_VERSION:
        raise BaselineError(
            path,
            f"has schema version {schema}, but this pytest-npubench reads schema "
            f"{SCHEMA_VERSION} at most",
            "upgrade pytest-npubench",
        )
    fingerprint = data.get("fingerprint")
    if fingerprint is not None and not isinstance(fingerprint, str):
        raise BaselineError(path, f"'fingerprint' must be a string, got {_short(fingerprint)}")
    meta = data.get("meta", {})
    if not isinstance(meta, dict):
        raise BaselineError(path, "'meta' must be an object")
    configs = data.get("configs")
    if not isinstance(configs, dict):
        raise BaselineError(path, "'configs' must be an object of config id to entry")
    for cid, entry in configs.items():
        _check_entry(path, cid, entry)
    topology = data.get("topology")
    if topology is not None and not isinstance(topology, dict):
        raise BaselineError(path, "'topology' must be an object of key to value")
    name = data.get("bench", "")
    if not isinstance(name, str):
        raise BaselineError(path, f"'bench' must be a string, got {_short(name)}")
    return BaselineFile(name, fingerprint, meta, configs, topology)


def _check_entry(path: Path, cid: str, entry: object) -> None:
    metrics = entry.get("metrics") if isinstance(entry, dict) else None
    if not isinstance(metrics, dict):
        raise BaselineError(path, f"entry {_short(cid)} has no 'metrics' object")
    for name, value in metrics.items():
        if not is_real_number(value):
            raise BaselineError(
                path,
                f"entry {_short(cid)}: metric {_short(name)} is not a finite number "
                f"({_short(value)})",
            )


LOCK_TIMEOUT_S = 120.0


@contextlib.contextmanager
def locked(
    path: Path, timeout_s: float = LOCK_TIMEOUT_S, *, inside: Sequence[Path] | None = None
) -> Iterator[None]:
    """Hold ``.<name>.lock`` beside ``path`` (an advisory ``flock``; ``msvcrt.locking`` on
    Windows) so that writers of one baseline file take turns: each reads, merges and writes
    under the lock, so two regens at once never lose each other's entries. Temp files a killed
    writer left are removed, and so is the lock file when the lock is released, so a regen
    leaves nothing beside the baseline. The lock sits beside the file, not in a cache folder,
    so every run that writes the file finds it, whatever its rootdir or cache settings.
    ``inside``: as for :func:`write_atomic` (checked before any folder is made)."""
    target = _target(path, inside)
    target.parent.mkdir(parents=True, exist_ok=True)
    lock_path = target.with_name(f".{target.name}.lock")
    handle = _acquire(lock_path, timeout_s)
    try:
        for stale in target.parent.glob(f".{target.name}.*.tmp"):
            with contextlib.suppress(OSError):
                stale.unlink()
        yield
    finally:
        _release(handle, lock_path)


def _acquire(lock_path: Path, timeout_s: float) -> IO[bytes]:
    """Open and lock the lock file; retry until the file locked is the one at ``lock_path``.

    A holder removes the file before it unlocks (POSIX), so a waiter that got the lock on a
    file already removed holds nothing: it sees that the path names another file (or none)
    and tries again. Only the lock on the file at the path counts, and one process at a time
    holds that."""
    deadline = time.monotonic() + timeout_s
    while True:
        handle = open(lock_path, "a+b")  # noqa: SIM115 - held until _release
        try:
            if _try_lock(handle) and _is_at(handle, lock_path):
                return handle
        except BaseException:
            handle.close()
            raise
        handle.close()
        if time.monotonic() > deadline:
            raise TimeoutError(
                f"another pytest-npubench run has held {lock_path} for {timeout_s:.0f} s; "
                "wait for it to finish, or remove the lock file if no run is active"
            )
        time.sleep(0.05)


def _try_lock(handle: IO[bytes]) -> bool:
    if fcntl is not None:
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        return True
    if msvcrt is not None:  # pragma: no cover - Windows
        handle.seek(0)
        try:
            msvcrt.locking(handle.fileno(), msvcrt.LK_NBLCK, 1)
        except OSError:
            return False
        return True
    return True  # pragma: no cover - no locking here: writes stay atomic, not serialised


def _is_at(handle: IO[bytes], lock_path: Path) -> bool:
    """The open file is still the one ``lock_path`` names (no holder removed it meanwhile)."""
    try:
        at_path = os.stat(lock_path)
    except FileNotFoundError:
        return False
    held = os.fstat(handle.fileno())
    return (held.st_dev, held.st_ino) == (at_path.st_dev, at_path.st_ino)


def _release(handle: IO[bytes], lock_path: Path) -> None:
    """Remove the lock file, then unlock. On POSIX the removal happens while the lock is held
    (waiters then find the path changed and retry); Windows refuses to remove an open file, so
    there the file goes after it is closed, unless another run has it open (that run's
    release removes it)."""
    try:
        if fcntl is not None:
            with contextlib.suppress(OSError):
                lock_path.unlink()
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)
        elif msvcrt is not None:  # pragma: no cover - Windows
            handle.seek(0)
            with contextlib.suppress(OSError):
                msvcrt.locking(handle.fileno(), msvcrt.LK_UNLCK, 1)
    finally:
        handle.close()
    if fcntl is None:  # pragma: no cover - Windows
        with contextlib.suppress(OSError):
            lock_path.unlink()


class OutsideLinkError(OSError):
    """A write through a symlink whose target lies outside the folders it may write to."""


def _target(path: Path, inside: Sequence[Path] | None = None) -> Path:
    """The file a write must replace: a symlink's target (so a shared baseline stays shared).

    With ``inside``, the target (of a dangling link too) must lie in one of those folders;
    else OutsideLinkError naming the link and its target, before anything is created."""
    if not path.is_symlink():
        return path
    target = path.resolve()
    if inside is not None:
        roots = [root.resolve() for root in inside]
        if not any(root == target or root in target.parents for root in roots):
            where = " and ".join(str(root) for root in dict.fromkeys(roots))
            raise OutsideLinkError(
                f"{path} is a symlink to {target}, which is outside {where}; not written "
                "through (point the link inside the project, or replace it with a file)"
            )
    return target


def write_atomic(path: Path, text: str, *, inside: Sequence[Path] | None = None) -> None:
    """Replace ``path`` with ``text`` all at once: temp file in the same folder, then rename.

    A crash at any point leaves either the old file or the new one, never a mix. A symlink is
    written through: its target is replaced and the link stays. With ``inside`` (e.g. the
    project root and the baselines folder), a symlink whose target lies outside all of them
    is refused with OutsideLinkError (an OSError) and nothing is written or created.
    """
    path = _target(path, inside)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, _file_mode(path))
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _file_mode(path: Path) -> int:
    try:
        return path.stat().st_mode & 0o777
    except FileNotFoundError:
        umask = os.umask(0)
        os.umask(umask)
        return 0o666 & ~umask


class Delta(NamedTuple):
    """One metric an accepted regen changed: old value (None if new), new value, change."""

    name: str
    old: float | None
    new: float
    change: float | None


@dataclass
class RegenReport:
    """What a regen did to one baseline file, for the terminal."""

    path: Path
    added: list[str] = field(default_factory=list)
    changed: dict[str, list[Delta]] = field(default_factory=dict)
    unchanged: list[str] = field(default_factory=list)
    not_updated: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    stale: list[str] = field(default_factory=list)
    pruned: list[str] = field(default_factory=list)
    dropped: list[str] = field(default_factory=list)
    fingerprint_changed: bool = False
    old_fingerprint: str | None = None
    topology_changes: list[str] = field(default_factory=list)
    not_remeasured: list[str] = field(default_factory=list)
    written: bool = False


def merge(
    bench: Bench,
    old: BaselineFile | None,
    results: Iterable[ConfigResult],
    *,
    fingerprint: str,
    meta: Mapping[str, Any],
    prune: bool,
    report: RegenReport,
    topology: dict[str, Any] | None = None,
) -> BaselineFile:
    """The new baseline file: this run's results over the old entries.

    Entries not run are kept; entries of configs the bench no longer has are kept unless
    ``prune``. If the fingerprint changed (a what-if accepted), every re-measured entry is
    reported against its old values; configs of the bench not re-measured are listed in
    ``report.not_remeasured`` (the caller must not write a file that mixes two topologies) and
    entries of configs the bench no longer has are dropped.
    """
    entries: dict[str, dict[str, Any]] = {} if old is None else dict(old.entries)
    if old is not None and old.fingerprint != fingerprint:
        report.fingerprint_changed = True
        report.old_fingerprint = old.fingerprint
        report.topology_changes = topology_diff(old.topology, topology)
    ran: set[str] = set()
    for result in results:
        if result.source != "run" or result.verdict in ("error", "failed-check"):
            if result.source == "run":
                report.not_updated.append(result.config_id)
            continue
        ran.add(result.config_id)
        _record(report, result.config_id, entries.get(result.config_id), result.metrics)
        entries[result.config_id] = {
            "metrics": dict(result.metrics),
            "params": json_params(result.params),
        }
    _sort_out_unrun(bench, old, entries, ran, prune, report)
    meta_copy = json.loads(json.dumps(dict(meta)))
    return BaselineFile(bench.name, fingerprint, meta_copy, entries, topology)


def topology_diff(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> list[str]:
    """``key old -> new`` for every flat topology key that differs (empty if either is unknown)."""
    if old is None or new is None:
        return []
    missing = "(none)"
    return [
        f"{key} {_value_text(old.get(key, missing))} -> {_value_text(new.get(key, missing))}"
        for key in sorted(set(old) | set(new))
        if old.get(key, missing) != new.get(key, missing)
    ]


def _value_text(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _record(
    report: RegenReport, cid: str, old_entry: Mapping[str, Any] | None, new: Mapping[str, float]
) -> None:
    if old_entry is None:
        report.added.append(cid)
        return
    old = old_entry["metrics"]
    deltas = [
        Delta(
            name, old.get(name), value, relative_change(old[name], value) if name in old else None
        )
        for name, value in new.items()
        if old.get(name) != value
    ]
    if deltas or set(old) != set(new):
        report.changed[cid] = deltas
    else:
        report.unchanged.append(cid)


def _sort_out_unrun(
    bench: Bench,
    old: BaselineFile | None,
    entries: dict[str, dict[str, Any]],
    ran: set[str],
    prune: bool,
    report: RegenReport,
) -> None:
    if old is None:
        return
    for cid in sorted(old.entries):
        if cid in ran:
            continue
        if report.fingerprint_changed and bench.has_config(cid):
            report.not_remeasured.append(cid)
        elif report.fingerprint_changed:
            entries.pop(cid, None)
            report.dropped.append(cid)
        elif bench.has_config(cid):
            report.kept.append(cid)
        elif prune:
            entries.pop(cid, None)
            report.pruned.append(cid)
        else:
            entries[cid] = old.entries[cid]
            report.stale.append(cid)
