"""The one place that reads mlx-vlm's internals: the Qwen 3.5 modules, the prompt cache's bookkeeping and the
MTP drafter's; the functions the own loop calls (the gated-delta helpers, ``swiglu``) come by name through
library.py.

mlx-vlm documents none of these, so a release may rename any of them. ``body`` and ``mtp_head`` copy what
specchat's own loop needs from the modules into its own structures (parts.py: per layer, the arrays, sizes
and callables a step reads) once, at load, checking names and shapes; the steps read nothing else. ``check``
runs once at load: it resolves every internal, builds the own loop and holds one forward of it to mlx-vlm's
own forward on a few tokens. When anything is missing, of another shape or computes something else, the
engine runs mlx-vlm's own loop instead and says why (engine.py), rather than failing to load.
``tests/test_seam.py`` resolves each name in CI.

The one change to mlx-vlm's modules: layers that read the same input run as one product over a stack of their
weights, and each such layer's own weight becomes a view of its rows of the stack (``_grouped``). The values,
shapes and dtypes are the same, so mlx-vlm's loop computes what it did (a test holds every parameter and its
output to that), and no memory is added. Leaving the modules' arrays alone would keep a second copy of those
weights (65% of the demo model's, 67% of the 4.1B rig's): MLX cannot make one array over several others'
memory, so the stack cannot be a view of them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from . import library
from .cuda import KernelChoice
from .cuda.quantized_skinny import MAX_ROWS
# Unavailable and library_version: the engine reads why the own loop cannot run, and on which mlx-vlm, from here
from .library import Unavailable, function, library_version
from .linear import FeedForward, Group, Linear, row_count
from .parts import Attention, Body, GatedDelta, Layer, MtpHead, Rotary, Vision

READ_FROM = "0.7.10"  # the mlx-vlm release these internals were read from (pyproject.toml pins it)
CHECK_TEXT = "The quick brown fox"  # the few tokens ``check`` runs both forwards on
CHECK_TOLERANCE = 0.05  # of the largest logit: rounding passes, a different computation does not

# Members of mlx-vlm's objects read here, by the class that holds them (checked on a real model by the tests).
LINEAR_ATTENTION = ("_normalize_qk", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "conv1d", "out_proj",
                    "norm", "A_log", "dt_bias", "head_v_dim", "head_k_dim", "num_k_heads", "num_v_heads",
                    "key_dim", "conv_dim", "conv_kernel_size")
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm", "rotary_emb", "num_attention_heads",
             "num_key_value_heads", "head_dim", "scale")
ROTARY = ("apply_rotary", "dim")
DECODER_LAYER = ("is_linear", "input_layernorm", "post_attention_layernorm", "mlp")
LANGUAGE_MODEL = ("args", "model", "speculative_logits_from_hidden")
VISION = ("vision_tower", "config")  # on the model: the tower (None when its weights were left out) and config
VISION_LANGUAGE_MODEL = ("get_rope_index",)  # the M-RoPE rule: image tokens' 3-D positions, the rope delta
MTP_HEAD = ("layers", "fc", "pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm", "_forward_hidden")


def forward_hidden(drafter, embed, hidden, cache, positions):
    """The MTP head's hidden states over (embedding of token i+1, target hidden at i) pairs."""
    return drafter._forward_hidden(embed, hidden, cache, positions)


def drafter_rounds(drafter) -> list[tuple[int, int]]:
    """(accepted, drafted) per round of mlx-vlm's loop since its last reset; none when the drafter keeps no
    such lists (mlx-vlm's own summary reads them the same way, as optional)."""
    accepted = getattr(drafter, "accept_lens", None) or []
    drafted = getattr(drafter, "draft_lens", None) or []
    return [(int(a), int(d)) for a, d in zip(accepted, drafted)]


def exact_cache_entries(apc) -> int:
    """Entries the prefix cache keeps whole, beside its block pool (0 where it keeps none)."""
    return len(getattr(apc, "_exact_cache", None) or ())


def cached_ids(state) -> list[int]:
    """The token ids a ``PromptCacheState`` says its cache holds."""
    return list(state.token_ids or [])


def keep_cached_ids(state, count: int) -> None:
    """Make a ``PromptCacheState`` claim only its first ``count`` ids, those its cache has processed."""
    state.token_ids = cached_ids(state)[:count]


def cached_positions(state) -> int | None:
    """How many positions a ``PromptCacheState``'s cache has processed: its attention layers' offset, or None
    when no layer says (then nothing tells whether its ``token_ids`` match the cache)."""
    offsets = [getattr(c, "offset", None) for c in getattr(state, "cache", None) or []]
    return max((o for o in offsets if isinstance(o, int)), default=None)


