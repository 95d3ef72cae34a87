"""specchat's CUDA kernels compile, without a GPU: each source wrapped as MLX wraps it and compiled by NVIDIA's
runtime compiler for an H100/H200 (sm_90), in the configurations the engine and the benchmarks use, with no
warning and nothing spilled to local memory (a spill turns register traffic into memory traffic). Whether they
compute the right numbers is for their own tests on a CUDA GPU (tests/test_quantized_*.py, tests/test_recurrence.py,
tests/test_decode_loop.py)."""

import pytest

from engines.mlx.cuda import quantized_mma, quantized_skinny, recurrence, skinny
from tests.support import nvrtc

pytestmark = pytest.mark.skipif(not nvrtc.available(), reason="NVIDIA's runtime compiler is not installed")


def _compiles_cleanly(source: str, arch: str = "sm_90") -> nvrtc.Compiled:
    compiled = nvrtc.compile_for(source, arch)
    assert compiled.ok, compiled.log
    assert not compiled.warnings, compiled.log
    assert compiled.spilled_bytes == 0, compiled.log
    return compiled


QUANTIZED_INPUTS = {"x": "T", "wq": "uint32", "scales": "S", "biases": "S"}


def _quantized(dtype: str) -> dict[str, str]:
    return {name: {"T": dtype, "S": dtype}.get(kind, kind) for name, kind in QUANTIZED_INPUTS.items()}


SKINNY_QUANTIZED = ([(bits, rows, split, "bfloat16") for bits in (4, 8) for rows in (1, 2, 3, 4, 16)
                     for split in (1, quantized_skinny.MAX_K_SPLIT)]
                    + [(bits, rows, 1, "bfloat16") for bits in (2, 3, 5, 6) for rows in (1, 4, 16)]
                    + [(4, 4, 1, "float16"), (4, 4, 1, "float32")])


@pytest.mark.parametrize(("bits", "rows", "split", "dtype"), SKINNY_QUANTIZED)
def test_the_quantized_kernel_compiles(bits, rows, split, dtype):
    template = {"T": dtype, "S": dtype, "MR": quantized_skinny.row_bucket(rows),
                "NW": quantized_skinny.rows_per_warp(bits, rows, 12288, 4096), "BITS": bits,
                "E": quantized_skinny.lane_step(bits), "KS": split, "WARPS": quantized_skinny.WARPS,
                "PER_WEIGHT": int(quantized_skinny.per_weight(bits, rows))}
    _compiles_cleanly(nvrtc.wrap(quantized_skinny.SOURCE, _quantized(dtype), {"y": dtype}, template,
                                 quantized_skinny.HEADER))


TENSOR_CORES = ([(bits, dtype, group_size, rows, 1, quantized_mma.CODES_PER_ROUND) for bits in quantized_mma.BITS
                 for dtype in ("bfloat16", "float16") for group_size in quantized_mma.GROUP_SIZES for rows in (1, 16)]
                + [(bits, "bfloat16", 64, 4, quantized_mma.MAX_K_SPLIT, codes) for bits in quantized_mma.BITS
                   for codes in (256, 512, 1024)])


@pytest.mark.parametrize(("bits", "dtype", "group_size", "rows", "split", "codes"), TENSOR_CORES)
def test_the_tensor_core_kernel_compiles(bits, dtype, group_size, rows, split, codes):
    template = {"T": dtype, "S": dtype, "BF": dtype == "bfloat16", "MR": quantized_mma.row_bucket(rows),
                "BITS": bits, "GS": group_size, "KS": split, "WARPS": quantized_mma.WARPS,
                "LANES": quantized_mma.LANES, "CPR": codes}
    source = nvrtc.wrap(quantized_mma.SOURCE, _quantized(dtype), {"y": dtype}, template, quantized_mma.HEADER)
    compiled = _compiles_cleanly(source)
    # at most half of a thread's share of the register file, whatever the rows: 16 warps fit on a multiprocessor
    # (the CUDA-core kernel takes 72 registers for one row and 168 for four at 4 bits)
    if codes == quantized_mma.CODES_PER_ROUND:
        assert compiled.registers <= 128, compiled.log


def test_the_tensor_core_kernel_compiles_for_the_first_gpus_with_its_instruction():
    template = {"T": "bfloat16", "S": "bfloat16", "BF": 1, "MR": 8, "BITS": 4, "GS": 64, "KS": 1, "WARPS": 4,
                "LANES": 32, "CPR": 256}
    _compiles_cleanly(nvrtc.wrap(quantized_mma.SOURCE, _quantized("bfloat16"), {"y": "bfloat16"}, template,
                                 quantized_mma.HEADER), arch="sm_80")


@pytest.mark.parametrize("rows", range(2, 6))
def test_the_few_row_bfloat16_kernel_compiles(rows):
    template = {"M": rows, "K": 4096, "N": 12288, "NW": skinny.ROWS_PER_WARP}
    _compiles_cleanly(nvrtc.wrap(skinny.SOURCE, {"x": "bfloat16", "w": "bfloat16"}, {"y": "bfloat16"}, template))


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_recurrence_kernel_compiles(dtype):
    inputs = {name: dtype for name in ("q", "k", "v", "g", "beta")} | {"state_in": "float32"}
    outputs = {"y": dtype, "state_out": "float32", "states": "float32"}
    template = {"InT": dtype, "StT": "float32", "T": 4, "Dk": 128, "Dv": 128, "Hk": 16, "Hv": 32}
    _compiles_cleanly(nvrtc.wrap(recurrence.SOURCE, inputs, outputs, template))


def test_a_kernel_that_does_not_compile_fails_here():
    compiled = nvrtc.compile_for(nvrtc.wrap("y[0] = undeclared;", {"x": "float32"}, {"y": "float32"}, {}))
    assert not compiled.ok and "undeclared" in compiled.log
