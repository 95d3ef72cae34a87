"""The matrix products of a step, shaped for the device they run on.

On a CPU a layer over up to three rows computes ``weight @ x.T`` instead of
``x @ weight.T``: the same numbers, but OpenBLAS then streams the weight once on
both cores, where the usual order packs it first. Measured on the
full-acceptance rig, every linear layer together: 10.5 ms for one row instead
of 12.0, 11.3 ms for three instead of 14.4. From four rows on it takes its
general product either way, and the usual order is the cheaper (16.2 ms against
17.8). Elsewhere (Metal, CUDA) and for quantized layers the module runs as it is.
"""

from __future__ import annotations


def _mx():
    import mlx.core as mx

    return mx


STREAMED_ROWS = 3  # up to this many rows the transposed product streams the weight


def _transposed(x) -> bool:
    mx = _mx()
    return mx.default_device() == mx.cpu and x.size // x.shape[-1] <= STREAMED_ROWS


def _product(weight, x):
    flat = x.reshape(-1, x.shape[-1])
    return (weight @ flat.T).T.reshape(*x.shape[:-1], weight.shape[0])


def linear(layer, x):
    """``layer(x)`` for an ``nn.Linear`` (any other module is called as it is)."""
    import mlx.nn as nn

    if type(layer) is not nn.Linear or not _transposed(x):
        return layer(x)
    out = _product(layer.weight, x)
    return out + layer.bias if "bias" in layer else out


def mlp(module, x):
    """A gated feed-forward block (gate, up, down projections), or any other block as it is."""
    import mlx.nn as nn
    from mlx_vlm.models.activations import swiglu

    if not all(type(getattr(module, name, None)) is nn.Linear for name in ("gate_proj", "up_proj", "down_proj")):
        return module(x)

    return linear(module.down_proj, swiglu(linear(module.gate_proj, x), linear(module.up_proj, x)))


def lm_head(lm, hidden):
    """The LM head over ``hidden``: the tied embedding or the output projection."""
    import mlx.nn as nn

    embed = lm.model.embed_tokens
    if lm.args.tie_word_embeddings:
        if type(embed) is nn.Embedding and _transposed(hidden):
            return _product(embed.weight, hidden)
        return lm.speculative_logits_from_hidden(hidden)
    if type(lm.lm_head) is nn.Linear:
        return linear(lm.lm_head, hidden)
    return lm.speculative_logits_from_hidden(hidden)
