"""A GEMM's shape and its padded tile plan (the (mi, ni, ki) grid of tile-ops).

The tile plan walks (mi, ni, ki) output-stationary with ki innermost; partial tiles are
padded, so every tile-op moves and computes a full ``m x k x n`` tile.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Literal

import numpy as np
import numpy.typing as npt

from sim.errors import InputError
from sim.limits import shape_dims, whole_number
from sim.topology import Topology

__all__ = ["VARIANTS", "GemmShape", "ShapeError", "SramCapacityError", "TilePlan", "Variant"]

Variant = Literal["load_ref", "double_buffer", "prefetch", "resident"]
VARIANTS: tuple[Variant, ...] = ("load_ref", "double_buffer", "prefetch", "resident")


class ShapeError(InputError):
    """An impossible GEMM shape or variant."""


class SramCapacityError(InputError):
    """A variant's buffers do not fit in SRAM."""


@dataclass(frozen=True)
class GemmShape:
    M: int
    K: int
    N: int

    def __post_init__(self) -> None:
        for name in ("M", "K", "N"):  # numpy integers become ints; bools, floats are refused
            dim = whole_number(
                getattr(self, name), f"GEMM dimension {name}", minimum=1, error=ShapeError
            )
            object.__setattr__(self, name, dim)

    @classmethod
    def parse(cls, text: str) -> GemmShape:
        """``"512x512x512"`` (M x K x N) -> GemmShape."""
        return cls(*shape_dims(text, ShapeError))

    def __str__(self) -> str:
        return f"{self.M}x{self.K}x{self.N}"

    @property
    def macs(self) -> int:
        return self.M * self.K * self.N


@dataclass(frozen=True)
class TilePlan:
    """The padded tile grid of one shape on one topology."""

    shape: GemmShape
    m: int
    k: int
    n: int
    bpe: int

    @classmethod
    def of(cls, shape: GemmShape, topo: Topology) -> TilePlan:
        return cls(shape, topo.pe.tile_m, topo.pe.tile_k, topo.pe.tile_n, topo.bpe)

    @cached_property
    def Mt(self) -> int:
        return -(-self.shape.M // self.m)

    @cached_property
    def Kt(self) -> int:
        return -(-self.shape.K // self.k)

    @cached_property
    def Nt(self) -> int:
        return -(-self.shape.N // self.n)

    @cached_property
    def tile_ops(self) -> int:
        return self.Mt * self.Nt * self.Kt

    @cached_property
    def out_tiles(self) -> int:
        return self.Mt * self.Nt

    @cached_property
    def a_bytes(self) -> int:
        return self.m * self.k * self.bpe

    @cached_property
    def b_bytes(self) -> int:
        return self.k * self.n * self.bpe

    @cached_property
    def c_bytes(self) -> int:
        return self.m * self.n * self.bpe

    @cached_property
    def padded_macs(self) -> int:
        return self.tile_ops * self.m * self.k * self.n

    @property
    def under_tile(self) -> bool:
        s = self.shape
        return s.M < self.m or s.K < self.k or s.N < self.n

    def coords(self, i: npt.NDArray[np.int64]) -> tuple[npt.NDArray[np.int64], ...]:
        """(mi, ni, ki) of tile-op indices ``i`` (ki innermost, then ni, then mi)."""
        return i // (self.Nt * self.Kt), (i // self.Kt) % self.Nt, i % self.Kt
