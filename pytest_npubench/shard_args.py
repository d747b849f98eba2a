"""The pytest command a shard recorded, as data: an allow-list of what the merge replays.

A shard.json is a downloaded CI artifact. Its ``args`` may select configs and say how to
print, never choose code or a path: no plugin (``-p MODULE``), no ini value (``-o``, ``-c``),
no root or conftest folder (``--rootdir``, ``--confcutdir``, a path argument, whose folders'
``conftest.py`` pytest imports), no file to write (``--junitxml``, ``--npubench-artifacts``),
no warning category to import (``-W``). Anything not allowed is refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

_NAMES = re.compile(r"(all|[A-Za-z0-9_][A-Za-z0-9_.-]*)(,[A-Za-z0-9_][A-Za-z0-9_.-]*)*\Z")
_BLOCK = re.compile(r"no:[A-Za-z0-9_][A-Za-z0-9_.:-]*\Z")


def _positive_int(value: str) -> bool:
    return value.isdigit() and len(value) <= 9 and int(value) > 0


def _count(value: str) -> bool:
    return value.isdigit() and len(value) <= 9


#: Options that take no value.
FLAGS = frozenset(
    {
        "--regen-baselines",
        "--npubench-strict",
        "--npubench-allow-improvements",
        "--npubench-prune",
        "--npubench-trace",
        "--quiet",
        "--verbose",
        "--exitfirst",
        "--showlocals",
        "--strict-markers",
        "--no-header",
        "--no-summary",
    }
)
#: Short flags that may be combined (``-qq``, ``-vx``).
SHORT_FLAGS = "qvxl"
#: Options with a value, and the check of that value.
VALUED: dict[str, Callable[[str], bool]] = {
    "--npubench": lambda v: bool(_NAMES.match(v)),
    "--npubench-trace-limit": _positive_int,
    "-k": lambda v: "\n" not in v,
    "-m": lambda v: "\n" not in v,
    "-p": lambda v: bool(_BLOCK.match(v)),  # only ``-p no:NAME``: it blocks, never imports
    "-r": lambda v: v.isalpha(),
    "--maxfail": _count,
    "--durations": _count,
    "--tb": lambda v: v in ("auto", "long", "short", "line", "native", "no"),
    "--color": lambda v: v in ("yes", "no", "auto"),
}
#: Why the options the issue names are refused (any other option is refused too).
REFUSED = {
    "-p": "imports the plugin module it names (only -p no:NAME is replayed)",
    "-o": "overrides an ini value, e.g. where baselines are written",
    "--override-ini": "overrides an ini value, e.g. where baselines are written",
    "-c": "chooses the ini file",
    "--config-file": "chooses the ini file",
    "--inifile": "chooses the ini file",
    "--rootdir": "chooses the project root",
    "--confcutdir": "chooses which conftest.py files are imported",
    "--noconftest": "changes which conftest.py files are imported",
    "-W": "imports the module of the warning category it names",
    "--pythonwarnings": "imports the module of the warning category it names",
    "--pyargs": "imports modules by name",
    "--import-mode": "changes how modules are imported",
    "--junitxml": "writes a file where it says",
    "--junit-xml": "writes a file where it says",
    "--junit-prefix": "belongs to --junitxml",
    "--log-file": "writes a file where it says",
    "--debug": "writes a file where it says",
    "--result-log": "writes a file where it says",
    "--resultlog": "writes a file where it says",
    "--basetemp": "chooses a folder pytest empties and writes",
    "--npubench-artifacts": (
        "writes where it says; the merge writes to its own --npubench-artifacts (default: "
        "npubench-artifacts)"
    ),
    "--npubench-replay": "the merge gives the replay itself",
    "--npubench-shard": "a merge runs every part",
    "-n": "starts worker processes",
    "--numprocesses": "starts worker processes",
    "--tx": "starts worker processes, remote ones too",
    "--dist": "belongs to xdist's workers",
    "--rsyncdir": "copies folders to remote workers",
    "--pdb": "opens a debugger",
    "--pdbcls": "imports the debugger class it names",
    "--trace": "opens a debugger",
    "--deselect": "selects by path",
    "--ignore": "selects by path",
    "--ignore-glob": "selects by path",
}
_ALLOWED = (
    "the merge replays only the plugin's --npubench options, --regen-baselines, -k, -m, "
    "-p no:NAME and output options (-q, -v, -x, -r, --tb, --color, --durations, --maxfail)"
)


def args_problem(args: Sequence[str]) -> str | None:
    """Why the merge must not replay this command line (None if it may): the first
    argument that is not on the allow-list, by name, and why."""
    i = 0
    while i < len(args):
        arg = args[i]
        if not arg.startswith("-") or arg in ("-", "--"):
            return (
                f"{_quote(arg)} is a path or a test name: pytest would import the conftest.py "
                "files of its folders, so a merge replays none"
            )
        name, value = _split(arg)
        if name in FLAGS or (value is None and _short_flags(arg)):
            i += 1
            continue
        if name not in VALUED:
            why = REFUSED.get(name, "is not on the allow-list")
            return f"{_quote(name)}: {why}; {_ALLOWED}"
        if value is None:
            if i + 1 >= len(args) or args[i + 1].startswith("-"):
                return f"{_quote(name)} has no value"
            value = args[i + 1]
            i += 1
        if not VALUED[name](value):
            why = REFUSED.get(name, "is not a value the merge replays")
            return f"{_quote(name)} {_quote(value)}: {why}"
        i += 1
    if not any(_split(a)[0] in ("--npubench", "--regen-baselines") for a in args):
        return (
            "selects no bench (neither --npubench nor --regen-baselines): replayed, it would "
            "collect and run the project's ordinary tests"
        )
    return None


def _split(arg: str) -> tuple[str, str | None]:
    """``--name=value`` / ``--name`` / ``-kEXPR`` / ``-k`` into (name, value or None)."""
    if arg.startswith("--"):
        name, eq, value = arg.partition("=")
        return name, value if eq else None
    if len(arg) > 2 and not _short_flags(arg):
        return arg[:2], arg[2:]
    return arg, None


def _short_flags(arg: str) -> bool:
    return (
        len(arg) > 1 and arg[0] == "-" and arg[1] != "-" and all(c in SHORT_FLAGS for c in arg[1:])
    )


def _quote(text: str) -> str:
    return repr(text if len(text) <= 80 else text[:77] + "...")
