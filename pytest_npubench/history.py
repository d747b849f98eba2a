"""The performance history in git: every committed version of ``baselines/<bench>.json``.

The baselines are committed JSON, so the project's git history is its performance history
(asv's ``publish``/``find`` idea without a server or a database). This module reads it with
``git log`` and ``git show`` (no checkout of old commits) and says, per bench, which commits
moved which gated metric beyond its tolerance; :mod:`pytest_npubench.history_report` writes
the tables and figures.

Which history: the first-parent chain of ``HEAD`` (the main line; a merge is one step, and the
commits it brought in that touched the file are listed with it). ``--since REV`` starts at the
version the file had at ``REV``. A commit whose file cannot be read (bad JSON, a newer schema,
a file an old version of the tool wrote differently) is reported and skipped: the next good
version is compared with the last good one. A change of topology fingerprint or of schema
between two versions is a *topology change* and never a regression: its numbers were measured
on other hardware. A config that disappears while another appears with the same numbers is
a rename.

Tolerances and directions come from the benches as they are declared now (the bench modules
of this checkout). An ungated metric, or one the bench no longer declares, is listed only when
asked for by name (``--metric``), as ``changed`` at tolerance 0, never as a regression. A bench
whose module cannot be imported (``metrics=None``) has every change listed as ``changed``.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from pytest_npubench.baseline import BaselineError, BaselineFile, parse_text, topology_diff
from pytest_npubench.bench import Metric
from pytest_npubench.compare import compare_metric, relative_change


class HistoryError(Exception):
    """History cannot be read at all (no git, not a repository, a bad revision)."""


@dataclass(frozen=True)
class Commit:
    sha: str
    parents: tuple[str, ...]
    date: str  # ISO 8601, the author date
    subject: str

    @property
    def short(self) -> str:
        return self.sha[:8]


@dataclass
class Version:
    """One committed version of a bench's baseline file."""

    commit: Commit
    file: BaselineFile | None  # None: removed in this commit, or unreadable (see ``problem``)
    problem: str = ""
    via: list[str] = field(default_factory=list)  # a merge: the merged commits that touched it


@dataclass(frozen=True)
class Move:
    """A metric of a config that moved between two consecutive versions."""

    commit: Commit
    config: str
    metric: str
    old: float
    new: float
    change: float | None  # relative; None from 0
    verdict: str  # regression | improved | changed (ungated or undeclared metric)
    tolerance: float


@dataclass(frozen=True)
class Event:
    """Something that is not a metric move: a topology or schema change, configs added,
    removed or renamed, a version that could not be read."""

    commit: Commit
    kind: str  # topology | schema | added | removed | renamed | unreadable | file-removed
    text: str


@dataclass
class BenchHistory:
    bench: str
    path: str  # the baseline file, relative to the repository
    versions: list[Version]
    moves: list[Move]
    events: list[Event]

    def series(self, config: str, metric: str) -> list[tuple[Commit, float | None]]:
        """The metric's value at every readable version (None where the config is absent)."""
        out: list[tuple[Commit, float | None]] = []
        for v in self.versions:
            if v.file is None:
                continue
            entry = v.file.entries.get(config)
            value = None if entry is None else entry["metrics"].get(metric)
            out.append((v.commit, value if isinstance(value, (int, float)) else None))
        return out

    def configs(self) -> list[str]:
        seen: dict[str, None] = {}
        for v in self.versions:
            if v.file is not None:
                seen.update(dict.fromkeys(v.file.entries))
        return list(seen)


@dataclass
class Repo:
    """The git repository the history is read from."""

    root: Path
    shallow: bool
    runner: Callable[[Sequence[str]], str]

    def git(self, *args: str) -> str:
        return self.runner(["git", "-C", str(self.root), *args])


def _run(args: Sequence[str]) -> str:
    try:
        done = subprocess.run(list(args), capture_output=True, text=True, check=False)
    except FileNotFoundError:
        raise HistoryError("git is not installed: the history is read from git") from None
    if done.returncode != 0:
        raise HistoryError(f"{' '.join(args[3:])}: {done.stderr.strip() or 'git failed'}")
    return done.stdout


def open_repo(where: Path) -> Repo:
    """The repository holding ``where``; HistoryError naming the fix if there is none."""
    try:
        top = _run(["git", "-C", str(where), "rev-parse", "--show-toplevel"]).strip()
    except HistoryError:
        raise HistoryError(
            f"{where}: not inside a git repository; the history reads the committed versions "
            "of the baselines from git: run it in a clone of the project"
        ) from None
    root = Path(top)
    shallow = _run(["git", "-C", top, "rev-parse", "--is-shallow-repository"]).strip() == "true"
    return Repo(root, shallow, _run)


