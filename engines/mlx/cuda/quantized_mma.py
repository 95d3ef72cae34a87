"""A product of a few rows with a 4- or 8-bit affine-quantized weight on tensor cores, for CUDA.

The kernel of quantized_skinny.py multiplies on the CUDA cores: every weight costs one fused multiply-add per
input row, so four rows cost 1.2-1.55 one-row products at the 4.1B rig's shapes on an H200 (benchmarks/
RESULTS.md), above the bar of 1.3 at half of them. Here a warp multiplies with ``mma.sync.m16n8k16``
(bfloat16 or float16 in, float32 out): sixteen input rows and eight weight rows at once, so the rows beyond the
first cost nothing but their loads, and what remains per weight is turning its code into a number.

Codes go in as they are: 4- and 8-bit codes are exact in bfloat16 and float16, and products of two such
numbers are exact in float32, so a tensor core sums ``x * q`` over sixteen weights of one group without
rounding a weight. Per group, ``scale * sum(x * q) + bias * sum(x)`` (the second sum by the same instruction
with ones for weights), added to the row's float32 total group after group, in order.

Which sixteen weights an instruction takes is free, as long as input and weight agree: lane ``t`` of the four
that hold a weight row takes a quarter of each group (``group_size / 4`` consecutive codes, one load), and its
input row's same quarter, so every instruction's sixteen weights lie in one group.

One row or sixteen, every row is the same instructions on the same numbers, so a k-row verify gives each row
exactly what a one-row step gives it (test_quantized_mma.py holds it on CUDA), as quantized_skinny.py does.
``emulate`` computes the same sums with MLX ops (per group, then in the kernel's order), which a test holds
against ``mx.quantized_matmul`` on any device.

A round's loads are all issued before its products (the input rows too, up to eight rows and eight groups), and
the warps that share a set of weight rows each take a contiguous stretch of groups, so that a round's scales and
biases come four to a load. Measured on an H200 (benchmarks/RESULTS.md), four rows cost 1.01-1.02 one-row products
here on the GPU alone and 0.97-1.05 through MLX, and one row 0.99-1.12 times the CUDA-core kernel's one row; the
engine runs this kernel for 4- and 8-bit layers (``KernelChoice.tensor_cores``; ``python -m benchmarks.rounds
--cuda-cores`` runs the other).
"""

from __future__ import annotations

from functools import lru_cache

from . import use_cuda_kernel
# GROUP_SIZES: the group sizes served are quantized_skinny.py's, whose shape check applies takes
from .quantized_skinny import GROUP_SIZES, fewest_sharing, shape_fits, unpack

MAX_ROWS = 16  # the instruction's sixteen input rows
BITS = (4, 8)
WEIGHT_ROWS = 8  # per warp: the instruction's eight columns
LANES = 32
WARPS = 4  # warps per block
MAX_K_SPLIT = 4  # the most warps of a block that share a set of weight rows, each taking a stretch of the groups
WARPS_IN_FLIGHT = 4096  # the CUDA-core kernel's: at 2,048 the gate and up projections (split in two) took 12%
# longer than split in four on an H200
CODES_PER_ROUND = 256  # codes of a weight row a warp loads before it multiplies (a power of two, whole groups)

