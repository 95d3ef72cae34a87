"""A product of a few rows with an affine-quantized weight, for CUDA: ``x @ dequantize(wq).T``.

MLX's quantized product over a few rows costs about what that many one-row
products cost (12288 x 4096 at 4 bits on an H200: 0.085 / 0.112 / 0.167 ms for
1 / 2 / 4 rows), so a verify of four tokens costs about two plain steps. Here
each warp reads a few rows of the packed weight once, in 16-byte loads where the
bit width allows, dequantizes them in float32 and multiplies them with every
input row, so the weight streams once whatever the number of rows.

It also serves one row, so that a row is computed with the same arithmetic
whatever the number of rows beside it: every output element is one float32
chain of fused multiply-adds over the same weights in the same order, then the
same warp reduction. A verify over k rows then gives each row exactly the
numbers a one-row step gives it, which is what keeps greedy output with the
drafter identical to drafter off on quantized checkpoints.

The packing (MLX's affine mode): a row's ``bits``-bit codes form one
little-endian bit stream over its uint32 words, and element j of group g is
``scales[g] * q_j + biases[g]``. ``emulate`` computes the same product in the
kernel's order with MLX ops, which a test holds against ``mx.quantized_matmul``
on any device.
"""

from __future__ import annotations

from functools import lru_cache

from . import use_cuda_kernel

MAX_ROWS = 16  # every block size a verify can have, so each row is computed the one way
ROWS_PER_WARP = 4  # weight rows a warp reads together, each input chunk loaded once for all (rows_per_warp)
BITS = (2, 3, 4, 5, 6, 8)
GROUP_SIZES = (32, 64, 128)
LANES = 32
WARPS = 4  # warps per block
MAX_K_SPLIT = 4  # the most warps (of a block's WARPS) that share a set of weight rows, each taking part of K
WARPS_IN_FLIGHT = 4096  # about 32 per multiprocessor on a 132-SM GPU: enough loads in flight to hide their latency


def lane_step(bits: int) -> int:
    """How many consecutive weights of a row one lane takes per step: 16 bytes of 8-bit codes, else 32 codes
    (16 bytes at 4 bits), always inside one group."""
    return 16 if bits == 8 else 32


HEADER = """
// Element e of a lane's step, dequantized: its code out of the packed words, then scale * q + bias in float32
template <int BITS, int W>
__device__ __forceinline__ float specchat_weight(const unsigned int (&words)[W], int e, float scale, float bias) {
    constexpr unsigned int MASK = (1u << BITS) - 1u;
    const int bit = e * BITS;
    const int word = bit / 32;
    const int shift = bit % 32;
    unsigned int q = words[word] >> shift;
    if (shift + BITS > 32 && word + 1 < W) {
        q |= words[word + 1] << (32 - shift);
    }
    // float(q) exactly, as 2**23 + q read as a float minus 2**23: full-rate logic and an add where an integer
    // conversion runs at a fraction of the rate on NVIDIA GPUs
    const float qf = __uint_as_float((q & MASK) | 0x4B000000u) - 8388608.0f;
    return __fmaf_rn(scale, qf, bias);
}
"""

