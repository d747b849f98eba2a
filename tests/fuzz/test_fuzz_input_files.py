"""Input files as a hostile user writes them (issue 22): pipes, devices, huge or binary files,
duplicate keys, interpolation bombs and giant layers. Each is refused at once with one project
error naming the file (and line), or computed within a second or two; none hangs.

The cases that hung before their fix run in-process under a ``SIGALRM`` limit (a blocked
``open()`` of a FIFO is interrupted by it) or in a subprocess with a timeout.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from fuzz_guard import run_case
from topology_mutants import BASE_TEXT

from sim import NpuSimError, TopologyError, load_topology
from sim.scalesim_files import read_scalesim_config, read_scalesim_topology
from sim.systolic import (
    ScaleSimInputError,
    simulate_layers,
)

REPO = Path(__file__).resolve().parents[2]
DATA = REPO / "tests" / "data" / "scalesim"
CFG = DATA / "scale.cfg"
GEMM_HEADER = "Layer,M,N,K,\n"
CONV_HEADER = (
    "Layer name, IFMAP Height, IFMAP Width, Filter Height, Filter Width, Channels, "
    "Num Filter, Strides,\n"
)
FAST = 5.0  # seconds: "at once" for a refusal, "a second or two" for a computation, with slack


@pytest.fixture
def fifo(tmp_path: Path) -> Iterator[Path]:
    path = tmp_path / "pipe.yaml"
    os.mkfifo(path)
    yield path


def _limited_memory() -> None:  # pragma: no cover - runs in the child
    """The child may not take the shared machine's memory if the fix is missing (/dev/zero)."""
    resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))


def _run(args: list[str], env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *args],
        cwd=REPO,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        preexec_fn=_limited_memory,
        check=False,
    )


# --- not a regular file ----------------------------------------------------------------------


def test_a_fifo_topology_is_refused_at_once(fifo: Path) -> None:
    out = run_case(lambda: load_topology(fifo), seconds=FAST)
    assert isinstance(out.error, TopologyError), out
    msg = str(out.error)
    assert str(fifo) in msg and "FIFO" in msg and "regular file" in msg, msg


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/null"])
def test_a_device_topology_is_refused_at_once(device: str) -> None:
    out = run_case(lambda: load_topology(device), seconds=FAST)
    assert isinstance(out.error, TopologyError), out
    assert device in str(out.error) and "device" in str(out.error), out.error


@pytest.mark.parametrize("which", ["cfg", "topology"])
def test_a_fifo_scalesim_file_is_refused_at_once(fifo: Path, which: str) -> None:
    read = read_scalesim_config if which == "cfg" else read_scalesim_topology
    out = run_case(lambda: read(fifo), seconds=FAST)
    assert isinstance(out.error, ScaleSimInputError), out
    assert str(fifo) in str(out.error) and "FIFO" in str(out.error), out.error


def test_cli_gemm_with_a_fifo_topology_is_a_usage_error(fifo: Path) -> None:
    """``python -m sim gemm --topology FIFO``: exit 2 at once, one message, no traceback."""
    proc = _run(["-m", "sim", "gemm", "64x64x64", "--topology", str(fifo)])
    assert proc.returncode == 2, proc.stderr
    assert "FIFO" in proc.stderr and str(fifo) in proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("flag", ["-c", "-t"])
def test_cli_scalesim_with_a_fifo_is_a_usage_error(fifo: Path, flag: str) -> None:
    files = {"-c": str(CFG), "-t": str(DATA / "gpt2.csv"), flag: str(fifo)}
    proc = _run(["-m", "sim", "scalesim", "-c", files["-c"], "-t", files["-t"], "-o", "/tmp"])
    assert proc.returncode == 2, proc.stderr
    assert "FIFO" in proc.stderr and "Traceback" not in proc.stderr


def test_cli_scalesim_dev_zero_is_refused_at_once() -> None:
    """``-t /dev/zero`` used to read without end (6.3 GB in 31 s)."""
    proc = _run(["-m", "sim", "scalesim", "-c", str(CFG), "-t", "/dev/zero", "-o", "/tmp"])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "/dev/zero" in proc.stderr and "device" in proc.stderr
    assert "Traceback" not in proc.stderr


# --- NPUBENCH_TOPOLOGY: one message naming the variable, the path and the fix ------------------


@pytest.mark.parametrize("kind", ["missing", "fifo", "typo"])
def test_a_bad_npubench_topology_is_one_message_without_a_traceback(
    tmp_path: Path, kind: str
) -> None:
    """``NPUBENCH_TOPOLOGY=... pytest --npubench gemm``: the variable, the path and the fix, once;
    not a traceback that starts at another bench module (benches/ccl.py)."""
    path = tmp_path / "topo.yaml"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "typo":
        path.write_text(BASE_TEXT.replace("  engines:", "  engnies:"))
    args = ["-m", "pytest", "-p", "no:cacheprovider", "-q", "--npubench", "gemm", "--co"]
    proc = _run(args, env={"NPUBENCH_TOPOLOGY": str(path)})
    text = proc.stdout + proc.stderr
    assert proc.returncode == 4, text[-3000:]
    assert "Traceback" not in text and 'File "' not in text, text[-3000:]
    assert "cannot import bench module benches/ccl.py" not in text, text[-3000:]
    assert text.count(f"NPUBENCH_TOPOLOGY={path}") == 1, text[-3000:]
    needle = {"missing": "no such topology file", "fifo": "FIFO", "typo": "'dma.engnies'"}[kind]
    assert text.count(needle) == 1, text[-3000:]
    assert "unset it" in text, text[-3000:]