def _members(obj, names, where: str) -> None:
    missing = [name for name in names if not hasattr(obj, name)]
    if missing:
        raise Unavailable(f"{where} has no {', '.join(missing)}")


def check_members(model, drafter=None) -> None:
    """Every member of mlx-vlm's modules that the own loop reads is there."""
    lm = getattr(model, "language_model", model)
    _members(lm, LANGUAGE_MODEL, "the language model")
    _members(lm.args, ("tie_word_embeddings",), "the language model's args")
    if not lm.args.tie_word_embeddings:
        _members(lm, ("lm_head",), "the language model")
    _members(lm.model, ("layers", "embed_tokens", "norm"), "the language model's body")
    for i, layer in enumerate(lm.model.layers):
        _members(layer, DECODER_LAYER, f"layer {i}")
        if layer.is_linear:
            _members(layer.linear_attn, LINEAR_ATTENTION, f"layer {i}'s linear attention")
        else:
            _members(layer.self_attn, ATTENTION, f"layer {i}'s attention")
            _members(layer.self_attn.rotary_emb, ROTARY, f"layer {i}'s rotary embedding")
    if drafter is not None:
        _members(drafter, MTP_HEAD, "the MTP head")
        for i, layer in enumerate(drafter.layers):
            _members(layer, ("self_attn", "input_layernorm", "post_attention_layernorm", "mlp"),
                     f"the MTP head's layer {i}")
            _members(layer.self_attn, ATTENTION, f"the MTP head's layer {i}'s attention")
            _members(layer.self_attn.rotary_emb, ROTARY, f"the MTP head's layer {i}'s rotary embedding")


def check(decoder_factory, model, drafter, ids: list[int]):
    """The own loop on this model, built by ``decoder_factory(model, drafter)`` and checked; raises
    ``Unavailable`` with the reason when it cannot run here.

    Checked: the functions resolve, the modules have their members of the shapes the steps assume, the own
    loop's forward over ``ids`` gives mlx-vlm's last-position logits within rounding, and the head drafts
    tokens of the right shape."""
    import mlx.core as mx

    from .sampling import Sampling

    for module, name in library.FUNCTIONS:
        function(module, name)
    check_members(model, drafter)
    try:
        lm = getattr(model, "language_model", model)
        # mlx-vlm's forward before the own loop is built, so that the two are computed apart
        theirs = lm(mx.array([ids])).logits[:, -1].astype(mx.float32).reshape(-1)
        mx.eval(theirs)
        decoder = decoder_factory(model, drafter)
        state = decoder.new_state()
        target = decoder.target
        hidden = target.prefill(state.target, ids, 0)
        ours = target.head(hidden[:, -1:]).astype(mx.float32).reshape(-1)
        if ours.shape != theirs.shape:
            raise Unavailable(f"the own loop's logits have shape {ours.shape}, mlx-vlm's {theirs.shape}")
        gap, scale = mx.abs(ours - theirs).max().item(), mx.abs(theirs).max().item()
        if not gap <= CHECK_TOLERANCE * max(scale, 1.0):
            raise Unavailable(f"the own loop's forward differs from mlx-vlm's (largest logit difference "
                              f"{gap:.3g}, logits up to {scale:.3g})")
        if decoder.drafter is not None:
            state.ids = list(ids)
            pairs = mx.array([ids[1:] + [int(mx.argmax(ours).item())]], dtype=mx.int32)
            decoder.drafter.accept(state.drafter, 0, pairs[:, -hidden.shape[1]:], hidden, Sampling())
            drafts, _ = decoder.drafter.draft(state.drafter, 3, Sampling())
            if tuple(drafts.shape) != (1, 2):
                raise Unavailable(f"the MTP head drafted a block of shape {tuple(drafts.shape)}, not (1, 2)")
    except Unavailable:
        raise
    except Exception as exc:  # a renamed member, a changed shape or signature: all mean the same here
        raise Unavailable(f"{type(exc).__name__}: {exc}") from None
    return decoder


def body(model, kernels: KernelChoice = KernelChoice()) -> Body:
    """The target model's parts, as the own loop's steps read them, running ``kernels``."""
    lm = getattr(model, "language_model", model)
    inner = lm.model
    output = inner.embed_tokens if lm.args.tie_word_embeddings else lm.lm_head
    return Body(embed=inner.embed_tokens, layers=tuple(_layer(layer, f"layer {i}", kernels) for i, layer in
                                                       enumerate(inner.layers)),
                norm=inner.norm, head=Linear.of(output, call=lm.speculative_logits_from_hidden, kernels=kernels),
                dtype=activation_dtype(lm), embed_scale=float(getattr(inner, "embed_scale", 1.0)))


