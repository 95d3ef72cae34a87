"""The few-row quantized product (engines/mlx/cuda/quantized_skinny.py): its packing and order, emulated with MLX
ops, against MLX's own quantized product on any device; on CUDA the kernel itself against MLX's product, and
each row of a k-row product bit for bit the one-row product of that row (what keeps greedy output with the
drafter identical to drafter off on quantized checkpoints there)."""

import pytest

from engines.mlx import linear
from engines.mlx.cuda import use_cuda_kernel
from engines.mlx.cuda.quantized_skinny import (BITS, GROUP_SIZES, MAX_K_SPLIT, MAX_ROWS, applies, emulate, k_split,
                                               per_weight, product, row_bucket, rows_per_warp, unpack)
from tests.support.quantized import (assert_each_row_is_its_one_row_product, assert_emulation_keeps_shape_and_dtype,
                                     assert_kernel_is_mlxs_product, cuda, mlx_product, product_magnitude,
                                     quantized_weights)


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUP_SIZES)
def test_unpacked_codes_are_mlxs_dequantization(bits, group_size):
    import mlx.core as mx

    wq, scales, biases = quantized_weights(24, 384, group_size, bits)
    codes = unpack(wq, bits)
    assert int(codes.max().item()) == 2**bits - 1 and int(codes.min().item()) == 0
    # on the CPU: MLX's CUDA dequantize rounds scale * q + bias differently (in the last bit)
    with mx.stream(mx.cpu):
        ours = (mx.repeat(scales, group_size, axis=1) * codes.astype(mx.float32)
                + mx.repeat(biases, group_size, axis=1))
        assert mx.array_equal(ours, mx.dequantize(wq, scales, biases, group_size=group_size, bits=bits))


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("group_size", GROUP_SIZES)
def test_emulation_is_mlxs_quantized_product_within_float32_rounding(bits, group_size):
    import mlx.core as mx

    # K = 1408: 44 or 88 lane steps, so some lanes take one step more than others
    wq, scales, biases = quantized_weights(40, 1408, group_size, bits)
    for rows in range(1, 9):
        x = mx.random.normal((rows, 1408), key=mx.random.key(rows))
        ours, theirs = emulate(x, wq, scales, biases, group_size, bits), mlx_product(x, wq, scales, biases, group_size,
                                                                                   bits)
        assert ours.shape == theirs.shape == (rows, 40)
        error = mx.abs(ours - theirs) / product_magnitude(x, wq, scales, biases, group_size, bits)
        assert error.max().item() < 1e-6, (rows, error.max().item())


@pytest.mark.parametrize("bits", BITS)
@pytest.mark.parametrize("split", [2, MAX_K_SPLIT])
def test_emulation_with_warps_sharing_k_is_mlxs_quantized_product(bits, split):
    import mlx.core as mx

    # K = 1408 over 32 x split lanes: the last round leaves some lanes of some warps idle
    wq, scales, biases = quantized_weights(40, 1408, 64, bits)
    x = mx.random.normal((3, 1408), key=mx.random.key(split))
    ours, theirs = emulate(x, wq, scales, biases, 64, bits, split), mlx_product(x, wq, scales, biases, 64, bits)
    error = mx.abs(ours - theirs) / product_magnitude(x, wq, scales, biases, 64, bits)
    assert error.max().item() < 1e-6
    assert not mx.array_equal(ours, emulate(x, wq, scales, biases, 64, bits, 1))  # another order of sums


def test_warps_share_k_where_few_warps_would_run():
    # a 4.1B model's down projection: 1,024 warps of four rows each over 12 lane steps
    assert k_split(4096, 12288, 4) == MAX_K_SPLIT
    # gate and up: 3,072 warps, two take 6,144
    assert k_split(12288, 4096, 4) == 2
    # small layers: every lane keeps two steps or more
    assert k_split(301, 1408, 4) == 1 and k_split(96, 512, 8) == 1


def test_emulation_keeps_leading_dimensions_and_the_activation_dtype():
    assert_emulation_keeps_shape_and_dtype(emulate, 4)


@pytest.mark.skipif(use_cuda_kernel(), reason="on CUDA quantized layers run specchat's kernel")
def test_quantized_layers_run_as_their_modules_off_cuda():
    import mlx.core as mx
    import mlx.nn as nn

    layers = [nn.QuantizedLinear(256, n, bias=False, group_size=64, bits=4) for n in (48, 16, 16)]
    x = mx.random.normal((1, 3, 256))
    group = linear.Group(*map(linear.Linear.of, layers))
    assert group.weight is None and not applies(x, layers[0].weight, layers[0].scales, layers[0].biases, 64, 4)
    for layer, out in zip(layers, group(x)):
        assert mx.array_equal(out, layer(x))


# every bit width in bfloat16, the common ones in float16 (each pair compiles a kernel per row bucket)
KERNELS = [(bits, "bfloat16") for bits in BITS] + [(4, "float16"), (8, "float16")]