def _commits(repo: Repo, path: str, since: str | None) -> tuple[list[Commit], Commit | None]:
    """Commits of the first-parent chain that changed ``path``, oldest first, and the
    ``--since`` commit itself (the starting version), if any."""
    try:
        repo.git("rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    except HistoryError:
        raise HistoryError(
            f"{repo.root}: the repository has no commits yet; commit the baselines first"
        ) from None
    start: Commit | None = None
    span = ["HEAD"]
    if since is not None:
        try:
            sha = repo.git("rev-parse", "--verify", f"{since}^{{commit}}").strip()
        except HistoryError:
            raise HistoryError(
                f"--since {since}: not a commit of this repository (give a hash, tag or branch)"
            ) from None
        start = _parse_log(repo.git("log", "-1", _FORMAT, sha))[0]
        span = [f"{sha}..HEAD"]
    text = repo.git("log", "--first-parent", _FORMAT, *span, "--", path)
    return list(reversed(_parse_log(text))), start


_FORMAT = "--format=%H%x1f%P%x1f%aI%x1f%s%x1e"


def _parse_log(text: str) -> list[Commit]:
    out = []
    for record in text.split("\x1e"):
        record = record.strip("\n")
        if not record:
            continue
        sha, parents, date, subject = record.split("\x1f", 3)
        out.append(Commit(sha, tuple(parents.split()), date, subject))
    return out


def _version(repo: Repo, commit: Commit, path: str, bench: str) -> Version:
    try:
        text = repo.git("show", f"{commit.sha}:{path}")
    except HistoryError:
        return Version(commit, None, "the file does not exist in this commit")
    try:
        found = parse_text(Path(path), text, bench)
    except BaselineError as exc:
        return Version(commit, None, f"cannot be read: {exc.problem}")
    via: list[str] = []
    if len(commit.parents) > 1:
        merged = repo.git("log", "--format=%h %s", f"{commit.parents[0]}..{commit.sha}", "--", path)
        via = [line for line in merged.splitlines() if line.strip()]
    return Version(commit, found, "", via)


def read_history(
    repo: Repo,
    baselines: str,
    bench: str,
    metrics: Mapping[str, Metric] | None,
    *,
    since: str | None = None,
    select: Callable[[str], bool] | None = None,
    only_metrics: Sequence[str] = (),
) -> BenchHistory:
    """Every version of ``<baselines>/<bench>.json`` and what moved between them."""
    path = f"{baselines.rstrip('/')}/{bench}.json"
    commits, start = _commits(repo, path, since)
    versions = [_version(repo, c, path, bench) for c in commits]
    if start is not None:
        first = _version(repo, start, path, bench)
        if first.file is not None:
            versions.insert(0, first)
    history = BenchHistory(bench, path, versions, [], [])
    previous: BaselineFile | None = None
    for v in versions:
        if v.file is None:
            if v.problem.startswith("cannot be read"):
                history.events.append(Event(v.commit, "unreadable", v.problem))
            elif previous is not None:
                history.events.append(Event(v.commit, "file-removed", "the file was removed"))
                previous = None
            continue
        if previous is not None:
            _compare(history, v.commit, previous, v.file, metrics, select, only_metrics)
        previous = v.file
    return history


def _compare(
    history: BenchHistory,
    commit: Commit,
    old: BaselineFile,
    new: BaselineFile,
    metrics: Mapping[str, Metric] | None,
    select: Callable[[str], bool] | None,
    only: Sequence[str],
) -> None:
    keep = select or (lambda _: True)
    if old.fingerprint != new.fingerprint or old.topology != new.topology:
        keys = topology_diff(old.topology, new.topology)
        text = f"topology {old.fingerprint} -> {new.fingerprint}"
        history.events.append(
            Event(commit, "topology", text + (": " + "; ".join(keys) if keys else ""))
        )
        return  # numbers measured on other hardware: not moves
    removed = [c for c in old.entries if c not in new.entries and keep(c)]
    added = [c for c in new.entries if c not in old.entries and keep(c)]
    for gone in list(removed):
        same = [c for c in added if new.entries[c]["metrics"] == old.entries[gone]["metrics"]]
        if len(same) == 1:
            history.events.append(Event(commit, "renamed", f"{gone} -> {same[0]}"))
            removed.remove(gone)
            added.remove(same[0])
    if added:
        history.events.append(Event(commit, "added", _names(added)))
    if removed:
        history.events.append(Event(commit, "removed", _names(removed)))
    for config in sorted(c for c in new.entries if c in old.entries and keep(c)):
        before, after = old.entries[config]["metrics"], new.entries[config]["metrics"]
        for name in sorted(set(before) & set(after)):
            if only and name not in only:
                continue
            a, b = before[name], after[name]
            if not isinstance(a, (int, float)) or not isinstance(b, (int, float)) or a == b:
                continue
            declared = None if metrics is None else metrics.get(name)
            if metrics is None:
                verdict, tolerance = "changed", 0.0  # no declaration at all: every change
            elif declared is None or not declared.gate:
                if name not in only:
                    continue  # an ungated metric is listed only when asked for by name
                verdict, tolerance = "changed", 0.0
            else:
                verdict, tolerance = compare_metric(declared, a, b).verdict, declared.tolerance
                if verdict == "pass":
                    continue
            history.moves.append(
                Move(commit, config, name, a, b, relative_change(a, b), verdict, tolerance)
            )


def _names(configs: Sequence[str], most: int = 6) -> str:
    shown = ", ".join(configs[:most])
    more = len(configs) - most
    return f"{len(configs)} config(s): {shown}" + (f" and {more} more" if more > 0 else "")
