"""The gated-delta recurrence over a block with the state after every position, for CUDA: one launch per layer
instead of a handful of small ops per position, which is what a verify step's time went to. The same shape as
mlx-vlm's Metal kernel."""

from __future__ import annotations

from functools import lru_cache

from . import use_cuda_kernel

SOURCE = """
    const int lane = threadIdx.x;
    const int dv_idx = blockIdx.y * blockDim.y + threadIdx.y;
    const int n = blockIdx.z * blockDim.z + threadIdx.z;
    const int b_idx = n / Hv;
    const int hv_idx = n % Hv;
    const int hk_idx = hv_idx / (Hv / Hk);
    constexpr int n_per_t = Dk / 32;

    const auto* q_ = q + b_idx * T * Hk * Dk + hk_idx * Dk;
    const auto* k_ = k + b_idx * T * Hk * Dk + hk_idx * Dk;
    const auto* v_ = v + b_idx * T * Hv * Dv + hv_idx * Dv;
    auto* y_ = y + b_idx * T * Hv * Dv + hv_idx * Dv;
    auto* states_ = states + ((b_idx * T * Hv + hv_idx) * Dv + dv_idx) * Dk;
    const auto* i_state = state_in + (n * Dv + dv_idx) * Dk;
    auto* o_state = state_out + (n * Dv + dv_idx) * Dk;
    const auto* g_ = g + b_idx * T * Hv;
    const auto* beta_ = beta + b_idx * T * Hv;

    float s[n_per_t];
    for (int i = 0; i < n_per_t; ++i) {
        s[i] = static_cast<float>(i_state[n_per_t * lane + i]);
    }
    for (int t = 0; t < T; ++t) {
        const float decay = static_cast<float>(g_[hv_idx]);
        float kv_mem = 0.0f;
        for (int i = 0; i < n_per_t; ++i) {
            s[i] = s[i] * decay;
            kv_mem += s[i] * static_cast<float>(k_[n_per_t * lane + i]);
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            kv_mem += __shfl_xor_sync(0xffffffff, kv_mem, offset);
        }
        const float delta = (static_cast<float>(v_[dv_idx]) - kv_mem) * static_cast<float>(beta_[hv_idx]);
        float out = 0.0f;
        for (int i = 0; i < n_per_t; ++i) {
            s[i] = s[i] + static_cast<float>(k_[n_per_t * lane + i]) * delta;
            out += s[i] * static_cast<float>(q_[n_per_t * lane + i]);
        }
        for (int offset = 16; offset > 0; offset /= 2) {
            out += __shfl_xor_sync(0xffffffff, out, offset);
        }
        if (lane == 0) {
            y_[dv_idx] = static_cast<InT>(out);
        }
        for (int i = 0; i < n_per_t; ++i) {
            states_[n_per_t * lane + i] = static_cast<StT>(s[i]);
        }
        q_ += Hk * Dk;
        k_ += Hk * Dk;
        v_ += Hv * Dv;
        y_ += Hv * Dv;
        states_ += Hv * Dv * Dk;
        g_ += Hv;
        beta_ += Hv;
    }
    for (int i = 0; i < n_per_t; ++i) {
        o_state[n_per_t * lane + i] = static_cast<StT>(s[i]);
    }
"""


@lru_cache(maxsize=1)
def _kernel():
    import mlx.core as mx

    return mx.fast.cuda_kernel(
        name="specchat_gated_delta_with_states",
        input_names=["q", "k", "v", "g", "beta", "state_in"],
        output_names=["y", "state_out", "states"],
        source=SOURCE,
    )


def applies(k, v) -> bool:
    """Whether ``with_states`` serves these heads (CUDA, key heads a multiple of 32 wide, value heads of 4)."""
    return use_cuda_kernel() and k.shape[-1] % 32 == 0 and v.shape[-1] % 4 == 0


def with_states(q, k, v, g, beta, state):
    """(y, final state, state after each position) for a block, from the decay and beta of each position."""
    B, T, Hk, Dk = k.shape
    Hv, Dv = v.shape[-2:]
    return _kernel()(
        inputs=[q, k, v, g, beta, state],
        template=[("InT", q.dtype), ("StT", state.dtype), ("T", T), ("Dk", Dk), ("Dv", Dv), ("Hk", Hk), ("Hv", Hv)],
        grid=(32, Dv, B * Hv),
        threadgroup=(32, 4, 1),
        output_shapes=[(B, T, Hv, Dv), state.shape, (B, T, Hv, Dv, Dk)],
        output_dtypes=[q.dtype, state.dtype, state.dtype],
    )
