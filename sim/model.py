"""The collectives' alpha-beta-gamma models (``sim.collective_model``, re-exported here).

The GEMM's analytic model is ``sim.gemm.model``.
"""

from __future__ import annotations

from sim.collective_model import lower_bounds_ps, textbook_ps
from sim.collective_model import model as collective_model

__all__ = ["collective_model", "lower_bounds_ps", "textbook_ps"]
