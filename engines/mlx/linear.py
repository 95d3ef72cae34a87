"""The matrix products of a step, shaped for the device they run on.

On a CPU a layer over up to three rows computes ``weight @ x.T`` instead of
``x @ weight.T``: the same numbers, but OpenBLAS then streams the weight once on
both cores, where the usual order packs it first. Measured on the
full-acceptance rig, every linear layer together: 10.5 ms for one row instead
of 12.0, 11.3 ms for three instead of 14.4. From four rows on it takes its
general product either way, and the usual order is the cheaper (16.2 ms against
17.8). Elsewhere (Metal, CUDA) and for quantized layers the module runs as it is,
except that on CUDA every quantized product over up to 16 rows runs specchat's
own kernel (quantized_skinny.py): cheaper for a few rows, and the same numbers
for a row whatever the number of rows beside it.

Layers that read the same input (query, key and value; the gated-delta input
projections; gate and up) run as one product over their stacked weights, on
every device: one call instead of two to four, each of which costs a BLAS or
kernel launch's overhead. The layers' own weights become views of the stack, so
no memory is added and mlx-vlm's modules keep working on the same numbers.
Quantized layers are stacked only on CUDA, where the stack runs specchat's kernel.
"""

from __future__ import annotations

import itertools

from . import quantized_skinny, skinny


def _mx():
    import mlx.core as mx

    return mx


STREAMED_ROWS = 3  # up to this many rows the transposed product streams the weight


def _rows(x) -> int:
    return x.size // x.shape[-1]


def _transposed(x) -> bool:
    mx = _mx()
    return mx.default_device() == mx.cpu and _rows(x) <= STREAMED_ROWS


FEW_ROW_KERNEL = True  # CUDA: bfloat16 products over 2-5 rows and quantized ones over 1-16 run specchat's kernels


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


def quantized_product(x, weight, scales, biases, group_size: int, bits: int, mode: str = "affine"):
    """``x @ dequantize(weight).T``: specchat's kernel where it serves, else MLX's quantized product."""
    if FEW_ROW_KERNEL and quantized_skinny.applies(x, weight, scales, biases, group_size, bits, mode):
        return quantized_skinny.product(x, weight, scales, biases, bits)
    return _mx().quantized_matmul(x, weight, scales=scales, biases=biases, transpose=True, group_size=group_size,
                                  bits=bits, mode=mode)


def _quantized_served(layer) -> bool:
    """A quantized layer (linear, or an embedding used as the output projection) that runs here instead of
    as its module: on CUDA only, so that every other device computes exactly what mlx-vlm computes."""
    import mlx.nn as nn

    from .recurrence import use_cuda_kernel

    return type(layer) in (nn.QuantizedLinear, nn.QuantizedEmbedding) and use_cuda_kernel()


def _as_quantized_linear(layer, x):
    return quantized_product(x, layer["weight"], layer["scales"], layer.get("biases"), layer.group_size,
                             layer.bits, layer.mode)


def linear(layer, x):
    """``layer(x)`` for an ``nn.Linear``, or an ``nn.QuantizedLinear`` on CUDA (any other module is called
    as it is)."""
    import mlx.nn as nn

    if type(layer) is nn.Linear:
        out = product(layer.weight, x)
    elif type(layer) is nn.QuantizedLinear and _quantized_served(layer):
        out = _as_quantized_linear(layer, x)
    else:
        return layer(x)
    return out + layer.bias if "bias" in layer else out


class Group:
    """Linear layers that read the same input, called as one; their outputs come back in order."""

    def __init__(self, *layers):
        import mlx.nn as nn

        mx = _mx()
        self.layers = layers
        self.weight, self.splits, self.quantized = None, [], None
        if len(layers) < 2 or any("bias" in layer for layer in layers):
            return
        if all(type(layer) is nn.Linear for layer in layers):
            names = ("weight",)
            if len({(layer.weight.shape[1], layer.weight.dtype) for layer in layers}) != 1:
                return
        elif all(type(layer) is nn.QuantizedLinear and _quantized_served(layer) for layer in layers):
            names = ("weight", "scales", "biases")
            settings = {(layer.weight.shape[1], layer.group_size, layer.bits, layer.mode, layer.scales.dtype,
                         layer.get("biases") is not None) for layer in layers}
            if len(settings) != 1 or layers[0].mode != "affine" or "biases" not in layers[0]:
                return
            self.quantized = (layers[0].group_size, layers[0].bits)
        else:
            return
        stacks = {name: mx.concatenate([layer[name] for layer in layers]) for name in names}
        mx.eval(stacks)
        ends = list(itertools.accumulate(layer.weight.shape[0] for layer in layers))
        for layer, start, end in zip(layers, [0, *ends], ends):
            for name, stack in stacks.items():
                layer[name] = stack[start:end]  # a view: the separate copy is freed
        mx.eval([layer[name] for layer in layers for name in names])
        self.weight, self.scales, self.biases = (stacks.get(name) for name in ("weight", "scales", "biases"))
        self.splits = ends[:-1]

    def __call__(self, x) -> list:
        if self.weight is None:
            return [linear(layer, x) for layer in self.layers]
        if self.quantized is None:
            out = product(self.weight, x)
        else:
            out = quantized_product(x, self.weight, self.scales, self.biases, *self.quantized)
        return _mx().split(out, self.splits, axis=-1)


def mlp_group(module) -> Group | None:
    """The gate and up projections of a gated feed-forward block, or None for any other block."""
    import mlx.nn as nn

    layers = [getattr(module, name, None) for name in ("gate_proj", "up_proj", "down_proj")]
    if not all(type(layer) is nn.Linear or _quantized_served(layer) for layer in layers):
        return None
    return Group(*layers[:2])


def mlp(module, gate_up: Group | None, x):
    """A gated feed-forward block (``gate_up`` from ``mlp_group``), or any other block as it is."""
    from .qwen35 import swiglu

    if gate_up is None:
        return module(x)
    gate, up = gate_up(x)
    return linear(module.down_proj, swiglu(gate, up))


def lm_head(lm, hidden):
    """The LM head over ``hidden``: the tied embedding or the output projection."""
    import mlx.nn as nn

    from .qwen35 import library_logits, tied_embeddings

    embed = lm.model.embed_tokens
    if tied_embeddings(lm):
        if type(embed) is nn.Embedding:
            return product(embed.weight, hidden)
        if type(embed) is nn.QuantizedEmbedding and _quantized_served(embed):
            return _as_quantized_linear(embed, hidden)
        return library_logits(lm, hidden)
    if type(lm.lm_head) is nn.Linear or (type(lm.lm_head) is nn.QuantizedLinear and _quantized_served(lm.lm_head)):
        return linear(lm.lm_head, hidden)
    return library_logits(lm, hidden)
