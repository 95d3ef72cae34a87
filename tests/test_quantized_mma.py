"""The few-row quantized product on tensor cores (engines/mlx/cuda/quantized_mma.py): its order, emulated with MLX ops,
against MLX's own quantized product on any device; on CUDA the kernel itself against MLX's product and its
emulation, and each row of a k-row product bit for bit the one-row product of that row."""

import pytest

from engines.mlx.cuda import use_cuda_kernel
from engines.mlx.cuda.quantized_mma import (BITS, GROUP_SIZES, MAX_K_SPLIT, MAX_ROWS, applies, emulate, k_split,
                                            product, row_bucket)
from tests.support.quantized import (assert_each_row_is_its_one_row_product, assert_emulation_keeps_shape_and_dtype,
                                     assert_kernel_is_mlxs_product, cuda, mlx_product, product_magnitude,
                                     quantized_weights)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUP_SIZES)
@pytest.mark.parametrize("split", [1, 2, MAX_K_SPLIT])
def test_emulation_is_mlxs_quantized_product_within_float32_rounding(bits, group_size, split):
    import mlx.core as mx

    wq, scales, biases = quantized_weights(40, 1536, group_size, bits)
    for rows in (1, 3, MAX_ROWS):
        x = mx.random.normal((rows, 1536), key=mx.random.key(rows))
        ours = emulate(x, wq, scales, biases, group_size, bits, split)
        theirs = mlx_product(x, wq, scales, biases, group_size, bits)
        assert ours.shape == theirs.shape == (rows, 40)
        error = mx.abs(ours - theirs) / product_magnitude(x, wq, scales, biases, group_size, bits)
        assert error.max().item() < 1e-5, (rows, error.max().item())


def test_emulation_keeps_leading_dimensions_and_the_activation_dtype():
    assert_emulation_keeps_shape_and_dtype(emulate, 8)


def test_warps_share_k_by_the_weights_shape_alone():
    # the 4.1B rig's down projection and attention output: 512 warps of eight rows, four take 2,048
    assert k_split(4096, 12288) == k_split(4096, 4096) == MAX_K_SPLIT
    # gate and up: 1,536 warps, four take 6,144
    assert k_split(12288, 4096) == MAX_K_SPLIT
    # a vocabulary-sized head: 18,992 warps are enough alone
    assert k_split(151936, 4096) == 1
    # small layers: every part keeps two rounds of 256 codes or more
    assert k_split(301, 1536) == 2 and k_split(301, 512) == k_split(96, 512) == 1


def test_one_kernel_serves_up_to_eight_rows_and_one_up_to_sixteen():
    assert [row_bucket(rows) for rows in (1, 2, 4, 8, 9, 16)] == [8, 8, 8, 8, 16, 16]


@pytest.mark.skipif(use_cuda_kernel(), reason="on CUDA the kernel applies")
def test_the_kernel_applies_only_on_cuda():
    import mlx.core as mx

    wq, scales, biases = quantized_weights(16, 256, 64, 4, dtype="bfloat16")
    assert not applies(mx.zeros((2, 256), dtype=mx.bfloat16), wq, scales, biases, 64, 4)


def test_float32_activations_and_other_bit_widths_are_not_for_tensor_cores():
    import mlx.core as mx

    for bits, dtype in ((4, mx.float32), (3, mx.bfloat16), (6, mx.float16)):
        wq, scales, biases = quantized_weights(16, 256, 64, bits, dtype="bfloat16")
        assert not applies(mx.zeros((2, 256), dtype=dtype), wq, scales, biases, 64, bits)


KERNELS = ([(bits, dtype, group_size, None, 1408) for bits in BITS for dtype in ("bfloat16", "float16")
            for group_size in GROUP_SIZES] + [(bits, "bfloat16", 64, split, 1408) for bits in BITS for split in (2, 4)]
           + [(bits, dtype, 64, split, 2048) for bits in BITS for dtype in ("bfloat16", "float16") for split in (1, 4)])


@cuda
@pytest.mark.parametrize(("bits", "dtype", "group_size", "split", "k"), KERNELS)
def test_kernel_is_mlxs_quantized_product(bits, dtype, group_size, split, k):
    # K = 1408: rounds of 256 codes that the groups do not fill at the end, and parts of a split whose stretches
    # are not a multiple of four groups (their scales loaded one by one); K = 2048: stretches of 32 and 8 groups,
    # their scales four at a time
    assert_kernel_is_mlxs_product(lambda x, *weight: product(x, *weight, group_size, bits, split),
                                  lambda x, *weight: emulate(x, *weight, group_size, bits, split),
                                  lambda x, *weight: applies(x, *weight, group_size, bits),
                                  group_size, bits, dtype, MAX_ROWS, k=k)


@cuda
@pytest.mark.parametrize(("bits", "dtype", "split"),
                         [(bits, dtype, None) for bits in BITS for dtype in ("bfloat16", "float16")]
                         + [(4, "bfloat16", MAX_K_SPLIT)])
def test_each_row_of_a_k_row_product_is_its_one_row_product(bits, dtype, split):
    assert_each_row_is_its_one_row_product(lambda x, *weight: product(x, *weight, 64, bits, split), bits, dtype,
                                           MAX_ROWS)
