"""The gated-delta recurrence over a block, with the state after every position.

On Apple GPUs mlx-vlm's Metal kernel does it in one launch; on CUDA a kernel of
the same shape does (cuda/recurrence.py). On a CPU a block of a few
positions is solved as a whole with a handful of small matrix products (the
delta rule's triangular system), whatever its length; a single position runs
mlx-vlm's ops.
"""

from __future__ import annotations

from .cuda import recurrence as cuda_recurrence
from .library import compute_g_beta, gated_delta_update_with_states

BLOCK_FORM_MAX = 16  # the block form's series stays exact in float32 at these lengths


def with_states(q, k, v, a, b, A_log, dt_bias, state):
    """(y, final state, state after each position) for a block; q, k: (B, T, Hk, Dk)."""
    import mlx.core as mx

    T = k.shape[1]
    if mx.default_device() == mx.cpu and 1 < T <= BLOCK_FORM_MAX:
        return block_form(q, k, v, *compute_g_beta(A_log, a, b, dt_bias), state)
    if not cuda_recurrence.applies(k, v):
        return gated_delta_update_with_states(q, k, v, a, b, A_log, dt_bias, state)
    return cuda_recurrence.with_states(q, k, v, *compute_g_beta(A_log, a, b, dt_bias), state)


def block_form(q, k, v, g, beta, state):
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
