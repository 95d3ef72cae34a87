"""The matrix products of a step, shaped for the device they run on.

On a CPU a layer over up to three rows computes ``weight @ x.T`` instead of
``x @ weight.T``: the same numbers, but OpenBLAS then streams the weight once on
both cores, where the usual order packs it first. Measured on the
full-acceptance rig, every linear layer together: 10.5 ms for one row instead
of 12.0, 11.3 ms for three instead of 14.4. From four rows on it takes its
general product either way, and the usual order is the cheaper (16.2 ms against
17.8). Elsewhere (Metal, CUDA) the usual order runs. On CUDA every quantized
product over up to 16 rows runs specchat's own kernel (cuda/quantized_skinny.py):
cheaper for a few rows, and the same numbers for a row whatever the number of
rows beside it. Off CUDA a quantized layer is called as its record's ``call``
says: mlx-vlm's verify route, which the seam (qwen35.py) gives it.

Layers that read the same input (query, key and value; the gated-delta input
projections; gate and up) run as one product over their stacked weights, on
every device: one call instead of two to four, each of which costs a BLAS or
kernel launch's overhead. The stack is specchat's own array; the seam
(qwen35.py) makes the layers' own weights views of it, so no memory is added
and mlx-vlm's modules keep working on the same numbers. Quantized layers are
stacked only on CUDA, where the stack runs specchat's kernel.

A layer comes as a ``Linear`` record (its arrays, the layer to call for any
kind specchat does not compute itself, and which of specchat's CUDA kernels it
may run: a ``KernelChoice``, fixed when the seam builds the record), never as
the module.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .cuda import KernelChoice, quantized_mma, quantized_skinny, skinny, use_cuda_kernel
from .library import swiglu


def _mx():
    import mlx.core as mx

    return mx


STREAMED_ROWS = 3  # up to this many rows the transposed product streams the weight


def row_count(x) -> int:
    """How many rows a product over ``x`` computes, whatever its leading shape."""
    return x.size // x.shape[-1]


def _transposed(x) -> bool:
    mx = _mx()
    return mx.default_device() == mx.cpu and row_count(x) <= STREAMED_ROWS


def _product(weight, x):
    flat = x.reshape(-1, x.shape[-1])
    return (weight @ flat.T).T.reshape(*x.shape[:-1], weight.shape[0])


def product(weight, x, kernels: KernelChoice):
    """``x @ weight.T``, the cheapest way on this device for this many rows."""
    if _transposed(x):
        return _product(weight, x)
    if kernels.few_rows and row_count(x) >= 2 and skinny.applies(x, weight):
        return skinny.skinny(x, weight)
    return x @ weight.T


def quantized_product(x, weight, scales, biases, group_size: int, bits: int, mode: str, kernels: KernelChoice):
    """``x @ dequantize(weight).T``: specchat's kernel where it serves, else MLX's quantized product."""
    on_tensor_cores = kernels.few_rows and kernels.tensor_cores
    if on_tensor_cores and quantized_mma.applies(x, weight, scales, biases, group_size, bits, mode):
        return quantized_mma.product(x, weight, scales, biases, group_size, bits)
    if kernels.few_rows and quantized_skinny.applies(x, weight, scales, biases, group_size, bits, mode):
        return quantized_skinny.product(x, weight, scales, biases, bits)
    return _mx().quantized_matmul(x, weight, scales=scales, biases=biases, transpose=True, group_size=group_size,
                                  bits=bits, mode=mode)


@dataclass(frozen=True, eq=False)
class Linear:
    """One linear layer as a step computes it: the arrays of its product when specchat computes it (a float
    layer; an affine-quantized one on CUDA), and ``call``, how its library runs it, for any other."""

    call: Callable
    weight: Any = None  # float (out, in), or a quantized layer's packed codes
    bias: Any = None
    scales: Any = None  # set for a quantized layer
    biases: Any = None
    group_size: int = 0
    bits: int = 0
    mode: str = "affine"
    kernels: KernelChoice = KernelChoice()

    @classmethod
    def of(cls, module, call: Callable | None = None, kernels: KernelChoice = KernelChoice()) -> "Linear":
        """The record of an MLX ``nn.Linear`` or ``nn.QuantizedLinear`` (or an embedding used as the output
        projection, with ``call`` its library's product); any other module is only called."""
        import mlx.nn as nn

        call = call or module
        if type(module) in (nn.Linear, nn.Embedding):
            return cls(call, module["weight"], module.get("bias"), kernels=kernels)
        if type(module) in (nn.QuantizedLinear, nn.QuantizedEmbedding):
            return cls(call, module["weight"], module.get("bias"), module["scales"], module.get("biases"),
                       module.group_size, module.bits, module.mode, kernels)
        return cls(call, kernels=kernels)

    @property
    def out_features(self) -> int | None:
        return None if self.weight is None else self.weight.shape[0]

    @property
    def served(self) -> bool:
        """Whether specchat computes the product: a float layer, or a quantized one on CUDA only, so that every
        other device computes exactly what mlx-vlm computes."""
        return self.weight is not None and (self.scales is None or use_cuda_kernel())

    def __call__(self, x):
        if not self.served:
            return self.call(x)
        if self.scales is None:
            out = product(self.weight, x, self.kernels)
        else:
            out = quantized_product(x, self.weight, self.scales, self.biases, self.group_size, self.bits, self.mode,
                                    self.kernels)
        return out if self.bias is None else out + self.bias


class Group:
    """Linear layers that read the same input, called as one; their outputs come back in order.

    The stack is specchat's own array; ``views`` gives each layer's rows of it."""

    def __init__(self, *layers: Linear):
        mx = _mx()
        self.layers: tuple[Linear, ...] = layers
        self.kernels = layers[0].kernels if layers else KernelChoice()
        self.weight, self.splits, self.quantized = None, [], None
        if len(layers) < 2 or any(layer.bias is not None or not layer.served for layer in layers):
            return
        if all(layer.scales is None for layer in layers):
            names = ("weight",)
            if len({(layer.weight.shape[1], layer.weight.dtype) for layer in layers}) != 1:
                return
        elif all(layer.scales is not None for layer in layers):
            names = ("weight", "scales", "biases")
            settings = {(layer.weight.shape[1], layer.group_size, layer.bits, layer.mode, layer.scales.dtype,
                         layer.biases is not None) for layer in layers}
            if len(settings) != 1 or layers[0].mode != "affine" or layers[0].biases is None:
                return
            self.quantized = (layers[0].group_size, layers[0].bits)
        else:
            return
        stacks = {name: mx.concatenate([getattr(layer, name) for layer in layers]) for name in names}
        mx.eval(stacks)
        self.weight, self.scales, self.biases = (stacks.get(name) for name in ("weight", "scales", "biases"))
        ends = list(itertools.accumulate(layer.out_features for layer in layers))
        self._rows = list(zip([0, *ends], ends))
        self.splits = ends[:-1]
        self.layers = ()  # the stack serves them: holding their arrays too would keep a second copy alive

    def views(self) -> list[dict]:
        """Per layer, its arrays as views of the stack ({name: array}); none when nothing was stacked."""
        if self.weight is None:
            return []
        stacks = {name: getattr(self, name) for name in ("weight", "scales", "biases")
                  if getattr(self, name) is not None}
        return [{name: stack[start:end] for name, stack in stacks.items()} for start, end in self._rows]

    def __call__(self, x) -> list:
        if self.weight is None:
            return [layer(x) for layer in self.layers]
        if self.quantized is None:
            out = product(self.weight, x, self.kernels)
        else:
            out = quantized_product(x, self.weight, self.scales, self.biases, *self.quantized, "affine", self.kernels)
        return _mx().split(out, self.splits, axis=-1)


@dataclass(frozen=True, eq=False)
class FeedForward:
    """A feed-forward block: a gated dense one as gate and up (one product where specchat computes them), then
    down; any other (a sparse one) called as it is."""

    call: Callable
    gate_up: Group | None = None
    down: Linear | None = None

    def __call__(self, x):
        if self.gate_up is None:
            return self.call(x)
        gate, up = self.gate_up(x)
        return self.down(swiglu(gate, up))
