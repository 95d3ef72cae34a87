"""The gated-delta recurrence over a block: the CPU's block form against mlx-vlm's own recurrence."""

import pytest

mx = pytest.importorskip("mlx.core")


def _inputs(T, Hk=2, Hv=4, Dk=32, Dv=16, seed=0):
    mx.random.seed(seed)
    q, k = mx.random.normal((1, T, Hk, Dk)), mx.random.normal((1, T, Hk, Dk))
    # As the model feeds them: unit keys, queries scaled by 1/sqrt(Dk).
    q = q / mx.linalg.norm(q, axis=-1, keepdims=True) * Dk**-0.5
    k = k / mx.linalg.norm(k, axis=-1, keepdims=True)
    v = mx.random.normal((1, T, Hv, Dv))
    a, b = mx.random.normal((1, T, Hv)), mx.random.normal((1, T, Hv)) * 3
    A_log, dt_bias = mx.random.normal((Hv,)), mx.random.normal((Hv,))
    state = mx.random.normal((1, Hv, Dv, Dk))
    return q, k, v, a, b, A_log, dt_bias, state


@pytest.mark.parametrize("T", [2, 3, 4, 6, 16])
def test_block_form_equals_the_per_position_recurrence(T):
    from engines.mlx.library import compute_g_beta, gated_delta_update_with_states
    from engines.mlx.recurrence import block_form

    q, k, v, a, b, A_log, dt_bias, state = _inputs(T)
    # mlx-vlm's own recurrence: position by position here (its Metal kernel on a Mac's GPU)
    y, final, states = gated_delta_update_with_states(q, k, v, a, b, A_log, dt_bias, state)
    for want, have in zip((y, final, states), block_form(q, k, v, *compute_g_beta(A_log, a, b, dt_bias), state)):
        assert have.shape == want.shape
        assert mx.abs(have - want).max().item() < 1e-5 * max(1.0, mx.abs(want).max().item())