SOURCE = """
    constexpr int W = E * BITS / 32;
    constexpr int XV = 16 / sizeof(T);
    const int M = x_shape[0];
    const int K = x_shape[1];
    const int N = wq_shape[0];
    const int groups = scales_shape[1];
    const int group_size = K / groups;
    const int row_words = K / 32 * BITS;
    const int lane = threadIdx.x;
    // KS warps of a block share NW weight rows, warp `part` taking every KS-th 32-step stretch of K
    const int part = threadIdx.y % KS;
    const int n0 = (blockIdx.y * blockDim.y + threadIdx.y) / KS * NW;
    const bool active = n0 < N;  // no early return: the warps of a block meet at a barrier when KS > 1
    __shared__ float partial[KS > 1 ? WARPS : 1][NW][MR];
    float acc[NW][MR];
    #pragma unroll
    for (int r = 0; r < NW; ++r) {
        #pragma unroll
        for (int m = 0; m < MR; ++m) {
            acc[r][m] = 0.0f;
        }
    }
    for (int i = active ? part * 32 + lane : K / E; i < K / E; i += 32 * KS) {
        unsigned int words[NW][W];
        float scale[NW];
        float bias[NW];
        const int group_in_row = i * E / group_size;
        #pragma unroll
        for (int r = 0; r < NW; ++r) {
            // a warp's rows past N read row N - 1 and are never written
            const size_t n = (size_t)min(n0 + r, N - 1);
            const uint32_t* packed = wq + n * row_words + (size_t)i * W;
            if (W % 4 == 0) {
                #pragma unroll
                for (int v = 0; v < W / 4; ++v) {
                    const uint4 p = reinterpret_cast<const uint4*>(packed)[v];
                    words[r][4 * v] = p.x;
                    words[r][4 * v + 1] = p.y;
                    words[r][4 * v + 2] = p.z;
                    words[r][4 * v + 3] = p.w;
                }
            } else {
                #pragma unroll
                for (int v = 0; v < W; ++v) {
                    words[r][v] = packed[v];
                }
            }
            scale[r] = static_cast<float>(scales[n * groups + group_in_row]);
            bias[r] = static_cast<float>(biases[n * groups + group_in_row]);
        }
        #pragma unroll
        for (int s = 0; s < E / XV; ++s) {
            if (PER_WEIGHT) {
                // each weight dequantized once and multiplied with every input row's element beside it; the
                // input's 16 bytes of every row loaded first (rows past M read row M - 1, never written)
                uint4 x_pack[MR];
                #pragma unroll
                for (int m = 0; m < MR; ++m) {
                    x_pack[m] = reinterpret_cast<const uint4*>(x + (size_t)min(m, M - 1) * K + (size_t)i * E)[s];
                }
                #pragma unroll
                for (int j = 0; j < XV; ++j) {
                    float xf[MR];
                    #pragma unroll
                    for (int m = 0; m < MR; ++m) {
                        xf[m] = static_cast<float>(reinterpret_cast<const T*>(&x_pack[m])[j]);
                    }
                    #pragma unroll
                    for (int r = 0; r < NW; ++r) {
                        const float wf = specchat_weight<BITS, W>(words[r], s * XV + j, scale[r], bias[r]);
                        #pragma unroll
                        for (int m = 0; m < MR; ++m) {
                            acc[r][m] = __fmaf_rn(wf, xf[m], acc[r][m]);
                        }
                    }
                }
            } else {
                // the 16 bytes' weights dequantized first, then each input row's elements through all of them
                float wf[NW][XV];
                #pragma unroll
                for (int r = 0; r < NW; ++r) {
                    #pragma unroll
                    for (int j = 0; j < XV; ++j) {
                        wf[r][j] = specchat_weight<BITS, W>(words[r], s * XV + j, scale[r], bias[r]);
                    }
                }
                #pragma unroll
                for (int m = 0; m < MR; ++m) {
                    if (m < M) {
                        const uint4 x_pack = reinterpret_cast<const uint4*>(x + (size_t)m * K + (size_t)i * E)[s];
                        const T* xs = reinterpret_cast<const T*>(&x_pack);
                        #pragma unroll
                        for (int j = 0; j < XV; ++j) {
                            const float xf = static_cast<float>(xs[j]);
                            #pragma unroll
                            for (int r = 0; r < NW; ++r) {
                                acc[r][m] = __fmaf_rn(wf[r][j], xf, acc[r][m]);
                            }
                        }
                    }
                }
            }
        }
    }
    #pragma unroll
    for (int r = 0; r < NW; ++r) {
        #pragma unroll
        for (int m = 0; m < MR; ++m) {
            float v = acc[r][m];
            for (int offset = 16; offset > 0; offset /= 2) {
                v += __shfl_xor_sync(0xffffffff, v, offset);
            }
            if (KS > 1 && lane == 0) {
                partial[threadIdx.y][r][m] = v;
            }
            if (KS == 1 && lane == 0 && active && m < M && n0 + r < N) {
                y[(size_t)m * N + n0 + r] = static_cast<T>(v);
            }
        }
    }
    if (KS > 1) {
        __syncthreads();
        if (part == 0 && lane == 0 && active) {
            #pragma unroll
            for (int r = 0; r < NW; ++r) {
                #pragma unroll
                for (int m = 0; m < MR; ++m) {
                    float v = partial[threadIdx.y][r][m];
                    for (int p = 1; p < KS; ++p) {
                        v += partial[threadIdx.y + p][r][m];
                    }
                    if (m < M && n0 + r < N) {
                        y[(size_t)m * N + n0 + r] = static_cast<T>(v);
                    }
                }
            }
        }
    }
"""