def vision(model) -> Vision | None:
    """The model's vision tower and position rule, as mlx-vlm's Qwen 3.5 prefill calls them
    (``get_input_embeddings``); None for a model without a tower."""
    tower = getattr(model, "vision_tower", None)
    if tower is None:
        return None
    _members(model, VISION, "the model")
    lm = model.language_model
    _members(lm, VISION_LANGUAGE_MODEL, "the language model")
    dtype = tower.patch_embed.proj.weight.dtype

    def encode(pixel_values, grid_thw):
        return tower(pixel_values.astype(dtype), grid_thw)[0]

    return Vision(encode=encode, rope_index=lambda ids, grid_thw: lm.get_rope_index(ids, grid_thw),
                  image_token=int(model.config.image_token_id))


def mtp_head(drafter, kernels: KernelChoice = KernelChoice()) -> MtpHead:
    """The MTP head's parts (mlx-vlm's Qwen3_5MTPDraftModel), running ``kernels``."""
    layers = tuple(Layer(layer.input_layernorm, _attention(layer.self_attn, f"the MTP head's layer {i}", kernels),
                         layer.post_attention_layernorm, _feed_forward(layer.mlp, kernels))
                   for i, layer in enumerate(drafter.layers))
    return MtpHead(fc=_linear(drafter.fc, kernels), embedding_norm=drafter.pre_fc_norm_embedding,
                   hidden_norm=drafter.pre_fc_norm_hidden, layers=layers, norm=drafter.norm)


def _layer(layer, where: str, kernels: KernelChoice) -> Layer:
    if layer.is_linear:
        mixer = _gated_delta(layer.linear_attn, f"{where}'s linear attention", kernels)
    else:
        mixer = _attention(layer.self_attn, f"{where}'s attention", kernels)
    return Layer(layer.input_layernorm, mixer, layer.post_attention_layernorm, _feed_forward(layer.mlp, kernels))


def _shapes(where: str, found: dict, expected: dict) -> None:
    wrong = [f"{name} {found[name]} (expected {want})" for name, want in expected.items()
             if found[name] is not None and found[name] != want]
    if wrong:
        raise Unavailable(f"{where} has {', '.join(wrong)}")


def _attention(attn, where: str, kernels: KernelChoice) -> Attention:
    heads, kv_heads, head_dim = attn.num_attention_heads, attn.num_key_value_heads, attn.head_dim
    projections = (attn.q_proj, attn.k_proj, attn.v_proj)
    # the query projection carries the output gate beside the queries
    _shapes(where, {name: Linear.of(p).out_features for name, p in zip(("q_proj", "k_proj", "v_proj"), projections)},
            {"q_proj": 2 * heads * head_dim, "k_proj": kv_heads * head_dim, "v_proj": kv_heads * head_dim})
    rotary = attn.rotary_emb
    return Attention(qkv=_grouped(projections, kernels), o_proj=_linear(attn.o_proj, kernels), q_norm=attn.q_norm,
                     k_norm=attn.k_norm, rotary=Rotary(rotary.apply_rotary, rotary.dim, rope_periods(rotary)),
                     heads=heads, kv_heads=kv_heads, head_dim=head_dim, scale=attn.scale)


def _gated_delta(la, where: str, kernels: KernelChoice) -> GatedDelta:
    key_dim, value_dim = la.num_k_heads * la.head_k_dim, la.num_v_heads * la.head_v_dim
    projections = (la.in_proj_qkv, la.in_proj_z, la.in_proj_b, la.in_proj_a)
    found = {name: Linear.of(p).out_features for name, p in zip(("in_proj_qkv", "in_proj_z", "in_proj_b",
                                                                 "in_proj_a"), projections)}
    found.update(key_dim=la.key_dim, conv_dim=la.conv_dim, conv1d=tuple(la.conv1d.weight.shape),
                 A_log=tuple(la.A_log.shape), dt_bias=tuple(la.dt_bias.shape))
    conv_dim = 2 * key_dim + value_dim
    _shapes(where, found, {"in_proj_qkv": conv_dim, "in_proj_z": value_dim, "in_proj_b": la.num_v_heads,
                           "in_proj_a": la.num_v_heads, "key_dim": key_dim, "conv_dim": conv_dim,
                           "conv1d": (conv_dim, la.conv_kernel_size, 1), "A_log": (la.num_v_heads,),
                           "dt_bias": (la.num_v_heads,)})
    return GatedDelta(inputs=_grouped(projections, kernels), out_proj=_linear(la.out_proj, kernels),
                      conv_weight=la.conv1d.weight, norm=la.norm, normalize_qk=la._normalize_qk, A_log=la.A_log,
                      dt_bias=la.dt_bias, k_heads=la.num_k_heads, v_heads=la.num_v_heads, k_dim=la.head_k_dim,
                      v_dim=la.head_v_dim, key_dim=key_dim, conv_dim=conv_dim, conv_kernel=la.conv_kernel_size)


