"""A product of a few rows with a bfloat16 weight, for CUDA: ``x @ weight.T`` for 2 to 5 rows.

A decode step or a verify multiplies one to eight rows by each weight. MLX's
CUDA product streams a 4096 x 4096 bfloat16 weight for one row near the memory
bandwidth (9 us, where reading it takes about 7), but takes 22-33 us for two to
eight. Here each warp reads four rows of the weight once, in 16-byte loads, and
multiplies them with every input row, so the weight streams once whatever the
number of rows.
"""

from __future__ import annotations

from functools import lru_cache

from . import use_cuda_kernel

MAX_ROWS = 5  # measured on an H200: up to five rows it beats MLX's product (or ties), past that MLX's wins
ROWS_PER_WARP = 4  # weight rows a warp reads together, each input chunk loaded once for all of them

SOURCE = """
    const int lane = threadIdx.x;
    const int n0 = (blockIdx.y * blockDim.y + threadIdx.y) * NW;
    if (n0 >= N) {
        return;
    }
    float acc[NW][M];
    for (int r = 0; r < NW; ++r) {
        for (int m = 0; m < M; ++m) {
            acc[r][m] = 0.0f;
        }
    }
    const uint4* x_rows = reinterpret_cast<const uint4*>(x);
    const uint4* w_rows = reinterpret_cast<const uint4*>(w) + (size_t)n0 * (K / 8);
    for (int i = lane; i < K / 8; i += 32) {
        float2 xf[M][4];
        for (int m = 0; m < M; ++m) {
            const uint4 x_pack = x_rows[(size_t)m * (K / 8) + i];
            const __nv_bfloat162* x_pairs = reinterpret_cast<const __nv_bfloat162*>(&x_pack);
            for (int j = 0; j < 4; ++j) {
                xf[m][j] = __bfloat1622float2(x_pairs[j]);
            }
        }
        uint4 w_pack[NW];
        for (int r = 0; r < NW; ++r) {
            if (n0 + r < N) {
                w_pack[r] = w_rows[(size_t)r * (K / 8) + i];
            }
        }
        for (int r = 0; r < NW; ++r) {
            if (n0 + r < N) {
                const __nv_bfloat162* w_pairs = reinterpret_cast<const __nv_bfloat162*>(&w_pack[r]);
                for (int j = 0; j < 4; ++j) {
                    const float2 wf = __bfloat1622float2(w_pairs[j]);
                    for (int m = 0; m < M; ++m) {
                        acc[r][m] += wf.x * xf[m][j].x + wf.y * xf[m][j].y;
                    }
                }
            }
        }
    }
    for (int r = 0; r < NW; ++r) {
        for (int m = 0; m < M; ++m) {
            float v = acc[r][m];
            for (int offset = 16; offset > 0; offset /= 2) {
                v += __shfl_xor_sync(0xffffffff, v, offset);
            }
            if (lane == 0 && n0 + r < N) {
                y[(size_t)m * N + n0 + r] = __float2bfloat16(v);
            }
        }
    }
"""


@lru_cache(maxsize=1)
def _kernel():
    import mlx.core as mx

    return mx.fast.cuda_kernel(name="specchat_skinny_matmul", input_names=["x", "w"], output_names=["y"],
                               source=SOURCE)


def applies(x, weight) -> bool:
    """Whether ``skinny(x, weight)`` serves this product (CUDA, bfloat16, up to ``MAX_ROWS`` rows, K a
    multiple of 8)."""
    import mlx.core as mx

    rows = x.size // x.shape[-1]
    return (use_cuda_kernel() and weight.dtype == mx.bfloat16 and x.dtype == mx.bfloat16
            and 1 <= rows <= MAX_ROWS and weight.shape[1] % 8 == 0)


def skinny(x, weight):
    """``x @ weight.T`` for an ``x`` of up to ``MAX_ROWS`` rows (any leading shape)."""
    rows, k = x.size // x.shape[-1], x.shape[-1]
    n = weight.shape[0]
    out = _kernel()(
        inputs=[x.reshape(rows, k), weight],
        template=[("M", rows), ("K", k), ("N", n), ("NW", ROWS_PER_WARP)],
        grid=(32, -(-n // ROWS_PER_WARP), 1),
        threadgroup=(32, 4, 1),
        output_shapes=[(rows, n)],
        output_dtypes=[x.dtype],
    )[0]
    return out.reshape(*x.shape[:-1], n)