# --- duplicate keys ---------------------------------------------------------------------------


def _line_of(text: str, needle: str, nth: int = 0) -> int:
    start = -1
    for _ in range(nth + 1):
        start = text.index(needle, start + 1)
    return text.count("\n", 0, start) + 1


@pytest.mark.parametrize(
    ("key", "edit"),
    [
        ("engines", lambda t: t.replace("  engines: 4", "  engines: 4\n  engines: 2")),
        ("dma", lambda t: t + "dma:\n  engines: 2\n  setup_ns: 32\n"),
        ("name", lambda t: t + "name: other\n"),
    ],
    ids=["second-engines", "second-dma-section", "second-name"],
)
def test_a_duplicate_key_is_an_error_naming_both_lines(
    tmp_path: Path, key: str, edit: object
) -> None:
    text = edit(BASE_TEXT)  # type: ignore[operator]
    path = tmp_path / "dup.yaml"
    path.write_text(text)
    first, second = _line_of(text, f"{key}:"), _line_of(text, f"{key}:", 1)
    if key == "name":  # the top-level key, not 'name' inside a comment
        first, second = _line_of(text, "\nname:") + 1, _line_of(text, "\nname:", 1) + 1
    with pytest.raises(TopologyError) as info:
        load_topology(path)
    msg = str(info.value)
    assert str(path) in msg and f"'{key}'" in msg, msg
    assert f"line {first}" in msg and f"line {second}" in msg, msg


def test_duplicate_keys_in_a_flow_mapping_are_refused_too(tmp_path: Path) -> None:
    path = tmp_path / "flow.yaml"
    flow = "dtype: {bytes_per_element: 2, bytes_per_element: 4}"
    path.write_text(BASE_TEXT.replace("dtype:\n  bytes_per_element: 2", flow))
    with pytest.raises(TopologyError, match=r"'bytes_per_element'.*twice"):
        load_topology(path)


# --- SCALE-Sim files: encodings, interpolation, sparsity ----------------------------------------


SPARSITY = "SparsitySupport : false"


