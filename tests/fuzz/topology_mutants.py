"""The topology mutant catalogue: npu-1h.yaml with one key, value, type or encoding broken.

Deterministic and table-driven: each mutant is ``(id, file bytes)``. Values are written as
YAML text, so ``.nan``, ``1:30`` or an alias bomb reach the loader exactly as a user would
type them.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from sim.topology import TOPOLOGY_DIR

BASE_TEXT = (TOPOLOGY_DIR / "npu-1h.yaml").read_text(encoding="utf-8")
_LEAF = re.compile(r"^(?P<indent> *)(?P<key>[a-z_]+): *(?P<value>[^#\n]*?) *(?P<comment>#.*)?$")


def _leaves() -> list[tuple[int, str]]:
    """(line index, dotted key) of every key with a value in the base file."""
    out: list[tuple[int, str]] = []
    path: list[tuple[int, str]] = []  # (indent, key) of the open sections (energy.mac_pj)
    for i, line in enumerate(BASE_TEXT.splitlines()):
        m = _LEAF.match(line)
        if not m:
            continue
        indent = len(m["indent"])
        path = [(d, k) for d, k in path if d < indent]
        if not m["value"]:
            path.append((indent, m["key"]))
            continue
        out.append((i, ".".join([*(k for _, k in path), m["key"]])))
    return out


LEAVES = _leaves()
SECTIONS = sorted({key.split(".")[0] for _, key in LEAVES if "." in key})


def _bomb(levels: int = 9) -> str:
    """A billion-laughs alias bomb as one flow value: 9**levels leaves once expanded."""
    parts = ["&l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for n in range(1, levels):
        parts.append(f"&l{n} [" + ", ".join([f"*l{n - 1}"] * 9) + "]")
    return "[" + ", ".join(parts) + "]"


# YAML value tokens (one line each) that every key gets in turn
VALUE_TOKENS: dict[str, str] = {
    "nan": ".nan",
    "NaN": ".NaN",
    "inf": ".inf",
    "-inf": "-.inf",
    "zero": "0",
    "zero_float": "0.0",
    "neg_zero": "-0.0",
    "negative": "-1",
    "negative_float": "-2.5",
    "tiny": "1e-12",
    "tiny_float": "1.0e-12",
    "denormal": "5e-324",
    "underflow": "1e-400",
    "half": "0.5",
    "e16": "1e16",
    "e16_float": "1.0e+16",
    "e30": "1e30",
    "e300": "1e300",
    "overflow_float": "1e400",
    "int_2_31": str(2**31),
    "int_2_63": str(2**63),
    "int_1e6": "1000000",
    "int_1e8": "100000000",
    "int_10_30": str(10**30),
    "int_5000_digits": "9" * 5000,
    "sexagesimal": "1:30",
    "sexagesimal_float": "1:30.5",
    "octal_11": "017",
    "octal_12": "0o17",
    "hex": "0x10",
    "underscore": "1_000",
    "string": "fast",
    "quoted_number": '"16"',
    "empty_string": '""',
    "null": "null",
    "tilde": "~",
    "empty": "",
    "bool_true": "true",
    "bool_yes": "yes",
    "timestamp": "2001-12-14",
    "bad_timestamp": "2001-13-45",
    "list": "[1, 2]",
    "empty_list": "[]",
    "mapping": "{a: 1}",
    "long_string": '"' + "x" * 20_000 + '"',
    "deep_list": "[" * 5000 + "]" * 5000,
    "alias_bomb": _bomb(),
    "binary_tag": "!!binary aGVsbG8=",
    "python_tag": "!!python/object:os.system ls",
    "float_tag_text": "!!float abc",
    "int_tag_text": "!!int 1:30",
    "unicode_digits": "\u00b2\u00b3",
    "fullwidth_digits": "\uff11\uff16",
}


def _with_line(lines: list[str], index: int, new: str | None) -> bytes:
    out = list(lines)
    if new is None:
        del out[index]
    else:
        out[index] = new
    return ("\n".join(out) + "\n").encode("utf-8")


def value_mutants() -> Iterator[tuple[str, bytes]]:
    """Every key gets every value token; every key and every section is deleted once."""
    lines = BASE_TEXT.splitlines()
    for index, key in LEAVES:
        m = _LEAF.match(lines[index])
        assert m is not None
        for name, token in VALUE_TOKENS.items():
            yield f"{key}={name}", _with_line(lines, index, f"{m['indent']}{m['key']}: {token}")
        yield f"{key}=deleted", _with_line(lines, index, None)
        yield f"{key}=duplicated", _with_line(lines, index, f"{lines[index]}\n{lines[index]}")
        yield f"{key}=renamed", _with_line(lines, index, f"{m['indent']}{m['key']}x: 1")
    for section in SECTIONS:
        start = lines.index(f"{section}:")
        yield f"{section}=scalar", _with_line(lines, start, f"{section}: 3")
        yield f"{section}=list", _with_line(lines, start, f"{section}: [1, 2]")
        yield f"{section}=null_section", _with_line(lines, start, f"{section}: {{}}")
        yield f"{section}=unknown_key", _with_line(lines, start, f"{section}:\n  nosuch: 1")
        yield f"{section}=int_key", _with_line(lines, start, f"{section}:\n  1: 1")
        kept = [ln for ln in lines if not ln.startswith(f"{section}:")]
        yield f"{section}=no_header", ("\n".join(kept) + "\n").encode()


def structure_mutants() -> Iterator[tuple[str, bytes]]:
    """Whole-file damage: empty, truncated, not a mapping, unknown top-level keys, anchors."""
    text = BASE_TEXT
    lines = text.splitlines()
    yield "empty", b""
    yield "comment_only", b"# nothing here\n"
    yield "top_list", b"- 1\n- 2\n"
    yield "top_scalar", b"42\n"
    yield "top_string", b"npu-1h\n"
    yield "top_null", b"null\n"
    yield "unknown_top_key", (text + "extra: 1\n").encode()
    yield "int_top_key", (text + "1: 1\n").encode()
    yield "bool_top_key", (text + "true: 1\n").encode()
    yield "unclosed_flow", (text + "pe: [unclosed\n").encode()
    yield "tab_indent", text.replace("  tile_m", "\ttile_m").encode()
    yield "unhashable_key", (text + "? [1, 2]\n: 3\n").encode()
    yield "deep_nesting_100k", b"pe: " + b"[" * 100_000 + b"]" * 100_000 + b"\n"
    yield "deep_mapping", b"pe: " + b"{a: " * 5000 + b"1" + b"}" * 5000 + b"\n"
    deep = "".join(" " * (i + 1) + f"k{i}:\n" for i in range(1400))
    yield "deep_block_mapping", ("pe:\n" + deep + " " * 1401 + "1\n").encode()
    yield "brackets_in_strings", text.replace("ring", '"' + "[" * 40 + '"', 1).encode()
    merge = ["m0: &m0 {x: 1}"] + [
        f"m{n}: &m{n} {{<<: [" + ", ".join([f"*m{n - 1}"] * 9) + "]}" for n in range(1, 9)
    ]
    yield "merge_key_bomb", (text + "\n".join(merge) + "\n").encode()
    yield (
        "merge_tag_bomb",
        (text + "\n".join(merge).replace("{<<:", "{? !!merge '<<' :") + "\n").encode(),
    )
    yield "bomb_top", (text + "bomb: " + _bomb() + "\n").encode()
    yield "huge_file", (text + "#" + "x" * (3 << 20) + "\n").encode()
    yield "many_docs", (text + "---\n" + text).encode()
    yield "doc_end_only", b"...\n"
    yield "merge_key", (text.replace("dma:\n  engines: 4", "dma:\n  <<: {engines: 4}", 1).encode())
    yield (
        "anchor_reuse",
        text.replace("  engines: 4", "  engines: &e 4", 1)
        .replace("  setup_ns: 32", "  setup_ns: *e", 1)
        .encode(),
    )
    yield "undefined_alias", text.replace("  engines: 4", "  engines: *nope", 1).encode()
    for cut in range(1, len(lines), 2):
        yield f"truncated_after_line_{cut}", ("\n".join(lines[:cut]) + "\n").encode()
    for frac in (0.13, 0.37, 0.61, 0.89):
        yield f"truncated_mid_byte_{frac}", text.encode()[: int(len(text) * frac)]


def encoding_mutants() -> Iterator[tuple[str, bytes]]:
    """The right content in the wrong encoding, and plain binary junk."""
    text = BASE_TEXT
    accented = text.replace("# bf16 operands", "# bf16 operands, caf\u00e9 na\u00efve \u00b5s")
    yield "utf8_bom", b"\xef\xbb\xbf" + text.encode()
    yield "crlf", text.replace("\n", "\r\n").encode()
    yield "utf16", text.encode("utf-16")
    yield "utf16_le_no_bom", text.encode("utf-16-le")
    yield "utf16_be_no_bom", text.encode("utf-16-be")
    yield "utf32", text.encode("utf-32")
    yield "latin1", accented.encode("latin-1")
    yield "cp1252", accented.encode("cp1252")
    yield "utf8_accented_ok", accented.encode()
    yield "nul_byte", text.encode().replace(b"tile_m", b"tile\x00m", 1)
    yield "invalid_utf8_value", text.encode().replace(b"ring", b"r\xffing", 1)
    yield "lone_surrogate_escape", text.encode().replace(b"ring", b'"\\udc80"', 1)
    yield "control_chars", text.encode().replace(b"ring", b"r\x07\x1bing", 1)
    yield "gzip_magic", b"\x1f\x8b\x08\x00" + bytes(range(256))
    yield "png_magic", b"\x89PNG\r\n\x1a\n" + bytes(64)
    yield "elf_magic", b"\x7fELF\x02\x01\x01" + bytes(200)
    rng = random.Random(13)
    for n in range(12):
        yield f"random_bytes_{n}", bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4096)))
    for n in range(8):
        raw = bytearray(text.encode())
        for _ in range(8):
            raw[rng.randrange(len(raw))] = rng.randrange(256)
        yield f"bit_rot_{n}", bytes(raw)


def catalogue() -> list[tuple[str, bytes]]:
    """Every mutant, in a fixed order, ids unique."""
    out = [*value_mutants(), *structure_mutants(), *encoding_mutants()]
    ids = [i for i, _ in out]
    assert len(ids) == len(set(ids)), "mutant ids must be unique"
    return out