HEADER = """
// d += a b on tensor cores: a is 16 x 16 (rows x k), b 16 x 8, d 16 x 8 in float32 (mma's fragment layout)
template <int BF>
__device__ __forceinline__ void specchat_mma(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                                             uint32_t b0, uint32_t b1) {
    if (BF) {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    } else {
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                     "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\\n"
                     : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                     : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
    }
}

// (v * 1 - offset) in each half: the codes out of a magic number's low mantissa bits, exactly
template <int BF>
__device__ __forceinline__ uint32_t specchat_unbias(uint32_t v) {
    uint32_t d;
    if (BF) {
        asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(v), "r"(0x3F803F80u), "r"(0xC300C300u));
    } else {
        asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(d) : "r"(v), "r"(0x3C003C00u), "r"(0xE400E400u));
    }
    return d;
}

// A lane's quarter of a group of one input row (XW 32-bit words), or zeros for a row past the input's
template <int XW, typename T>
__device__ __forceinline__ void specchat_input(const T* quarter, bool present, uint32_t (&out)[XW]) {
    #pragma unroll
    for (int v = 0; v < XW / 4; ++v) {
        uint4 p = {0u, 0u, 0u, 0u};
        if (present) {
            p = reinterpret_cast<const uint4*>(quarter)[v];
        }
        out[4 * v] = p.x;
        out[4 * v + 1] = p.y;
        out[4 * v + 2] = p.z;
        out[4 * v + 3] = p.w;
    }
}

// Four consecutive 16-bit scales or biases in one 8-byte load, as floats
template <typename S>
__device__ __forceinline__ void specchat_four(const S* p, float* out) {
    const uint2 v = *reinterpret_cast<const uint2*>(p);
    const S* h = reinterpret_cast<const S*>(&v);
    #pragma unroll
    for (int j = 0; j < 4; ++j) {
        out[j] = static_cast<float>(h[j]);
    }
}

__device__ __forceinline__ uint32_t specchat_pack_bf16(float high, float low) {
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(high), "f"(low));
    return d;
}

// Codes 0-3 of four consecutive ones as two pairs in the activation's 16-bit type: (c0, c2) and (c1, c3),
// the pairing the input's (x0, x2) and (x1, x3) take
template <int BF, int BITS>
__device__ __forceinline__ void specchat_codes(uint32_t piece, uint32_t& even, uint32_t& odd) {
    if (BITS == 4) {
        // piece: four nibbles; u puts nibble 2 at bit 16 beside nibble 0, nibble 3 at bit 20 beside nibble 1
        const uint32_t magic = BF ? 0x43004300u : 0x64006400u;  // 128 (bfloat16) or 1024 (float16) in each half
        const uint32_t u = piece | (piece << 8);
        even = specchat_unbias<BF>((u & 0x000F000Fu) | magic);
        odd = specchat_unbias<BF>(((u >> 4) & 0x000F000Fu) | magic);
    } else if (BF) {
        // 8-bit codes need eight significant bits, which bfloat16 holds but not above a magic number: each
        // becomes 2**23 + q as a float (one byte permute), minus 2**23, then two are packed
        float f[4];
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            f[j] = __uint_as_float(__byte_perm(piece, 0x4B000000u, 0x7650 + j)) - 8388608.0f;
        }
        even = specchat_pack_bf16(f[2], f[0]);
        odd = specchat_pack_bf16(f[3], f[1]);
    } else {
        even = specchat_unbias<BF>((piece & 0x00FF00FFu) | 0x64006400u);
        odd = specchat_unbias<BF>(((piece >> 8) & 0x00FF00FFu) | 0x64006400u);
    }
}
"""

