"""SCALE-Sim's own files: a ``.cfg`` and a topology CSV, read as SCALE-Sim reads them (ADR 0019).

Both are read through :func:`sim.inputfile.read_text` (a regular file, under its size limit,
UTF-8); the cfg without ``%(x)s`` interpolation (SCALE-Sim's files use none); the topology's
layer count (a depth-wise row makes one layer per channel) is checked against the budgets
(:func:`sim.limits.check_systolic_layers`) before any layer is built. A bad value raises
:class:`sim.systolic.ScaleSimInputError` naming the file, the line and the column or key.
"""

from __future__ import annotations

import configparser
import csv
import io
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from sim.inputfile import read_text
from sim.limits import MAX_SCALESIM_CFG_BYTES, MAX_SCALESIM_TOPOLOGY_BYTES, check_systolic_layers
from sim.systolic import DATAFLOWS, ArrayConfig, ScaleSimInputError, SramSizes, SystolicLayer

__all__ = [
    "CONV_COLUMNS",
    "GEMM_COLUMNS",
    "ScaleSimConfig",
    "read_scalesim_config",
    "read_scalesim_topology",
]

GEMM_COLUMNS = ("Layer", "M", "N", "K")
CONV_COLUMNS = (
    "Layer name",
    "IFMAP Height",
    "IFMAP Width",
    "Filter Height",
    "Filter Width",
    "Channels",
    "Num Filter",
    "Strides",
)


@dataclass(frozen=True)
class ScaleSimConfig:
    """What this model reads from a SCALE-Sim ``.cfg`` file."""

    path: str
    run_name: str
    array: ArrayConfig
    bandwidth_mode: str
    sram: SramSizes | None = None  # None if the cfg does not give all three sizes

    @property
    def notes(self) -> list[str]:
        """What is modelled and what is not, for this cfg; printed with every run."""
        out = [
            "modelled: stall-free compute cycles, utilisation, mapping efficiency, SRAM "
            "accesses (SCALE-Sim's InterfaceBandwidth: CALC)",
            "not modelled: 'Total Cycles (incl. prefetch)' (left blank), and DRAM accesses "
            "except where they follow from sizes (sim.systolic.dram_accesses)",
        ]
        if self.bandwidth_mode == "USER":
            out.append(
                f"{self.path}: InterfaceBandwidth is USER: memory stalls at the given "
                "bandwidth are NOT modelled; the cycles below are stall-free (Stall Cycles 0), "
                "a lower bound on SCALE-Sim's USER-mode total"
            )
        return out


def _cfg_value(conf: configparser.ConfigParser, path: str, section: str, key: str) -> str:
    if not conf.has_option(section, key):
        raise ScaleSimInputError(
            f"{path}: [{section}] has no '{key}'; add it as in SCALE-Sim's configs/scale.cfg"
        )
    return conf.get(section, key).strip()


def _positive_int(raw: str) -> int | None:
    """``raw`` as an integer >= 1, or None if it is not one."""
    try:
        value = int(raw)
    except ValueError:
        return None
    return value if value >= 1 else None


def _cfg_int(conf: configparser.ConfigParser, path: str, section: str, key: str) -> int:
    raw = _cfg_value(conf, path, section, key)
    value = _positive_int(raw)
    if value is None:
        raise ScaleSimInputError(
            f"{path}: [{section}] {key} = {raw!r} is not an integer >= 1; write e.g. 32"
        )
    return value


def read_scalesim_config(path: str | Path) -> ScaleSimConfig:
    """Read and validate a SCALE-Sim ``.cfg`` (the keys this model uses, and sparsity off)."""
    p = str(path)
    text = read_text(
        p, what="SCALE-Sim cfg", limit=MAX_SCALESIM_CFG_BYTES, error=ScaleSimInputError
    )
    conf = configparser.ConfigParser(interpolation=None)  # SCALE-Sim's files use no %(x)s
    try:
        conf.read_string(text, source=p)
    except configparser.Error as exc:
        msg = str(exc).splitlines()[0]
        raise ScaleSimInputError(f"{p}: not a valid cfg file ({msg}); fix its syntax") from None
    arch = "architecture_presets"
    dataflow = _cfg_value(conf, p, arch, "Dataflow").lower()
    if dataflow not in DATAFLOWS:
        raise ScaleSimInputError(
            f"{p}: [{arch}] Dataflow = {dataflow!r} is not one of {', '.join(DATAFLOWS)}"
        )
    array = ArrayConfig(
        _cfg_int(conf, p, arch, "ArrayHeight"), _cfg_int(conf, p, arch, "ArrayWidth"), dataflow
    )
    mode = _cfg_value(conf, p, "run_presets", "InterfaceBandwidth").upper()
    if mode not in ("CALC", "USER"):
        raise ScaleSimInputError(
            f"{p}: [run_presets] InterfaceBandwidth = {mode!r} is not CALC or USER; use CALC"
        )
    if conf.has_option("sparsity", "SparsitySupport"):
        _check_dense(p, conf.get("sparsity", "SparsitySupport").strip())
    run_name = conf.get("general", "run_name", fallback="scale_run").strip()
    keys = ("IfmapSramSzkB", "FilterSramSzkB", "OfmapSramSzkB")
    sram = None
    if all(conf.has_option(arch, key) for key in keys):
        sram = SramSizes(*(_cfg_int(conf, p, arch, key) for key in keys))
    return ScaleSimConfig(p, run_name, array, mode, sram)


