"""Quantized weights and MLX's own product, for the tests of specchat's quantized kernels."""

import pytest

from engines.mlx.cuda import use_cuda_kernel

cuda = pytest.mark.skipif(not use_cuda_kernel(), reason="specchat's CUDA kernels run only on a CUDA GPU")


def quantized_weights(n, k, group_size, bits, dtype="float32", seed=0):
    import mlx.core as mx

    mx.random.seed(seed)
    w = (mx.random.normal((n, k)) * k**-0.5).astype(getattr(mx, dtype))
    return mx.quantize(w, group_size=group_size, bits=bits)


def mlx_product(x, wq, scales, biases, group_size, bits):
    """MLX's quantized product in float32: the exact dequantize-and-dot, where MLX's bfloat16 and float16
    paths round the dequantized weights (and, on a CPU, partial sums) to the activation dtype."""
    import mlx.core as mx

    f32 = mx.float32
    return mx.quantized_matmul(x.astype(f32), wq, scales=scales.astype(f32), biases=biases.astype(f32),
                               transpose=True, group_size=group_size, bits=bits)


def product_magnitude(x, wq, scales, biases, group_size, bits):
    """``|x| @ |w|.T`` in float32: what a product's rounding error is measured against."""
    import mlx.core as mx

    w = mx.dequantize(wq, scales, biases, group_size=group_size, bits=bits).astype(mx.float32)
    return mx.abs(x.astype(mx.float32)).reshape(-1, x.shape[-1]) @ mx.abs(w).T


def assert_kernel_is_mlxs_product(kernel, emulation, fits, group_size, bits, dtype, max_rows, k=1408):
    """For 1 to ``max_rows`` rows, ``kernel(x, wq, scales, biases)`` over a K of ``k`` is MLX's product within the
    output's rounding and ``emulation(x, wq, scales, biases)`` (its order in MLX ops) within a unit in the last
    place."""
    import mlx.core as mx

    # N = 301: the last warp's rows run past the weight's end (and past the last block's, split or not)
    wq, scales, biases = quantized_weights(301, k, group_size, bits, dtype=dtype)
    for rows in range(1, max_rows + 1):
        x = mx.random.normal((rows, k), key=mx.random.key(rows)).astype(getattr(mx, dtype))
        assert fits(x, wq, scales, biases)
        ours = kernel(x, wq, scales, biases).astype(mx.float32)
        assert ours.shape == (rows, 301)
        magnitude = product_magnitude(x, wq, scales, biases, group_size, bits)
        theirs = mlx_product(x, wq, scales, biases, group_size, bits)
        # within the output's rounding to the activation dtype (half a unit in the last place: up to 2**-8)
        assert (mx.abs(ours - theirs) <= 2**-7 * mx.abs(theirs) + 1e-5 * magnitude).all().item(), rows
        # the emulation's order, fused multiply-adds aside: at most one unit in the last place apart
        emulated = emulation(x, wq, scales, biases).astype(mx.float32)
        assert (mx.abs(ours - emulated) <= 2**-7 * mx.abs(emulated) + 1e-6 * magnitude).all().item(), rows


def assert_each_row_is_its_one_row_product(kernel, bits, dtype, max_rows):
    """Every row of a 2- to ``max_rows``-row ``kernel(x, wq, scales, biases)`` is bit for bit that row's one-row
    product (group size 64)."""
    import mlx.core as mx

    wq, scales, biases = quantized_weights(1000, 2048, 64, bits, dtype=dtype)
    x = mx.random.normal((max_rows, 2048)).astype(getattr(mx, dtype))
    singles = [kernel(x[r : r + 1], wq, scales, biases) for r in range(max_rows)]
    for rows in range(2, max_rows + 1):
        out = kernel(x[:rows], wq, scales, biases)
        for r in range(rows):
            assert mx.array_equal(out[r : r + 1], singles[r]), (rows, r)


def assert_emulation_keeps_shape_and_dtype(emulation, bits):
    """``emulation(x, wq, scales, biases, 64, bits)`` over a (1, 3, 256) bfloat16 input keeps its leading
    dimensions and dtype, and is MLX's product within the output's rounding."""
    import mlx.core as mx

    wq, scales, biases = quantized_weights(16, 256, 64, bits, dtype="bfloat16")
    x = mx.random.normal((1, 3, 256)).astype(mx.bfloat16)
    ours = emulation(x, wq, scales, biases, 64, bits)
    assert ours.shape == (1, 3, 16) and ours.dtype == mx.bfloat16
    theirs = mlx_product(x, wq, scales, biases, 64, bits)
    magnitude = product_magnitude(x, wq, scales, biases, 64, bits).reshape(1, 3, 16)
    assert (mx.abs(ours - theirs) <= 2**-7 * mx.abs(theirs) + 1e-6 * magnitude).all().item()  # its rounding
