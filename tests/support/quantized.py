"""Quantized weights and MLX's own product, for the tests of specchat's quantized kernels."""

import pytest

from engines.mlx.recurrence import use_cuda_kernel

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