def _check_dense(path: str, raw: str) -> None:
    """SCALE-Sim (scale_config.py) runs sparse only for ``SparsitySupport`` = ``true`` in any
    case, and dense for any other text; so 'false' (any case) is dense, 'true' is refused as
    not modelled, and anything else ('yes', '1', 'on') is refused: SCALE-Sim would read it
    as dense, which is not what its writer meant."""
    if raw.lower() == "false":
        return
    if raw.lower() == "true":
        raise ScaleSimInputError(
            f"{path}: [sparsity] SparsitySupport = {raw} is not modelled (sim.systolic is dense "
            "only); set it to false"
        )
    raise ScaleSimInputError(
        f"{path}: [sparsity] SparsitySupport = {raw!r} must be true or false; SCALE-Sim reads "
        "only 'true' as on and would run anything else dense. Write false (sparsity is not "
        "modelled here)"
    )


def _fields(line: str, path: str = "", lineno: int = 0) -> list[str]:
    """A CSV line's fields, stripped; SCALE-Sim's trailing comma (an empty last field) dropped."""
    try:
        fields = [x.strip() for x in next(csv.reader(io.StringIO(line)), [])]
    except csv.Error as exc:
        raise ScaleSimInputError(f"{path}:{lineno}: not a CSV row ({exc}); fix the row") from None
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def _row_ints(path: str, lineno: int, fields: list[str], names: Sequence[str]) -> list[int]:
    if len(fields) < len(names):
        raise ScaleSimInputError(
            f"{path}:{lineno}: {len(fields)} fields, expected {len(names)} "
            f"({', '.join(names)}); complete the row"
        )
    extra = fields[len(names) :]
    if extra and extra != ["1:1"]:
        raise ScaleSimInputError(
            f"{path}:{lineno}: column {len(names) + 1}: {extra[0]!r}: only dense layers "
            f"(sparsity 1:1) are modelled; remove the extra field(s)"
        )
    values = []
    for col, (raw, name) in enumerate(zip(fields[1 : len(names)], names[1:], strict=True), start=2):
        value = _positive_int(raw)
        if value is None:
            raise ScaleSimInputError(
                f"{path}:{lineno}: column {col} ({name}): {raw!r} is not an integer >= 1; "
                "write a whole number such as 64"
            )
        values.append(value)
    return values


def _conv_layers(path: str, lineno: int, name: str, v: list[int]) -> list[SystolicLayer]:
    ih, iw, fh, fw, ch, nf, st = v
    for col, (f, i, what) in enumerate(((fh, ih, "Height"), (fw, iw, "Width")), start=4):
        if f > i:
            raise ScaleSimInputError(
                f"{path}:{lineno}: column {col} (Filter {what}): {f} is larger than the "
                f"IFMAP {what.lower()} {i}; a filter must fit the input"
            )
    if "DP" in name:  # SCALE-Sim: a depth-wise layer is one single-channel layer per channel
        return [
            SystolicLayer.conv(f"{name}Channel_{c}", ih, iw, fh, fw, 1, nf, st) for c in range(ch)
        ]
    return [SystolicLayer.conv(name, ih, iw, fh, fw, ch, nf, st)]


def read_scalesim_topology(path: str | Path) -> list[SystolicLayer]:
    """Read and validate a SCALE-Sim topology CSV, GEMM (``Layer,M,N,K,``) or convolution.

    The kind is told by the header (4 columns: GEMM, 8: convolution); SCALE-Sim's own
    ``-i gemm`` flag is not needed. A bad row raises with file, line and column.
    """
    p = str(path)
    text = read_text(
        p, what="SCALE-Sim topology", limit=MAX_SCALESIM_TOPOLOGY_BYTES, error=ScaleSimInputError
    )
    lines = text.splitlines()
    if not lines:
        raise ScaleSimInputError(f"{p}:1: the file is empty; give a header and one row per layer")
    check_systolic_layers(len(lines) - 1, f"{p}: {len(lines) - 1} rows")
    header = _fields(lines[0], p, 1)
    if len(header) == len(GEMM_COLUMNS):
        names: Sequence[str] = GEMM_COLUMNS
    elif len(header) == len(CONV_COLUMNS):
        names = CONV_COLUMNS
    else:
        raise ScaleSimInputError(
            f"{p}:1: header has {len(header)} columns; expected 4 ({','.join(GEMM_COLUMNS)}) "
            f"or 8 ({','.join(CONV_COLUMNS)})"
        )
    rows: list[tuple[int, str, list[int]]] = []
    count = 0  # layers the rows make: a depth-wise row makes one per channel
    for lineno, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        fields = _fields(line, p, lineno)
        if not fields or not fields[0]:
            raise ScaleSimInputError(
                f"{p}:{lineno}: column 1 ({names[0]}): empty; give the layer a name"
            )
        values = _row_ints(p, lineno, fields, names)
        made = values[4] if names is CONV_COLUMNS and "DP" in fields[0] else 1
        count += made
        if made > 1:
            check_systolic_layers(
                count, f"{p}:{lineno}: depth-wise {fields[0]!r} of {made} channels"
            )
        rows.append((lineno, fields[0], values))
    check_systolic_layers(count, f"{p}: {count} layers")
    layers: list[SystolicLayer] = []
    for lineno, name, values in rows:
        if names is GEMM_COLUMNS:
            layers.append(SystolicLayer.gemm(name, *values))
        else:
            layers.extend(_conv_layers(p, lineno, name, values))
    if not layers:
        raise ScaleSimInputError(f"{p}: no layers after the header; add one row per layer")
    return layers