SOURCE = """
    constexpr int Q = GS / 4;                // codes a lane takes from each group
    constexpr int CW = Q * BITS / 32;        // their 32-bit words
    constexpr int XW = Q / 2;                // the input's 16-bit values over them, in 32-bit words
    constexpr int U = CPR / GS;              // groups per round
    constexpr int STEPS = GS / 16;           // instructions per group
    constexpr bool AHEAD = MR <= 8 && U <= 8;  // a round's input rows loaded with its weights
    constexpr int XU = AHEAD ? U : 1;
    const uint32_t ONES = BF ? 0x3F803F80u : 0x3C003C00u;
    const int M = x_shape[0];
    const int K = x_shape[1];
    const int N = wq_shape[0];
    const int groups = K / GS;
    const int lane = threadIdx.x;
    const int gid = lane >> 2;               // the weight row this lane loads, and the input row it holds
    const int tig = lane & 3;                // which quarter of each group
    const int part = threadIdx.y % KS;
    const int n0 = (blockIdx.y * blockDim.y + threadIdx.y) / KS * 8;
    const bool active = n0 < N;              // no early return: the warps of a block meet at a barrier when KS > 1
    // rows past N read row N - 1 and are never written
    const size_t wrow = (size_t)min(n0 + gid, N - 1);
    const size_t c0 = (size_t)min(n0 + 2 * tig, N - 1);      // the output columns of this lane's results
    const size_t c1 = (size_t)min(n0 + 2 * tig + 1, N - 1);
    const bool low_rows = gid < M;
    const bool high_rows = MR > 8 && gid + 8 < M;
    // Part `part` of a split takes a contiguous stretch of `span` groups: a round's scales and biases are then
    // side by side, four in one load where they are 16-bit and the stretches start at a multiple of four
    const int span = (groups + KS - 1) / KS;
    const int first = min(groups, part * span);
    const int count = min(groups, first + span) - first;
    const bool packed = sizeof(*scales) == 2 && U % 4 == 0 && groups % 4 == 0 && span % 4 == 0;
    // Pointers at this lane's quarter of the part's first group, moved a round at a time: within a round every
    // offset is a constant, so the loads take no address arithmetic of their own
    constexpr int GROUP_WORDS = GS * BITS / 32;
    const int quarter = first * GS + tig * Q;
    const uint32_t* wp = wq + wrow * (size_t)(K / 32 * BITS) + quarter * BITS / 32;
    const auto* sp0 = scales + c0 * groups + first;
    const auto* sp1 = scales + c1 * groups + first;
    const auto* bp0 = biases + c0 * groups + first;
    const auto* bp1 = biases + c1 * groups + first;
    const T* xlp = x + (size_t)gid * K + quarter;
    const T* xhp = x + (size_t)(gid + 8) * K + quarter;
    float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    for (int g0 = active ? 0 : count; g0 < count; g0 += U, wp += U * GROUP_WORDS, sp0 += U, sp1 += U, bp0 += U,
         bp1 += U, xlp += U * GS, xhp += U * GS) {
        // Every load of the round first: the weights of U groups, their scales and biases and, up to eight rows
        // and eight groups a round, the input rows over them, all in flight at once. An input row loaded just
        // before its products (it is in cache) kept each group waiting on its own load: one row took 1.2-1.45
        // times the CUDA-core kernel's. Sixteen rows or sixteen groups would take more registers than a
        // multiprocessor has for sixteen warps, so those rounds load the input per group.
        uint32_t w[U][CW];
        float s0[U], s1[U], b0[U], b1[U];
        #pragma unroll
        for (int u = 0; u < U; ++u) {
            if (g0 + u < count) {
                const uint32_t* wu = wp + u * GROUP_WORDS;
                if (CW % 4 == 0) {
                    #pragma unroll
                    for (int v = 0; v < CW / 4; ++v) {
                        const uint4 p = reinterpret_cast<const uint4*>(wu)[v];
                        w[u][4 * v] = p.x;
                        w[u][4 * v + 1] = p.y;
                        w[u][4 * v + 2] = p.z;
                        w[u][4 * v + 3] = p.w;
                    }
                } else if (CW == 2) {
                    const uint2 p = reinterpret_cast<const uint2*>(wu)[0];
                    w[u][0] = p.x;
                    w[u][1] = p.y;
                } else {
                    w[u][0] = wu[0];
                }
                if (!packed) {
                    s0[u] = static_cast<float>(sp0[u]);
                    s1[u] = static_cast<float>(sp1[u]);
                    b0[u] = static_cast<float>(bp0[u]);
                    b1[u] = static_cast<float>(bp1[u]);
                }
            }
        }
        if (packed) {
            #pragma unroll
            for (int v = 0; v < U / 4; ++v) {
                if (g0 + 4 * v < count) {
                    specchat_four(sp0 + 4 * v, s0 + 4 * v);
                    specchat_four(sp1 + 4 * v, s1 + 4 * v);
                    specchat_four(bp0 + 4 * v, b0 + 4 * v);
                    specchat_four(bp1 + 4 * v, b1 + 4 * v);
                }
            }
        }
        uint32_t xl[XU][XW];
        uint32_t xh[XU][XW];
        if (AHEAD) {
            #pragma unroll
            for (int u = 0; u < U; ++u) {
                specchat_input<XW>(xlp + u * GS, low_rows && g0 + u < count, xl[u % XU]);
            }
        }
        #pragma unroll
        for (int u = 0; u < U; ++u) {
            if (g0 + u < count) {
                uint32_t (&xlu)[XW] = xl[u % XU];
                uint32_t (&xhu)[XW] = xh[u % XU];
                if (!AHEAD) {
                    specchat_input<XW>(xlp + u * GS, low_rows, xlu);
                    if (MR > 8) {
                        specchat_input<XW>(xhp + u * GS, high_rows, xhu);
                    }
                }
                float dq[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                float dx[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                #pragma unroll
                for (int i = 0; i < STEPS; ++i) {
                    // codes 4i..4i+3 of this lane's quarter: 16 bits at 4 bits, a word at 8
                    const uint32_t piece = BITS == 4 ? (w[u][i / 2] >> (16 * (i % 2))) & 0xFFFFu : w[u][i];
                    uint32_t even, odd;
                    specchat_codes<BF, BITS>(piece, even, odd);
                    // the input's x0..x3 there as (x0, x2) and (x1, x3), as the codes are paired
                    const uint32_t a0 = __byte_perm(xlu[2 * i], xlu[2 * i + 1], 0x5410);
                    const uint32_t a2 = __byte_perm(xlu[2 * i], xlu[2 * i + 1], 0x7632);
                    uint32_t a1 = 0u, a3 = 0u;
                    if (MR > 8) {
                        a1 = __byte_perm(xhu[2 * i], xhu[2 * i + 1], 0x5410);
                        a3 = __byte_perm(xhu[2 * i], xhu[2 * i + 1], 0x7632);
                    }
                    specchat_mma<BF>(dq, a0, a1, a2, a3, even, odd);
                    specchat_mma<BF>(dx, a0, a1, a2, a3, ONES, ONES);
                }
                acc[0] = __fmaf_rn(b0[u], dx[0], __fmaf_rn(s0[u], dq[0], acc[0]));
                acc[1] = __fmaf_rn(b1[u], dx[1], __fmaf_rn(s1[u], dq[1], acc[1]));
                acc[2] = __fmaf_rn(b0[u], dx[2], __fmaf_rn(s0[u], dq[2], acc[2]));
                acc[3] = __fmaf_rn(b1[u], dx[3], __fmaf_rn(s1[u], dq[3], acc[3]));
            }
        }
    }
    __shared__ float partial[KS > 1 ? WARPS : 1][LANES][4];
    if (KS > 1) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            partial[threadIdx.y][lane][j] = acc[j];
        }
        __syncthreads();
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            float v = partial[threadIdx.y - part][lane][j];
            for (int p = 1; p < KS; ++p) {
                v += partial[threadIdx.y - part + p][lane][j];
            }
            acc[j] = v;
        }
    }
    if (part == 0 && active) {
        #pragma unroll
        for (int j = 0; j < 4; ++j) {
            const int m = gid + (j >= 2 ? 8 : 0);
            const int n = n0 + 2 * tig + (j & 1);
            if (m < M && n < N) {
                y[(size_t)m * N + n] = static_cast<T>(acc[j]);
            }
        }
    }
"""


