"""The one place that reads mlx-vlm's internals: the Qwen 3.5 modules, the gated-delta helpers, the prompt
cache's bookkeeping and the MTP drafter's.

mlx-vlm documents none of these, so a release may rename any of them. Everything specchat's own loop reads
from the library goes through a name here, and ``check`` runs it once at load: it resolves every internal,
builds the own loop on the model (its steppers read the modules' layers, heads, norms and projections) and
holds one forward of the own loop to mlx-vlm's own forward on a few tokens. When anything is missing, of
another shape or computes something else, the engine runs mlx-vlm's own loop instead and says why
(engine.py), rather than failing to load. ``tests/test_dependency_internals.py`` resolves each name in CI.
"""

from __future__ import annotations

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

READ_FROM = "0.7.10"  # the mlx-vlm release these internals were read from (pyproject.toml pins it)
CHECK_TEXT = "The quick brown fox"  # the few tokens ``check`` runs both forwards on
CHECK_TOLERANCE = 0.05  # of the largest logit: rounding passes, a different computation does not

# (module, attribute) of every function the own loop calls from mlx-vlm.
FUNCTIONS = (
    ("mlx_vlm.models.qwen3_5.gated_delta", "gated_delta_update"),
    ("mlx_vlm.models.qwen3_5.gated_delta", "gated_delta_update_with_states"),
    ("mlx_vlm.models.qwen3_5.gated_delta", "_compute_g_beta"),
    ("mlx_vlm.models.activations", "swiglu"),
)
# Members of mlx-vlm's objects read here, by the class that holds them (checked on a real model by the tests).
LINEAR_ATTENTION = ("_normalize_qk", "in_proj_qkv", "in_proj_z", "in_proj_b", "in_proj_a", "conv1d", "out_proj",
                    "norm", "A_log", "dt_bias", "head_v_dim", "head_k_dim", "num_k_heads", "num_v_heads",
                    "key_dim", "conv_dim", "conv_kernel_size")
ATTENTION = ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm", "rotary_emb", "num_attention_heads",
             "num_key_value_heads", "head_dim", "scale")
ROTARY = ("apply_rotary", "dim")
DECODER_LAYER = ("is_linear", "input_layernorm", "post_attention_layernorm", "mlp")
LANGUAGE_MODEL = ("args", "model", "speculative_logits_from_hidden")
MTP_HEAD = ("layers", "fc", "pre_fc_norm_embedding", "pre_fc_norm_hidden", "norm", "_forward_hidden")


class Unavailable(Exception):
    """The own loop cannot run on this mlx-vlm: the message says what is missing or differs."""


def library_version() -> str:
    try:
        return version("mlx-vlm")
    except PackageNotFoundError:
        return "(not installed)"


def function(module: str, name: str):
    try:
        return getattr(import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise Unavailable(f"{module}.{name} is gone ({exc})") from None


def gated_delta_update(*args, **kwargs):
    return function("mlx_vlm.models.qwen3_5.gated_delta", "gated_delta_update")(*args, **kwargs)


def gated_delta_update_with_states(*args):
    return function("mlx_vlm.models.qwen3_5.gated_delta", "gated_delta_update_with_states")(*args)


def compute_g_beta(A_log, a, b, dt_bias):
    """(decay, beta) of the gated-delta rule for each position, as mlx-vlm computes them."""
    return function("mlx_vlm.models.qwen3_5.gated_delta", "_compute_g_beta")(A_log, a, b, dt_bias)


def swiglu(gate, up):
    return function("mlx_vlm.models.activations", "swiglu")(gate, up)


def normalize_qk(linear_attention, q, k):
    """The gated-delta layer's own normalisation of queries and keys."""
    return linear_attention._normalize_qk(q, k)


def tied_embeddings(lm) -> bool:
    return bool(lm.args.tie_word_embeddings)


def library_logits(lm, hidden):
    """The LM head over final-norm hidden states, as mlx-vlm's speculative path computes it."""
    return lm.speculative_logits_from_hidden(hidden)


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


def check(decoder_factory, model, drafter, ids: list[int]):
    """The own loop on this model, built by ``decoder_factory(model, drafter)`` and checked; raises
    ``Unavailable`` with the reason when it cannot run here.

    Checked: the functions resolve, the modules have their members, the own loop's forward over ``ids``
    gives mlx-vlm's last-position logits within rounding, and the head drafts tokens of the right shape."""
    import mlx.core as mx

    from .sampling import Sampling

    for module, name in FUNCTIONS:
        function(module, name)
    check_members(model, drafter)
    try:
        decoder = decoder_factory(model, drafter)
        state = decoder.new_state()
        target = decoder.target
        hidden = target.prefill(state.target, ids, 0)
        ours = target.head(hidden[:, -1:]).astype(mx.float32).reshape(-1)
        lm = getattr(model, "language_model", model)
        theirs = lm(mx.array([ids])).logits[:, -1].astype(mx.float32).reshape(-1)
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