def _feed_forward(mlp, kernels: KernelChoice) -> FeedForward:
    """A gated dense block as gate and up (in one product where specchat computes them), then down; any other (a
    sparse one) as it is."""
    gate, up, down = (getattr(mlp, name, None) for name in ("gate_proj", "up_proj", "down_proj"))
    if any(p is None for p in (gate, up, down)):
        return FeedForward(mlp)
    return FeedForward(mlp, _grouped((gate, up), kernels), _linear(down, kernels))


def _linear(module, kernels: KernelChoice) -> Linear:
    """A linear layer's record; a quantized layer that specchat does not compute (off CUDA) is called through
    mlx-vlm's verify route for a verify's few rows (``VerifyRoute``)."""
    import mlx.nn as nn

    record = Linear.of(module, kernels=kernels)
    if type(module) is not nn.QuantizedLinear or record.served:
        return record
    return replace(record, call=VerifyRoute(module, library.verify_linear()))


@dataclass(frozen=True, eq=False)
class VerifyRoute:
    """A quantized layer called through mlx-vlm's verify route over up to ``MAX_ROWS`` rows, and as itself over
    more. On Metal the route's kernels give each of a few rows the numbers of its one-row product, so a verify
    cannot round a near-tie differently from the plain step; they are built per number of rows and for a few, so
    a prompt's chunks (up to thousands of rows) take the layer's own product. On a CPU, and for one row, the
    route calls the layer as it is."""

    module: object
    route: Callable

    def __call__(self, x):
        if row_count(x) <= MAX_ROWS:
            return self.route(self.module, x)
        return self.module(x)


def _grouped(modules: tuple, kernels: KernelChoice) -> Group:
    """One product over layers that read the same input. Each layer's own arrays become views of its rows of
    the stack: the same numbers, so mlx-vlm's loop computes what it did, and the separate copies are freed."""
    import mlx.core as mx

    group = Group(*(_linear(module, kernels) for module in modules))
    for module, views in zip(modules, group.views()):
        module.update(views)
    mx.eval([module.parameters() for module in modules])
    return group


def activation_dtype(lm):
    """The dtype the checkpoint computes in, which its caches then hold: what its embedding returns (a
    quantized one returns its scales' dtype), else its final norm's weight (never quantized), else the
    config's ``torch_dtype``/``dtype``. A cache in another dtype rounds every key and value it stores,
    and the output drifts from mlx-vlm's own from the first token on some prompts."""
    import mlx.core as mx

    floats = (mx.float32, mx.float16, mx.bfloat16)
    embed, args = lm.model.embed_tokens, getattr(lm, "args", None)
    named = (getattr(args, "torch_dtype", None) or getattr(args, "dtype", None)) if args is not None else None
    norm = getattr(lm.model.norm, "weight", None)
    for tensor in (getattr(embed, "weight", None), getattr(embed, "scales", None), norm):
        if tensor is not None and tensor.dtype in floats:
            return tensor.dtype
    return getattr(mx, named) if isinstance(named, str) and getattr(mx, named, None) in floats else mx.bfloat16


def rope_periods(rotary):
    """The periods (1 / inverse frequency) to rotate text with one fused kernel, or None to use the module.

    A text run's positions are the same in every MRoPE section, which makes MRoPE plain rotary
    embedding over the first ``rotary.dim`` features, halves paired; mlx-vlm's own path builds the
    cosines and sines from the position ids in a dozen small operations per attention layer (on an
    H200, a 4.1B head's attention block took 0.42 ms with them, 0.36 ms fused). The values are the same
    (a test compares them; bit for bit in bfloat16)."""
    import mlx.core as mx

    plain = (getattr(rotary, "pairing", None) == "half_split" and getattr(rotary, "attention_scaling", None) == 1.0
             and getattr(rotary, "inv_freq", None) is not None)
    if not plain:
        return None
    periods = 1.0 / rotary.inv_freq.astype(mx.float32)
    mx.eval(periods)
    return periods


def quantized_body_layer(model):
    """The first quantized linear layer of the target's body (whose product cost verify_cost.py times), or None."""
    import mlx.nn as nn

    lm = getattr(model, "language_model", model)
    for layer in getattr(getattr(lm, "model", None), "layers", None) or []:
        for _, module in layer.named_modules():
            if type(module) is nn.QuantizedLinear:
                return module
    return None
