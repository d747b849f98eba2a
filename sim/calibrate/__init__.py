"""Calibration against measured nccl-tests / rccl-tests tables (docs/adr/0021 decision 5).

Modules, each with one job, each importing only modules before it: :mod:`~sim.calibrate.files`
(atomic writes), :mod:`~sim.calibrate.bands` (per-band geomean errors),
:mod:`~sim.calibrate.nccltests` (read and write nccl-tests tables),
:mod:`~sim.calibrate.yamlkeys` (dotted keys in a YAML text: find, edit, tag),
:mod:`~sim.calibrate.evaluate` (a table's sizes simulated on a topology text),
:mod:`~sim.calibrate.fit` (the bounded deterministic search), :mod:`~sim.calibrate.report`
(the calibrated YAML's header, the figure), :mod:`~sim.calibrate.cli`
(``python -m sim calibrate``). The user's guide: ``docs/calibrating.md``.
"""

from __future__ import annotations

from sim.calibrate.bands import BANDS, BandErrors, band_errors, geomean_error
from sim.calibrate.nccltests import (
    Measurement,
    Row,
    Table,
    format_table,
    parse_table,
    read_table,
    simulated_row,
)

__all__ = [
    "BANDS",
    "BandErrors",
    "Measurement",
    "Row",
    "Table",
    "band_errors",
    "format_table",
    "geomean_error",
    "parse_table",
    "read_table",
    "simulated_row",
]