# warps sharing K: the common widths, each split (compiling fewer kernels than every pair would)
SPLITS = [(bits, "bfloat16", group_size, split) for bits in (3, 4, 8) for group_size in (64,)
          for split in (2, MAX_K_SPLIT)]


@cuda
@pytest.mark.parametrize(("bits", "dtype", "group_size", "split"),
                         [(bits, dtype, group_size, None) for bits, dtype in KERNELS for group_size in GROUP_SIZES]
                         + SPLITS)
def test_kernel_is_mlxs_quantized_product(bits, dtype, group_size, split):
    assert_kernel_is_mlxs_product(lambda x, *weight: product(x, *weight, bits, split=split),
                                  lambda x, *weight: emulate(x, *weight, group_size, bits, split),
                                  lambda x, *weight: applies(x, *weight, group_size, bits),
                                  group_size, bits, dtype, MAX_ROWS)


@cuda
@pytest.mark.parametrize(("bits", "dtype", "split"),
                         [(bits, dtype, None) for bits, dtype in KERNELS] + [(4, "bfloat16", MAX_K_SPLIT)])
def test_each_row_of_a_k_row_product_is_its_one_row_product(bits, dtype, split):
    assert_each_row_is_its_one_row_product(lambda x, *weight: product(x, *weight, bits, split=split), bits, dtype,
                                           MAX_ROWS)


@cuda
@pytest.mark.parametrize("bits", [4, 8])
def test_the_rows_per_warp_and_the_loop_order_leave_every_row_as_it_is(bits):
    """The rows per warp only choose which warp computes which output rows (the split comes from the weight's
    shape), and either loop order makes the same fused multiply-adds in the same order, so a row bucket may take
    the fastest of them."""
    import mlx.core as mx

    # 4096 x 12288: a shape that the split serves, whatever the rows per warp would have made of it
    wq, scales, biases = quantized_weights(4096, 12288, 64, bits, dtype="bfloat16")
    x = mx.random.normal((4, 12288)).astype(mx.bfloat16)
    usual = product(x, wq, scales, biases, bits)
    for warp_rows in (1, 2, 4, 8):
        for weight_loop in (False, True):
            assert mx.array_equal(product(x, wq, scales, biases, bits, warp_rows, weight_loop=weight_loop),
                                  usual), (warp_rows, weight_loop)


def test_row_buckets_are_exact_up_to_four_rows_then_powers_of_two():
    assert [row_bucket(rows) for rows in (1, 2, 3, 4, 5, 8, 9, 16)] == [1, 2, 3, 4, 8, 8, 16, 16]
    assert [per_weight(4, rows) for rows in (1, 2, 3, 4, 5)] == [False, True, False, True, False]
    assert not per_weight(5, 4)  # only the widths it was timed at


def test_one_row_at_4_bits_reads_eight_weight_rows_a_warp_only_where_that_still_makes_enough_warps():
    assert [rows_per_warp(4, 1, n, k) for n, k in ((12288, 4096), (4096, 12288), (4096, 4096), (1024, 4096))] \
        == [8, 8, 4, 4]
    assert rows_per_warp(8, 1, 12288, 4096) == 4


@cuda
def test_quantized_layers_and_their_stack_run_the_kernel():
    import mlx.core as mx
    import mlx.nn as nn

    mx.random.seed(3)
    layers = [nn.QuantizedLinear(512, n, bias=False, group_size=64, bits=4) for n in (96, 32, 32)]
    for layer in layers:
        layer.update({"scales": layer.scales.astype(mx.bfloat16), "biases": layer.biases.astype(mx.bfloat16)})
    originals = [dict(layer.parameters()) for layer in layers]
    x = mx.random.normal((1, 4, 512)).astype(mx.bfloat16)
    alone = [linear.Linear.of(layer)(x) for layer in layers]
    group = linear.Group(*map(linear.Linear.of, layers))
    assert group.weight is not None and group.quantized == (64, 4)
    for layer, original, ours, by_itself in zip(layers, originals, group(x), alone):
        assert all(mx.array_equal(layer[name], original[name]) for name in original)  # left as they were
        assert mx.array_equal(ours, by_itself)  # stacking changes no row's arithmetic
        theirs = mlx_product(x, original["weight"], original["scales"], original["biases"], 64, 4)
        magnitude = product_magnitude(x, original["weight"], original["scales"], original["biases"], 64, 4)
        assert (mx.abs(ours - theirs) <= 2**-7 * mx.abs(theirs) + 1e-5 * magnitude.reshape(theirs.shape)).all().item()
    biased = nn.QuantizedLinear(512, 64, bias=True, group_size=64, bits=8)  # float32 scales, bfloat16 input
    exact = mlx_product(x, biased.weight, biased.scales, biased.biases, 64, 8)
    magnitude = product_magnitude(x, biased.weight, biased.scales, biased.biases, 64, 8).reshape(exact.shape)
    error = mx.abs(linear.Linear.of(biased)(x) - (exact + biased.bias))
    assert (error <= 2**-7 * mx.abs(exact) + 1e-5 * magnitude).all().item()
