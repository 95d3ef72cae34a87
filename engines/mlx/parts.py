"""specchat's own copy of what its steps read from a Qwen 3.5 model: per layer, the arrays, sizes and callables a
step needs.

engines/mlx/qwen35.py fills these once, at load, from mlx-vlm's modules, and checks them; the steps
(stepper.py) read nothing else of the model. The callables (norms, the rotary embedding, the embedding) are
the model's own, called as mlx-vlm calls them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .linear import FeedForward, Group, Linear


@dataclass(frozen=True, eq=False)
class Rotary:
    apply: Callable  # (queries, keys, position_ids) -> rotated, heads first: the model's own embedding
    dims: int  # the leading features it rotates
    periods: Any = None  # 1 / inverse frequency for one fused kernel (plain text rotation), else None: ``apply``


@dataclass(frozen=True, eq=False)
class Attention:
    qkv: Group  # query (with its output gate), key and value projections
    o_proj: Linear
    q_norm: Callable
    k_norm: Callable
    rotary: Rotary
    heads: int
    kv_heads: int
    head_dim: int
    scale: float


@dataclass(frozen=True, eq=False)
class GatedDelta:
    """A linear-attention (gated delta rule) block."""

    inputs: Group  # the mixed q/k/v, z, b and a projections
    out_proj: Linear
    conv_weight: Any  # (conv_dim, kernel, 1): the causal depthwise convolution
    norm: Callable  # (y, z) -> gated norm
    normalize_qk: Callable  # (q, k) -> (q, k)
    A_log: Any
    dt_bias: Any
    k_heads: int
    v_heads: int
    k_dim: int  # per head
    v_dim: int
    key_dim: int  # k_heads * k_dim
    conv_dim: int
    conv_kernel: int


@dataclass(frozen=True, eq=False)
class Layer:
    input_norm: Callable
    mixer: Attention | GatedDelta
    post_norm: Callable
    mlp: FeedForward

    @property
    def is_linear(self) -> bool:
        """A linear-attention layer, whose cache is a recurrent state instead of keys and values."""
        return isinstance(self.mixer, GatedDelta)


@dataclass(frozen=True, eq=False)
class Body:
    """The target model."""

    embed: Callable  # token ids -> embeddings
    layers: tuple[Layer, ...]
    norm: Callable
    head: Linear  # final-norm hidden states -> logits
    dtype: Any  # the dtype the checkpoint computes in, which the caches hold
    embed_scale: float  # the MTP head reads the embeddings times this


@dataclass(frozen=True, eq=False)
class MtpHead:
    """The MTP drafter: (embedding of token i+1, target hidden at i) -> hidden for token i+2."""

    fc: Linear
    embedding_norm: Callable
    hidden_norm: Callable
    layers: tuple[Layer, ...]
    norm: Callable


@dataclass(frozen=True, eq=False)
class Vision:
    """What the own loop needs to feed images: the model's own vision tower and M-RoPE position rule."""

    encode: Callable  # (pixel values, grid_thw (n, 3)) -> features (placeholder tokens, D), in image order
    rope_index: Callable  # (ids (1, L), grid_thw of every image in ids) -> (positions (3, 1, L), rope delta (1, 1))
    image_token: int  # the placeholder id each feature replaces
