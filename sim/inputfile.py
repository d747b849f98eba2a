"""Reading an input file the simulator did not write: a regular file, bounded, UTF-8 (ADR 0019).

Every file a user names (a topology YAML, a SCALE-Sim cfg or topology CSV) is read here, and
only if it is a **regular file**: a FIFO would block ``open()`` until a writer came, a device
such as ``/dev/zero`` never ends, a directory is not text. The kind is checked with ``stat``
before opening, and again with ``fstat`` on the descriptor (opened ``O_NONBLOCK``, so even a
FIFO swapped in between cannot block), so what is read is what was checked. The file is read
only up to its **size limit** (one byte more, to tell that it is larger), and decoded as
**UTF-8** (a BOM is fine); UTF-16/32 text, NUL bytes and undecodable bytes are each one error
naming the file and the line. Every error is the caller's :class:`sim.errors.NpuSimError`
subclass, so a topology says ``TopologyError`` and a SCALE-Sim file ``ScaleSimInputError``.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sim.errors import NpuSimError, short_repr

__all__ = ["read_text"]

_KINDS = (
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISDIR, "a directory"),
)
SAVE = "Save it as UTF-8 text."


def _kind(mode: int) -> str:
    for test, name in _KINDS:
        if test(mode):
            return name
    return "not a regular file"


def _not_regular(path: Path, what: str, mode: int) -> str:
    return (
        f"{path}: is {_kind(mode)}, not a regular file; a {what} is read only from a regular "
        "file (a pipe or a device could block or never end). Pass the file itself."
    )


def read_text(
    path: str | os.PathLike[str], *, what: str, limit: int, error: type[NpuSimError], hint: str = ""
) -> str:
    """The text of ``path``, a regular file of at most ``limit`` bytes, decoded as UTF-8.

    ``what`` names the file in messages ("topology file"); ``hint`` is added to the
    message of a missing file (e.g. the names that exist). Raises ``error``, never blocks.
    """
    p = Path(path)
    try:
        st = os.stat(p)
    except FileNotFoundError:
        raise error(f"{p}: no such {what}. {hint}".rstrip()) from None
    except (OSError, ValueError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else str(exc)
        raise error(f"{short_repr(str(p))}: cannot be read ({reason}).") from None
    if not stat.S_ISREG(st.st_mode):
        raise error(_not_regular(p, what, st.st_mode))
    if st.st_size > limit:
        raise error(_too_large(p, what, limit))
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(p, flags)
    except OSError as exc:
        raise error(f"{p}: cannot be read ({exc.strerror}).") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):  # replaced between stat and open
            raise error(_not_regular(p, what, mode))
        raw = _read_at_most(fd, limit + 1)
    except OSError as exc:
        raise error(f"{p}: cannot be read ({exc.strerror}).") from None
    finally:
        os.close(fd)
    if len(raw) > limit:  # it grew after the stat
        raise error(_too_large(p, what, limit))
    return decode_utf8(raw, p, what, error)


def _too_large(path: Path, what: str, limit: int) -> str:
    return f"{path}: larger than {limit >> 10} KiB, which no {what} is; pass the right file."


def _read_at_most(fd: int, n: int) -> bytes:
    parts: list[bytes] = []
    while n > 0:
        part = os.read(fd, min(n, 1 << 20))
        if not part:
            break
        parts.append(part)
        n -= len(part)
    return b"".join(parts)


def decode_utf8(raw: bytes, path: Path, what: str, error: type[NpuSimError]) -> str:
    """``raw`` as UTF-8 text (a BOM is dropped); otherwise ``error`` naming the file and line."""
    if raw.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")) or (
        len(raw) >= 4 and (raw[1::2][:32].count(0) > 12 or raw[0::2][:32].count(0) > 12)
    ):
        raise error(f"{path}: looks like UTF-16 or UTF-32 text, not UTF-8. {SAVE}")
    if b"\x00" in raw:
        offset = raw.index(b"\x00")
        line = raw.count(b"\n", 0, offset) + 1
        raise error(
            f"{path}: binary data, not a {what} (a NUL byte at offset {offset}, line {line}). "
            f"Pass a {what} that is text. {SAVE}"
        )
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        bad = raw[exc.start]
        raise error(
            f"{path}: not UTF-8: byte 0x{bad:02x} at offset {exc.start} (line {line}); "
            f"Latin-1 or Windows-1252 text, or a binary file? {SAVE}"
        ) from None
