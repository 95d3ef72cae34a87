import json
import os
import subprocess
import sys

import pytest

from webapp import ROOT
from webapp.blas import blas_in_maps, find_blis, find_openblas

pytestmark = pytest.mark.slow


def test_bundled_choice_and_missing_library_mean_no_preload(tmp_path):
    assert find_openblas("bundled") is None
    assert find_openblas(str(tmp_path / "libnothing.so")) is None


def test_other_packages_own_openblas_is_not_named_as_mlxs():
    """numpy and scipy map OpenBLAS copies with renamed symbols, which MLX cannot bind to."""
    line = "7f1c2a000000-7f1c2a100000 r-xp 00000000 08:01 42 {}"
    bundled = line.format("/venv/site-packages/mlx_cpu.libs/libblas-bd8a282c.so.3.10.0")
    vendored = [line.format("/venv/site-packages/scipy.libs/libscipy_openblas-5f890258.so"),
                line.format("/venv/site-packages/numpy.libs/libscipy_openblas64_-ff651d7f.so"),
                line.format("/venv/site-packages/numpy.libs/libopenblas64_p-r0-0cf96a72.3.23.dev.so")]
    system = line.format("/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so")
    assert blas_in_maps("\n".join([bundled, *vendored])).startswith("the mlx wheel's bundled reference BLAS (/venv")
    assert blas_in_maps("\n".join([bundled, *vendored, system])) == (
        "OpenBLAS (/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblasp-r0.3.21.so)")


def test_cublas_and_extensions_named_blas_are_not_taken_for_a_blas():
    line = "7f1c2a000000-7f1c2a100000 r-xp 00000000 08:01 42 {}"
    maps = "\n".join(line.format(path) for path in (
        "/venv/site-packages/nvidia/cu13/lib/libcublas.so.13", "/venv/site-packages/nvidia/cu13/lib/libcublasLt.so.13",
        "/venv/site-packages/scipy/linalg/_fblas.cpython-312-x86_64-linux-gnu.so",
        "/venv/site-packages/sklearn/utils/_cython_blas.cpython-312-x86_64-linux-gnu.so",
        "/venv/site-packages/mlx_cuda_13.libs/libblas-bd8a282c.so.3.10.0"))
    assert blas_in_maps(maps) == (
        "the mlx wheel's bundled reference BLAS (/venv/site-packages/mlx_cuda_13.libs/libblas-bd8a282c.so.3.10.0)")


def greedy(model, preload: str | None) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
    if preload:
        env["LD_PRELOAD"] = preload
    out = subprocess.run([sys.executable, "-m", "benchmarks.greedy", str(model), "--tokens", "48"],
                         cwd=ROOT, env=env, capture_output=True, text=True, check=True, timeout=120).stdout
    return json.loads(out.strip().splitlines()[-1])


@pytest.mark.skipif(find_openblas("auto") is None, reason="no system OpenBLAS")
def test_openblas_gives_identical_greedy_output(tiny_model):
    fast, bundled = greedy(tiny_model, find_openblas("auto")), greedy(tiny_model, None)
    assert fast["blas"].startswith("OpenBLAS") and not bundled["blas"].startswith("OpenBLAS")
    assert fast["tokens"] == bundled["tokens"] and len(fast["tokens"]) == 48


@pytest.mark.skipif(find_blis() is None, reason="no system BLIS")
def test_blis_gives_identical_greedy_output_and_is_named(tiny_model):
    blis, bundled = greedy(tiny_model, find_blis()), greedy(tiny_model, None)
    assert blis["blas"].startswith("BLIS (") and "1 thread(s)" in blis["blas"]
    assert blis["tokens"] == bundled["tokens"] and len(blis["tokens"]) == 48


@pytest.mark.skipif(find_openblas("auto") is None, reason="no system OpenBLAS")
def test_cli_logs_its_blas_and_can_turn_it_off(start_server, tiny_model, monkeypatch):
    # Started as a user starts it, not with the BLAS make test preloads for the tests' own process.
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.delenv("SPECCHAT_BLAS", raising=False)
    default = start_server("--model", str(tiny_model))
    default.wait_ready()
    assert any("BLAS: OpenBLAS" in line for line in default.lines)
    bundled = start_server("--model", str(tiny_model), "--blas", "bundled")
    bundled.wait_ready()
    assert any("BLAS: the mlx wheel's bundled" in line for line in bundled.lines)
