"""Reading the plugin's input files as data: a regular file under a size limit, UTF-8, strict JSON.

Baseline files and shard.json files come from hand edits, bad merges and downloaded CI
artifacts. Nothing here waits on a FIFO, reads a device or a 300 MB file whole, or lets a
``TypeError``/``RecursionError`` out: every defect is one :class:`InputError` whose text says
what is wrong (the caller adds the file's name and the fix).
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

#: Longest number literal a file may hold (a float64 needs 24 characters; this leaves room).
MAX_NUMBER_CHARS = 64


class InputError(ValueError):
    """A file that cannot be used as input; the message says what is wrong with it."""


def read_text(path: Path, limit: int) -> str | None:
    """The UTF-8 text of ``path``; None if it does not exist.

    InputError if it is not a regular file (a FIFO, a device, a socket), holds more than
    ``limit`` bytes, or is not UTF-8. A directory raises IsADirectoryError, other OS errors
    pass through, as ``open()`` would raise them.
    """
    try:
        info = path.stat()
    except FileNotFoundError:
        return None
    if stat.S_ISDIR(info.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    _check_regular(info, limit)
    # O_NONBLOCK: if a FIFO took the file's place since the stat, open() must not wait for it
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as handle:
        _check_regular(os.fstat(handle.fileno()), limit)
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputError(f"is over the {_size(limit)} limit")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise InputError(
            f"is not UTF-8 text (byte 0x{data[exc.start]:02x} at line {line}, offset "
            f"{exc.start}); save it as UTF-8"
        ) from None


def _check_regular(info: os.stat_result, limit: int) -> None:
    if not stat.S_ISREG(info.st_mode):
        kind = (
            "a FIFO"
            if stat.S_ISFIFO(info.st_mode)
            else "a device"
            if stat.S_ISCHR(info.st_mode) or stat.S_ISBLK(info.st_mode)
            else "a socket"
            if stat.S_ISSOCK(info.st_mode)
            else "not a file"
        )
        raise InputError(f"is {kind}, not a regular file")
    if info.st_size > limit:
        raise InputError(f"is {_size(info.st_size)}, over the {_size(limit)} limit")


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MiB" if n >= 2**20 else f"{n} bytes"


def loads(text: str, what: str = "file") -> Any:
    """Strict JSON: no duplicate keys, no number over :data:`MAX_NUMBER_CHARS` characters;
    deep nesting is an InputError too. (NaN and Infinity parse: the caller's type checks
    name the entry that holds them.)"""
    try:
        return json.loads(
            text,
            object_pairs_hook=_no_duplicates,
            parse_int=_number(int),
            parse_float=_number(float),
        )
    except json.JSONDecodeError as exc:
        raise InputError(
            f"is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise InputError(f"is nested too deeply to be a {what}") from None


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise InputError(f"has the key {short(key)} twice in one object (a bad merge?)")
        out[key] = value
    return out


def _number(kind: type[int] | type[float]) -> Any:
    def parse(text: str) -> int | float:
        if len(text) > MAX_NUMBER_CHARS:
            raise InputError(f"holds a number of {len(text)} characters ({text[:20]}...)")
        return kind(text)

    return parse


def short(value: object, most: int = 60) -> str:
    """``repr`` of a value, cut to ``most`` characters for a message."""
    text = repr(value) if not isinstance(value, str) else repr(value[: most + 1])
    return text if len(text) <= most else text[: most - 3] + "..."
