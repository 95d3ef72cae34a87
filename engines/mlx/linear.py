"""The matrix products of a step, shaped for the device they run on.

On a CPU a layer over up to three rows computes ``weight @ x.T`` instead of
``x @ weight.T``: the same numbers, but OpenBLAS then streams the weight once on
both cores, where the usual order packs it first. Measured on the
full-acceptance rig, every linear layer together: 10.5 ms for one row instead
of 12.0, 11.3 ms for three instead of 14.4. From four rows on it takes its
general product either way, and the usual order is the cheaper (16.2 ms against
17.8). Elsewhere (Metal, CUDA) and for quantized layers the module runs as it is.

Layers that read the same input (query, key and value; the gated-delta input
projections; gate and up) run as one product over their stacked weights, on
every device: one call instead of two to four, each of which costs a BLAS or
kernel launch's overhead. The layers' own weights become views of the stack, so
no memory is added and mlx-vlm's modules keep working on the same numbers.
"""

from __future__ import annotations

import itertools

from . import skinny


def _mx():
    import mlx.core as mx

    return mx


STREAMED_ROWS = 3  # up to this many rows the transposed product streams the weight


def _rows(x) -> int:
    return x.size // x.shape[-1]


def _transposed(x) -> bool:
    mx = _mx()
    return mx.default_device() == mx.cpu and _rows(x) <= STREAMED_ROWS


FEW_ROW_KERNEL = True  # CUDA: products over 2-5 rows run specchat's kernel (skinny.py)


def _product(weight, x):
    flat = x.reshape(-1, x.shape[-1])
    return (weight @ flat.T).T.reshape(*x.shape[:-1], weight.shape[0])


def product(weight, x):
    """``x @ weight.T``, the cheapest way on this device for this many rows."""
    if _transposed(x):
        return _product(weight, x)
    if FEW_ROW_KERNEL and _rows(x) >= 2 and skinny.applies(x, weight):
        return skinny.skinny(x, weight)
    return x @ weight.T


def linear(layer, x):
    """``layer(x)`` for an ``nn.Linear`` (any other module is called as it is)."""
    import mlx.nn as nn

    if type(layer) is not nn.Linear:
        return layer(x)
    out = product(layer.weight, x)
    return out + layer.bias if "bias" in layer else out


class Group:
    """Linear layers that read the same input, called as one; their outputs come back in order."""

    def __init__(self, *layers):
        import mlx.nn as nn

        mx = _mx()
        self.layers = layers
        self.weight, self.splits = None, []
        if len(layers) < 2 or any(type(layer) is not nn.Linear or "bias" in layer for layer in layers):
            return
        if len({(layer.weight.shape[1], layer.weight.dtype) for layer in layers}) != 1:
            return
        self.weight = mx.concatenate([layer.weight for layer in layers])
        mx.eval(self.weight)
        ends = list(itertools.accumulate(layer.weight.shape[0] for layer in layers))
        for layer, start, end in zip(layers, [0, *ends], ends):
            layer.weight = self.weight[start:end]  # a view: the separate copy is freed
        mx.eval([layer.weight for layer in layers])
        self.splits = ends[:-1]

    def __call__(self, x) -> list:
        if self.weight is None:
            return [linear(layer, x) for layer in self.layers]
        return _mx().split(product(self.weight, x), self.splits, axis=-1)


def mlp_group(module) -> Group | None:
    """The gate and up projections of a gated feed-forward block, or None for any other block."""
    import mlx.nn as nn

    names = ("gate_proj", "up_proj", "down_proj")
    if not all(type(getattr(module, name, None)) is nn.Linear for name in names):
        return None
    return Group(module.gate_proj, module.up_proj)


def mlp(module, gate_up: Group | None, x):
    """A gated feed-forward block (``gate_up`` from ``mlp_group``), or any other block as it is."""
    from mlx_vlm.models.activations import swiglu

    if gate_up is None:
        return module(x)
    gate, up = gate_up(x)
    return linear(module.down_proj, swiglu(gate, up))


def lm_head(lm, hidden):
    """The LM head over ``hidden``: the tied embedding or the output projection."""
    import mlx.nn as nn

    embed = lm.model.embed_tokens
    if lm.args.tie_word_embeddings:
        if type(embed) is nn.Embedding:
            return product(embed.weight, hidden)
        return lm.speculative_logits_from_hidden(hidden)
    if type(lm.lm_head) is nn.Linear:
        return linear(lm.lm_head, hidden)
    return lm.speculative_logits_from_hidden(hidden)
