"""Issue 26, class 1: races that main's gate passed now fail it, the ops named.

Both bugs were run on main's gate (``run_gate(bug, "tp_layer")``, all 48 gated configs): it
passed them (48 passed), since the hidden-128 replay is comm-bound (the GEMM always ends
first) and the chips are symmetric. Here each fails the gate through the dependency check
(``sim.tp.depcheck``, every run) and, where the timing lets it show, the compute-bound
replay of ``RACE_SWEEP`` (hidden 256, 512 tokens, TP 4).
"""

from __future__ import annotations

from pathlib import Path

from harness import run_gate

GEMM_AR = ("-k", "mlp-h128-t128-p4-ring-gemm_ar or mlp-h256-t512-p4-ring-gemm_ar")
AG_RS = ("-k", "mlp-h128-t128-p4-ring-ag_rs or mlp-h256-t512-p4-ring-ag_rs")


def test_the_selections_pass_with_nothing_planted(tmp_path: Path) -> None:
    clean = run_gate(None, "tp_layer", "-k", f"{GEMM_AR[1]} or {AG_RS[1]}", tmp_path=tmp_path)
    assert clean.returncode == 0, clean.stdout[-3000:]


def test_a_gemm_ar_chunk_gated_on_the_neighbours_gemm_fails_naming_both_ops(
    tmp_path: Path,
) -> None:
    result = run_gate("tp-gemm-ar-gated-on-neighbour", "tp_layer", *GEMM_AR, tmp_path=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    out = result.stdout
    # every run fails: the hidden-128 config too, where the data comes out right
    assert out.count("does not depend on gemm2 op") >= 2, out[-3000:]
    assert "race: send op" in out and "on chip 0" in out


def test_an_ag_rs_half_waiting_on_the_other_halfs_gemm_fails_naming_both_ops(
    tmp_path: Path,
) -> None:
    result = run_gate("tp-ag-rs-second-half-waits-first", "tp_layer", *AG_RS, tmp_path=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    out = result.stdout
    assert "race: reduce op" in out and "does not depend on gemm2 op" in out, out[-3000:]
    # the compute-bound replay shows the wrong data as well
    assert "#wrong = " in out, out[-3000:]


CCL = ("-k", "reduce_scatter-switch-p8-ring-1MiB or switch-p8-ring-16MiB")


def test_a_ccl_send_forwarding_before_the_reduction_fails_naming_both_ops(tmp_path: Path) -> None:
    """The data of both configs comes out right (the reduction ends one burst after the
    arrival, long before the send's last byte leaves), so the replay passes them; the
    dependency check of every ccl run names the send and the reduction it skipped."""
    clean = run_gate(None, "ccl", *CCL, tmp_path=tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout[-3000:]
    result = run_gate("ccl-send-reads-before-the-reduction", "ccl", *CCL, tmp_path=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    out = result.stdout
    # each config's own failure names the send (the short summary may repeat it, or not,
    # with the terminal's width)
    named = (
        "functional check failed: dependency check: race: transfer op 128 (chip 0 -> chip 1, step 1"
    )
    for config in ("reduce_scatter-switch-p8-ring-1MiB", "switch-p8-ring-16MiB"):
        assert f"ccl[{config}]: {named}" in out, out[-3000:]
    assert "does not depend on reduction op 71 on chip 0 (step 0" in out, out[-3000:]
    assert "#wrong" not in out, out[-3000:]


SYMMETRIC = ("-k", "ring-p8-ring-16MiB or all_gather-ring-p8-ring-1MiB")


def test_a_race_in_the_ring_fast_paths_quotient_fails_naming_chip_0s_ops(tmp_path: Path) -> None:
    """Both configs run the symmetric fast path (chip 0's quotient program); its replay
    passes them, the quotient's dependency check (paths counting their turns) does not."""
    result = run_gate("ccl-ring-quotient-rings-mixed-up", "ccl", *SYMMETRIC, tmp_path=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    out = result.stdout
    named = (
        "functional check failed: dependency check: race: transfer op 17 "
        "(chip 0 -> chip 0's predecessor, step 1"
    )
    for config in ("ring-p8-ring-16MiB", "all_gather-ring-p8-ring-1MiB"):
        assert f"ccl[{config}]: {named}" in out, out[-3000:]
    assert "does not depend on reduction op 9 on chip 0" in out, out[-3000:]
    assert "does not depend on copy op 9 on chip 0" in out, out[-3000:]
    assert "#wrong" not in out, out[-3000:]


GEMM = ("-k", "128x128x128-double_buffer-systolic or 512x4096x32-resident-systolic")


def test_a_gemm_a_load_that_does_not_wait_for_its_buffers_reader_fails_naming_a(
    tmp_path: Path,
) -> None:
    """The compute-bound double_buffer config (the PE the bottleneck, the loads ahead) replays
    its data and fails with a WAR hazard naming A's buffer; resident loads no tiles."""
    clean = run_gate(None, "gemm", *GEMM, tmp_path=tmp_path / "clean")
    assert clean.returncode == 0, clean.stdout[-3000:]
    result = run_gate("gemm-a-load-ignores-its-buffers-reader", "gemm", *GEMM, tmp_path=tmp_path)
    assert result.returncode == 1, result.stdout[-3000:]
    out = result.stdout
    assert "1 failed" in out and "128x128x128-double_buffer-systolic" in out, out[-3000:]
    assert "data check: WAR hazard" in out and "(A buffer 0)" in out, out[-3000:]
