"""The gated-delta recurrence over a block, with the state after every position.

On Apple GPUs mlx-vlm's Metal kernel does it in one launch; on CUDA a kernel of
the same shape does (one launch per layer instead of a handful of small ops per
position, which is what a verify step's time went to). On a CPU a block of a few
positions is solved as a whole with a handful of small matrix products (the
delta rule's triangular system), whatever its length; a single position runs
mlx-vlm's ops.
"""

from __future__ import annotations

from functools import lru_cache

CUDA_SOURCE = """
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
def _cuda_kernel():
    import mlx.core as mx

    return mx.fast.cuda_kernel(
        name="specchat_gated_delta_with_states",
        input_names=["q", "k", "v", "g", "beta", "state_in"],
        output_names=["y", "state_out", "states"],
        source=CUDA_SOURCE,
    )


def use_cuda_kernel() -> bool:
    """MLX runs on a CUDA GPU here, where specchat's own kernels apply."""
    import mlx.core as mx

    return mx.default_device() == mx.gpu and mx.cuda.is_available()


BLOCK_FORM_MAX = 16  # the block form's series stays exact in float32 at these lengths


def with_states(q, k, v, a, b, A_log, dt_bias, state):
    """(y, final state, state after each position) for a block; q, k: (B, T, Hk, Dk)."""
    import mlx.core as mx

    from .qwen35 import compute_g_beta, gated_delta_update_with_states

    B, T, Hk, Dk = k.shape
    Hv, Dv = v.shape[-2:]
    if mx.default_device() == mx.cpu and 1 < T <= BLOCK_FORM_MAX:
        return _block_form(q, k, v, *compute_g_beta(A_log, a, b, dt_bias), state)
    if not use_cuda_kernel() or Dk % 32 or Dv % 4:
        return gated_delta_update_with_states(q, k, v, a, b, A_log, dt_bias, state)
    g, beta = compute_g_beta(A_log, a, b, dt_bias)
    return _cuda_kernel()(
        inputs=[q, k, v, g, beta, state],
        template=[("InT", q.dtype), ("StT", state.dtype), ("T", T), ("Dk", Dk), ("Dv", Dv), ("Hk", Hk), ("Hv", Hv)],
        grid=(32, Dv, B * Hv),
        threadgroup=(32, 4, 1),
        output_shapes=[(B, T, Hv, Dv), state.shape, (B, T, Hv, Dv, Dk)],
        output_dtypes=[q.dtype, state.dtype, state.dtype],
    )


def _block_form(q, k, v, g, beta, state):
    """The recurrence over T positions at once (mlx-vlm's state layout: (B, Hv, Dv, Dk)).

    Per position t: S_t = g_t S_{t-1} + d_t k_t^T with d_t = beta_t (v_t - g_t S_{t-1} k_t).
    Unrolled with the decay D[t, i] = g_{i+1} ... g_t, the d's solve a unit lower-triangular
    system (I - N) d = beta (v - gamma S_0 k), N nilpotent, so d = (I + N)(I + N^2)(I + N^4)...
    applied to the right-hand side; then every S_t and y_t = S_t q_t are products with D.
    """
    import mlx.core as mx

    B, T, Hk, Dk = k.shape
    Hv = v.shape[-2]
    if Hv > Hk:
        q, k = mx.repeat(q, Hv // Hk, -2), mx.repeat(k, Hv // Hk, -2)
    f32 = mx.float32
    Q, K, V = (t.astype(f32).transpose(0, 2, 1, 3) for t in (q, k, v))  # (B, Hv, T, D)
    cum = mx.cumsum(mx.log(g.astype(f32)).transpose(0, 2, 1), axis=-1)  # (B, Hv, T)
    beta = beta.astype(f32).transpose(0, 2, 1)[..., None]
    S0 = state.astype(f32)
    lower = mx.tril(mx.ones((T, T), dtype=mx.bool_))
    decay = mx.exp(mx.where(lower, cum[..., :, None] - cum[..., None, :], -mx.inf))  # D[t, i], i <= t
    gamma = mx.exp(cum)[..., None]
    strict = mx.tril(mx.ones((T, T), dtype=mx.bool_), -1)
    N = mx.where(strict, -(beta * decay * (K @ K.swapaxes(-1, -2))), 0.0)
    d = beta * (V - gamma * (K @ S0.swapaxes(-1, -2)))
    power, span = N, 1
    while span < T:
        d = d + power @ d
        span *= 2
        if span < T:
            power = power @ power
    weighted = decay[..., :, :, None] * d[..., None, :, :]  # (B, Hv, t, i, Dv)
    states = gamma[..., None] * S0[:, :, None] + weighted.swapaxes(-1, -2) @ K[:, :, None]
    y = gamma * (Q @ S0.swapaxes(-1, -2)) + (decay * (Q @ K.swapaxes(-1, -2))) @ d
    states = states.transpose(0, 2, 1, 3, 4).astype(state.dtype)
    return y.transpose(0, 2, 1, 3).astype(v.dtype), states[:, -1], states