@lru_cache(maxsize=1)
def _kernel():
    import mlx.core as mx

    return mx.fast.cuda_kernel(name="specchat_quantized_mma", input_names=["x", "wq", "scales", "biases"],
                               output_names=["y"], source=SOURCE, header=HEADER)


def applies(x, wq, scales, biases, group_size: int, bits: int, mode: str = "affine") -> bool:
    """Whether ``product`` serves this quantized product: CUDA, affine mode, bfloat16 or float16 activations
    (the tensor cores' inputs), 4 or 8 bits, and the packing and shapes quantized_skinny.py serves (its group
    sizes, up to ``MAX_ROWS`` rows)."""
    import mlx.core as mx

    return (mode == "affine" and x.dtype in (mx.bfloat16, mx.float16) and bits in BITS
            and shape_fits(x, wq, scales, biases, group_size, bits) and use_cuda_kernel())


def row_bucket(rows: int) -> int:
    """The rows a kernel is compiled for: eight (one half of the instruction's rows) or sixteen."""
    return 8 if rows <= 8 else MAX_ROWS


def k_split(n: int, k: int) -> int:
    """How many warps share a set of weight rows: the fewest that put ``WARPS_IN_FLIGHT`` to work, as long as
    each still takes two rounds. It depends on the weight's shape only, so every row is computed the same
    way whatever the number of rows."""
    return fewest_sharing(-(-n // WEIGHT_ROWS), k // CODES_PER_ROUND, WARPS_IN_FLIGHT, MAX_K_SPLIT)


def product(x, wq, scales, biases, group_size: int, bits: int, split: int | None = None,
            codes_per_round: int = CODES_PER_ROUND):
    """``x @ dequantize(wq, scales, biases).T`` for an ``x`` of up to ``MAX_ROWS`` rows (any leading shape).

    The split (``k_split`` of the weight's shape unless given) and the codes per round are compiled in, as
    the bit width, group size, activation dtype and row bucket are; a benchmark may sweep both (the split
    changes the order of a row's sums, the codes per round only how many groups' loads a warp issues at once)."""
    import mlx.core as mx

    rows, k = x.size // x.shape[-1], x.shape[-1]
    n = wq.shape[0]
    split = split or k_split(n, k)
    out = _kernel()(
        inputs=[x.reshape(rows, k), wq, scales, biases],
        template=[("T", x.dtype), ("S", scales.dtype), ("BF", int(x.dtype == mx.bfloat16)), ("MR", row_bucket(rows)),
                  ("BITS", bits), ("GS", group_size), ("KS", split), ("WARPS", WARPS), ("LANES", LANES),
                  ("CPR", max(codes_per_round, group_size))],
        grid=(LANES, -(-n // WEIGHT_ROWS) * split, 1),
        threadgroup=(LANES, WARPS, 1),
        output_shapes=[(rows, n)],
        output_dtypes=[x.dtype],
    )[0]
    return out.reshape(*x.shape[:-1], n)


def emulate(x, wq, scales, biases, group_size: int, bits: int, split: int | None = None):
    """``product`` computed with MLX ops in the kernel's order, on any device: per group ``sum(x * q)`` and
    ``sum(x)`` in float32, then each part's groups (a contiguous stretch of ``ceil(groups / split)``) added in
    order as ``scale * sum(x * q)`` and ``bias * sum(x)``, then the parts' totals in order."""
    import mlx.core as mx

    k, n = x.shape[-1], wq.shape[0]
    split = split or k_split(n, k)
    f32 = mx.float32
    groups = k // group_size
    flat = x.reshape(-1, k).astype(f32).reshape(-1, groups, group_size).transpose(1, 0, 2)  # (G, rows, gs)
    codes = unpack(wq, bits).astype(f32).reshape(n, groups, group_size).transpose(1, 2, 0)  # (G, gs, N)
    # multiplied and summed, not matmul'd: a GPU's float32 matmul may run as TF32 (MLX_ENABLE_TF32, on by default)
    sums = (flat[:, :, :, None] * codes[:, None, :, :]).sum(axis=2)  # (G, rows, N)
    x_sums = flat.sum(axis=-1)  # (G, rows)
    s, b = scales.astype(f32).T, biases.astype(f32).T  # (G, N)
    total = None
    span = -(-groups // split)
    for part in range(split):
        acc = mx.zeros((flat.shape[1], n), dtype=f32)
        for g in range(part * span, min(groups, (part + 1) * span)):
            acc = acc + s[g] * sums[g]
            acc = acc + b[g] * x_sums[g][:, None]
        total = acc if total is None else total + acc
    return total.astype(x.dtype).reshape(*x.shape[:-1], n)