@lru_cache(maxsize=1)
def _kernel():
    import mlx.core as mx

    return mx.fast.cuda_kernel(name="specchat_quantized_skinny", input_names=["x", "wq", "scales", "biases"],
                               output_names=["y"], source=SOURCE, header=HEADER)


def shape_fits(x, wq, scales, biases, group_size: int, bits: int) -> bool:
    """Whether the arrays are an affine-quantized product this module's layout serves: a bit width and group size
    above, biases, whole groups, the packed weight's and the scales' shapes, and 1 to ``MAX_ROWS`` rows."""
    k = x.shape[-1]
    return (bits in BITS and group_size in GROUP_SIZES and biases is not None and k % group_size == 0
            and wq.ndim == 2 and wq.shape[1] * 32 == k * bits and scales.shape == (wq.shape[0], k // group_size)
            and biases.shape == scales.shape and 1 <= x.size // k <= MAX_ROWS)


def applies(x, wq, scales, biases, group_size: int, bits: int, mode: str = "affine") -> bool:
    """Whether ``product`` serves this quantized product (CUDA, affine mode, float activations, up to
    ``MAX_ROWS`` rows, the bit widths and group sizes above)."""
    import mlx.core as mx

    return (mode == "affine" and x.dtype in (mx.bfloat16, mx.float16, mx.float32)
            and shape_fits(x, wq, scales, biases, group_size, bits) and use_cuda_kernel())


def row_bucket(rows: int) -> int:
    """The number of rows a kernel is compiled for: up to four exactly (a verify's usual blocks, none paying for a
    row it does not have), then the next power of two (a compiled kernel serves up to that many, each row computed
    as in every other)."""
    return rows if rows <= 4 else 1 << (rows - 1).bit_length()


def per_weight(bits: int, rows: int) -> bool:
    """Whether the kernel takes each weight through every input row (else each input row through the weights of
    16 bytes). Both are the same fused multiply-adds in the same order for every output element, so each row
    bucket takes what served it fastest in CUDA-event timings on an H200 (``python -m benchmarks.kernel_events``,
    benchmarks/RESULTS.md): per weight for two and four rows at 4 and 8 bits (four rows' product up to a fifth
    cheaper at the rig's shapes); per input row for one row, where per weight takes more registers and ran no
    faster, for three, where it ran slower at 4 bits, and for eight or more, where it takes too many registers."""
    return bits in (4, 8) and row_bucket(rows) in (2, 4)


def rows_per_warp(bits: int, rows: int, n: int, k: int) -> int:
    """The weight rows a warp reads together for this many input rows and an (n, k) weight. They leave each row's
    arithmetic as it is (only which warp computes an output row), so each takes what served it fastest in the
    same timings: for one row at 4 bits eight, where a warp's loads of x and its code conversions then serve
    twice the weight rows, as long as that still makes half of ``WARPS_IN_FLIGHT`` warps (four for a smaller
    weight: 4096 x 4096 ran in 10 microseconds instead of 12, 1024 x 4096 in 7 instead of 10); per weight
    (``per_weight``) eight for two rows and four for four (their accumulators cost registers); four otherwise."""
    bucket = row_bucket(rows)
    if bucket == 1 and bits == 4:
        return 8 if -(-n // 8) * k_split(n, k, bits) >= WARPS_IN_FLIGHT // 2 else ROWS_PER_WARP
    if per_weight(bits, rows):
        return 8 if bucket == 2 else ROWS_PER_WARP
    return ROWS_PER_WARP


@lru_cache(maxsize=None)  # called for every product of a step, over a model's handful of shapes
def k_split(n: int, k: int, bits: int) -> int:
    """How many warps share a set of weight rows: the fewest that put ``WARPS_IN_FLIGHT`` warps to work, as
    long as every lane still takes two steps or more. A product over few output rows and a long K (a
    layer's down projection) otherwise runs a few warps per multiprocessor, each waiting on its loads in
    turn. It depends on the weight's shape only, so every row is computed the same way whatever the
    number of rows."""
    return fewest_sharing(-(-n // ROWS_PER_WARP), k // lane_step(bits) // LANES, WARPS_IN_FLIGHT, MAX_K_SPLIT)


def fewest_sharing(warps: int, steps: int, in_flight: int, most: int) -> int:
    """The fewest warps (a power of two up to ``most``) to share each of ``warps`` sets of weight rows so that
    ``in_flight`` warps work, as long as each still takes two of the ``steps`` or more."""
    split = 1
    while split < most and warps * split < in_flight and steps // (split * 2) >= 2:
        split *= 2
    return split


def product(x, wq, scales, biases, bits: int, warp_rows: int | None = None, split: int | None = None,
            weight_loop: bool | None = None):
    """``x @ dequantize(wq, scales, biases).T`` for an ``x`` of up to ``MAX_ROWS`` rows (any leading shape).

    Only the activation dtype, the row bucket, the rows per warp (``rows_per_warp`` unless given), the loop order
    (``per_weight`` unless ``weight_loop`` is given), the K split (``k_split`` of the weight's shape unless given)
    and the bit width are compiled in (and the scales' dtype, unused in the source but part of the kernel's name:
    their pointer type differs); the shape and group size are read at run time, so a model's layers share a
    handful of kernels."""
    rows, k = x.size // x.shape[-1], x.shape[-1]
    n = wq.shape[0]
    # the split from the weight's shape alone (at the default rows per warp), so that a row is computed the one
    # way whatever the rows per warp: those only choose which warp computes which output rows
    split = split or k_split(n, k, bits)
    warp_rows = warp_rows or rows_per_warp(bits, rows, n, k)
    weight_loop = per_weight(bits, rows) if weight_loop is None else weight_loop
    out = _kernel()(
        inputs=[x.reshape(rows, k), wq, scales, biases],
        template=[("T", x.dtype), ("S", scales.dtype), ("MR", row_bucket(rows)), ("NW", warp_rows),
                  ("BITS", bits), ("E", lane_step(bits)), ("KS", split), ("WARPS", WARPS),
                  ("PER_WEIGHT", int(weight_loop))],
        grid=(LANES, -(-n // warp_rows) * split, 1),
        threadgroup=(LANES, WARPS, 1),
        output_shapes=[(rows, n)],
        output_dtypes=[x.dtype],
    )[0]
    return out.reshape(*x.shape[:-1], n)


def unpack(wq, bits: int):
    """The codes of a packed weight, (N, K) uint32: each row's ``bits``-bit fields from the low bits up."""
    import mlx.core as mx

    k = wq.shape[1] * 32 // bits
    bit = mx.arange(k, dtype=mx.uint32) * bits
    word, shift = bit // 32, bit % 32
    low = mx.take(wq, word, axis=1) >> shift
    spills = shift + bits > 32
    next_word = mx.take(wq, mx.minimum(word + 1, wq.shape[1] - 1), axis=1)
    high = mx.where(spills, next_word << mx.where(spills, 32 - shift, 0), 0)
    return (low | high) & ((1 << bits) - 1)


def emulate(x, wq, scales, biases, group_size: int, bits: int, split: int | None = None):
    """``product`` computed with MLX ops in the kernel's order, on any device: each weight dequantized in
    float32, each lane's chain of products over its steps, the warp's pairwise reduction, then the sum of
    the ``split`` warps' parts in order."""
    import mlx.core as mx

    k, n = x.shape[-1], wq.shape[0]
    split = split or k_split(n, k, bits)
    lanes = LANES * split
    f32 = mx.float32
    w = (mx.repeat(scales.astype(f32), group_size, axis=1) * unpack(wq, bits).astype(f32)
         + mx.repeat(biases.astype(f32), group_size, axis=1))
    flat = x.reshape(-1, k).astype(f32)
    step = lane_step(bits)
    rounds = -(-(k // step) // lanes)
    padded = rounds * lanes * step
    # (rows or N, round, warp * 32 + lane, element): warp p's lane takes steps 32 p + lane, + 32 split, ...
    w = mx.pad(w, [(0, 0), (0, padded - k)]).reshape(n, rounds, lanes, step)
    flat = mx.pad(flat, [(0, 0), (0, padded - k)]).reshape(-1, rounds, lanes, step)
    acc = mx.zeros((flat.shape[0], n, lanes), dtype=f32)
    for r in range(rounds):
        for j in range(step):
            acc = acc + flat[:, None, r, :, j] * w[None, :, r, :, j]
    acc = acc.reshape(flat.shape[0], n, split, LANES)
    width = LANES
    while width > 1:
        width //= 2
        acc = acc[..., :width] + acc[..., width : 2 * width]
    total = acc[:, :, 0, 0]
    for part in range(1, split):
        total = total + acc[:, :, part, 0]
    return total.astype(x.dtype).reshape(*x.shape[:-1], n)
