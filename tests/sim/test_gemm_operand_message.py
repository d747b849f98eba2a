"""A wrong GEMM says which operand's tiles were wrong and how busy the HBM channels were."""

from __future__ import annotations

import numpy as np
import pytest

import sim.gemm.datacheck as dc
from sim import GemmShape, run_gemm
from sim.topology import load_topology

SHAPE = GemmShape(128, 256, 64)  # 4 x 4 x 2 tiles


def _run() -> object:
    return run_gemm(SHAPE, "double_buffer", load_topology("npu-1h"))


def test_a_corrupted_b_tile_is_named_as_b(monkeypatch: pytest.MonkeyPatch) -> None:
    original = dc._tiles_in

    def one_b_tile_wrong(prog, a, b):  # type: ignore[no-untyped-def]
        b = b.copy()
        b[64, 32] += 1  # B tile (ki=1, ni=1)
        return original(prog, a, b)

    monkeypatch.setattr(dc, "_tiles_in", one_b_tile_wrong)
    with pytest.raises(dc.DataCheckError) as err:
        dc.check_gemm_data(_run())  # type: ignore[arg-type]
    msg = str(err.value)
    assert "B (ki, ni) tiles wrong at the PE: 1 of 8: (1, 1)" in msg, msg
    assert "A (mi, ki)" not in msg
    assert "busiest HBM pseudo-channel" in msg and "x the mean" in msg


def test_right_operands_and_a_wrong_sum_blame_the_c_accumulators(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    original = dc._Replay.mac

    def off_by_one(self, op_id, a):  # type: ignore[no-untyped-def]
        original(self, op_id, a)
        if self.ops[op_id].tile == 0:  # output tile (0, 0)'s first tile-op
            self.bytes_of(a.writes[0]).view(self.dtype)[0] += 1

    monkeypatch.setattr(dc._Replay, "mac", off_by_one)
    with pytest.raises(dc.DataCheckError) as err:
        dc.check_gemm_data(_run())  # type: ignore[arg-type]
    msg = str(err.value)
    assert "the C accumulators are wrong" in msg and "1 of 8 output tiles (mi, ni): (0, 0)" in msg
    assert "tiles wrong at the PE" not in msg


def test_the_channel_balance_counts_every_burst() -> None:
    run = _run()
    prog = run.program  # type: ignore[attr-defined]
    ops: list = []
    acc: list = []
    for blk in range(prog.num_blocks):
        prog.build_block(blk, ops, acc)
    rep = dc._Replay(run, ops, acc)  # type: ignore[arg-type]
    text = dc._channel_balance(rep)
    total = sum(n for op in ops for _, n in op.chans)
    burst = prog.topo.hbm.burst_bytes
    assert total == sum(-(-op.nbytes // burst) for op in ops if op.chans)
    mean_ns = total * prog.topo.hbm.burst_ps / prog.topo.hbm.num_pcs / 1000
    assert f"({mean_ns:g} ns over {prog.topo.hbm.num_pcs} channels)" in text
    assert np.isfinite(mean_ns)