def _cfg(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "x.cfg"
    path.write_text(text)
    return path


@pytest.mark.parametrize("which", ["cfg", "topology"])
@pytest.mark.parametrize("encoding", ["latin-1", "utf-16", "binary"])
def test_a_non_utf8_scalesim_file_is_one_error_naming_the_file(
    tmp_path: Path, which: str, encoding: str
) -> None:
    source = CFG if which == "cfg" else DATA / "gpt2.csv"
    text = source.read_text() + ("# café\n" if which == "cfg" else "café,1,2,3,\n")
    raw = os.urandom(4096) if encoding == "binary" else text.encode(encoding)
    path = tmp_path / f"bad.{which}"
    path.write_bytes(raw)
    read = read_scalesim_config if which == "cfg" else read_scalesim_topology
    out = run_case(lambda: read(path), seconds=FAST)
    assert isinstance(out.error, ScaleSimInputError), out
    msg = str(out.error)
    assert str(path) in msg and "UTF-8" in msg, msg
    if encoding == "latin-1":
        assert f"line {text.count(chr(10))}" in msg, msg  # the last line holds the é


def test_a_missing_interpolation_is_read_literally(tmp_path: Path) -> None:
    """SCALE-Sim's files need no interpolation: ``run_name = %(nope)s`` is the text itself."""
    cfg = _cfg(tmp_path, CFG.read_text().replace("run_name = ", "run_name = %(nope)s"))
    assert read_scalesim_config(cfg).run_name.startswith("%(nope)s")


def test_an_interpolation_bomb_is_not_expanded(tmp_path: Path) -> None:
    """Ten levels of ``%(x)s`` repeated ten times: 10**10 characters if expanded."""
    bomb = ["a0 = " + "x" * 10] + [f"a{i} = " + f"%(a{i - 1})s" * 10 for i in range(1, 11)]
    text = CFG.read_text().replace("run_name = ", "\n".join(bomb) + "\nrun_name = %(a10)s")
    cfg = _cfg(tmp_path, text)
    out = run_case(lambda: read_scalesim_config(cfg), seconds=FAST)
    assert out.error is None and out.value.run_name.startswith("%(a10)s")  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", ["scale.cfg", "edge_8x16.cfg"])
def test_real_cfgs_read_the_same_without_interpolation(name: str) -> None:
    """No real SCALE-Sim cfg uses '%': reading without interpolation changes nothing."""
    import configparser

    text = (DATA / name).read_text()
    plain = configparser.ConfigParser()
    plain.read_string(text)
    raw = configparser.ConfigParser(interpolation=None)
    raw.read_string(text)
    assert "%" not in text
    assert {s: dict(plain[s]) for s in plain} == {s: dict(raw[s]) for s in raw}
    cfg = read_scalesim_config(DATA / name)
    assert cfg.run_name == plain["general"]["run_name"]


@pytest.mark.parametrize("value", ["yes", "1", "on", "no", "0", "off", "enabled", ""])
def test_sparsity_support_other_than_true_or_false_is_a_clear_error(
    tmp_path: Path, value: str
) -> None:
    """SCALE-Sim reads only 'true' (any case) as on and anything else as off, so 'yes' would run
    as dense there too; here a value that is neither 'true' nor 'false' is refused."""
    cfg = _cfg(tmp_path, CFG.read_text().replace(SPARSITY, f"SparsitySupport : {value}"))
    with pytest.raises(ScaleSimInputError, match=r"SparsitySupport = .*true or false"):
        read_scalesim_config(cfg)


@pytest.mark.parametrize(
    ("value", "ok"),
    [("false", True), ("False", True), ("FALSE", True), ("true", False), ("True", False)],
)
def test_sparsity_support_true_is_refused_and_false_is_dense(
    tmp_path: Path, value: str, ok: bool
) -> None:
    cfg = _cfg(tmp_path, CFG.read_text().replace(SPARSITY, f"SparsitySupport : {value}"))
    if ok:
        assert read_scalesim_config(cfg).array.rows == 32
    else:
        with pytest.raises(ScaleSimInputError, match="not modelled"):
            read_scalesim_config(cfg)


# --- SCALE-Sim layers: giant dimensions, many channels, many rows -------------------------------


def _csv(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "net.csv"
    path.write_text(text)
    return path


def _simulate(path: Path) -> object:
    array = read_scalesim_config(CFG).array
    return simulate_layers(read_scalesim_topology(path), array)


def test_a_gemm_of_a_billion_in_each_dimension_is_computed_in_closed_form(tmp_path: Path) -> None:
    """It was a MemoryError after 525 MB (a list of ~10**15 folds); the mean is closed form."""
    path = _csv(tmp_path, GEMM_HEADER + "L1,1000000000,1000000000,1000000000,\n")
    out = run_case(lambda: _simulate(path), seconds=FAST)
    assert out.error is None, out.error
    (report,) = out.value  # type: ignore[misc]
    assert report.folds == (10**9 // 32) ** 2  # 10**9 = 31250000 * 32 rows, and as many cols
    assert 0 < report.mapping_efficiency_pct <= 100 and 0 < report.compute_util_pct <= 100


def test_a_convolution_of_a_billion_in_each_dimension_is_computed(tmp_path: Path) -> None:
    big = 10**9
    rows = [f"C1,{big},{big},3,3,{big},{big},1,", f"C2,{big},{big},3,3,{big},{big},5,"]
    path = _csv(tmp_path, CONV_HEADER + "\n".join(rows) + "\n")
    out = run_case(lambda: _simulate(path), seconds=FAST)
    assert out.error is None, out.error


def test_a_depthwise_row_of_a_million_channels_is_refused_before_building_layers(
    tmp_path: Path,
) -> None:
    path = _csv(tmp_path, CONV_HEADER + "DP1,8,8,3,3,1000000,1,1,\n")
    out = run_case(lambda: read_scalesim_topology(path), seconds=FAST)
    assert out.error is not None, "a million layer objects were built"
    msg = str(out.error)
    assert f"{path}:2" in msg and "1000000" in msg and "NPUBENCH_OPS_BUDGET" in msg, msg


def test_a_million_gemm_rows_are_refused_at_once(tmp_path: Path) -> None:
    path = _csv(tmp_path, GEMM_HEADER + "L,1,2,3,\n" * 10**6)
    out = run_case(lambda: read_scalesim_topology(path), seconds=FAST)
    assert isinstance(out.error, NpuSimError), "a million layers were read"
    assert str(path) in str(out.error)


def test_a_field_past_the_csv_field_limit_is_a_project_error(tmp_path: Path) -> None:
    path = _csv(tmp_path, GEMM_HEADER + '"' + "x" * 200_000 + '",1,2,3,\n')
    with pytest.raises(ScaleSimInputError, match=rf"{path}:2"):
        read_scalesim_topology(path)


def test_cli_scalesim_over_the_budget_is_a_usage_error(tmp_path: Path) -> None:
    """The budget refusal reaches the command line as one usage error, not a traceback."""
    path = _csv(tmp_path, CONV_HEADER + "DP1,8,8,3,3,1000000,1,1,\n")
    proc = _run(["-m", "sim", "scalesim", "-c", str(CFG), "-t", str(path), "-o", str(tmp_path)])
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "NPUBENCH_OPS_BUDGET" in proc.stderr and "Traceback" not in proc.stderr


def test_a_scalesim_file_over_its_size_limit_is_refused(tmp_path: Path) -> None:
    path = _csv(tmp_path, GEMM_HEADER + "L,1,2,3,\n" * 600_000)  # 5.4 MB
    with pytest.raises(ScaleSimInputError, match=rf"{path}: larger than 4096 KiB"):
        read_scalesim_topology(path)
