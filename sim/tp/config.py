"""A tensor-parallel layer's config: layer, mode, granularity, and each chip's GEMM shards."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from sim.errors import InputError
from sim.gemm.shape import GemmShape

__all__ = ["GRANULARITIES", "LAYERS", "MODES", "LayerConfig", "LayerError", "gemm_shapes"]

Mode = Literal["serial", "gemm_ar", "ag_rs"]
MODES: tuple[Mode, ...] = ("serial", "gemm_ar", "ag_rs")
LAYERS = ("mlp", "attn")
GRANULARITIES = ("coarse", "tile")


class LayerError(InputError):
    """A layer config that cannot be built; the message says what to change."""


@dataclass(frozen=True)
class LayerConfig:
    """One tensor-parallel layer run: shapes, mode and how the GEMMs are simulated."""

    layer: str
    tokens: int
    hidden: int
    mode: str
    chunks: int = 4
    variant: str = "resident"
    granularity: str = "coarse"

    def __post_init__(self) -> None:
        for name, allowed in (
            ("layer", LAYERS),
            ("mode", MODES),
            ("granularity", GRANULARITIES),
        ):
            if getattr(self, name) not in allowed:
                raise LayerError(
                    f"unknown {name} {getattr(self, name)!r}; use one of {', '.join(allowed)}"
                )
        for name in ("tokens", "hidden", "chunks"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise LayerError(f"{name} must be an integer >= 1, got {v!r}")


def gemm_shapes(cfg: LayerConfig, p: int) -> list[tuple[str, GemmShape]]:
    """Each chip's GEMM shards, in order: (stage, shape)."""
    t, h = cfg.tokens, cfg.hidden
    for what, n in (("4 x hidden", 4 * h), ("hidden", h)):
        if n % p:
            raise LayerError(f"{what} = {n} is not divisible by the TP degree {p}")
    if cfg.mode == "ag_rs" and t % (2 * p):
        raise LayerError(
            f"ag_rs splits the {t} tokens into 2 x {p} half blocks; use tokens divisible by {2 * p}"
        )
    if cfg.mode != "ag_rs" and t % cfg.chunks:
        raise LayerError(f"tokens = {t} is not divisible by chunks = {cfg.chunks}")
    if cfg.layer == "mlp":
        return [("gemm1", GemmShape(t, h, 4 * h // p)), ("gemm2", GemmShape(t, 4 * h // p, h))]
    return [("gemm2", GemmShape(t, h // p, h))]
