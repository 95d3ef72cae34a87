"""A full-acceptance rig: a random-weight Qwen 3.5 checkpoint whose MTP head always agrees with the body.

Every output projection that writes into the residual stream (attention ``o_proj``, gated-delta
``linear_attn.out_proj``, MLP ``down_proj``) is zero, in the body and in the head, so each layer
still does all its work but adds nothing: the body's final hidden state is ``norm(embed(t))`` for
the last token t. The head's ``fc`` is ``[I | 0]``: it passes its normalised token embedding through
and ignores the body's hidden state, and its layer adds nothing either, so it ends on the same
direction. The norms on those paths have uniform weights (a loader's +1 shift keeps them uniform),
so body and head see the same logits up to a positive factor. The untied LM head maps each word
token to its successor on one long cycle through the vocabulary's words, with a margin of about
sqrt(hidden) standard deviations, so the argmax agrees in bfloat16 too: every draft is accepted,
and the output reads as a stream of distinct words. Every matrix has a real model's shape, so a
step costs what a step of a model that shape costs.

With ``--acceptance P`` the head agrees with the body on a share P of the words only: its ``fc`` passes the
embedding through a noisy identity, ``I + σ·N`` (N a fixed standard normal matrix, σ found by bisection so that
the head's next word equals the body's for a share P of all words, computed exactly over the vocabulary). Which
words disagree is fixed, and the body's output walks the words evenly, so each drafted token is accepted with
probability about P whatever the depth: the k-th draft of a round with about P^k, as a head whose conditional
acceptance does not decay. The body is untouched: greedy output is the same as with a head that always agrees.

With ``--vision`` the rig can see: a small vision tower shaped as Qwen 3.5's (patches of 16 pixels merged 2×2)
and the image processor's config with Qwen's own resizing bounds (a 1024×1024 image becomes 961 tokens). An
image changes no drafted token (every layer still adds nothing), so it measures what an image's tokens cost
the prefill and each step after it.

    python -m demo_model.rig OUT --size cpu|100m|717m|4b [--acceptance P] [--vision]
"""

from __future__ import annotations

import argparse
import json
import math
import random
from dataclasses import dataclass
from pathlib import Path

from .architecture import rig_shape, text_config
from .checkpoint_files import (
    SPECIAL_TOKENS, checkpoint_config, fresh_folder, random_parameters, save_checkpoint,
)
from .tiny import build_tokenizer, word_mask

# Output projections into the residual stream: zero, so no layer changes the token's embedding.
ZEROED = (".self_attn.o_proj.weight", ".linear_attn.out_proj.weight", ".mlp.down_proj.weight")
UNIFORM_NORMS = ("language_model.model.norm.weight", "mtp.pre_fc_norm_embedding.weight", "mtp.norm.weight")
EMBED = "language_model.model.embed_tokens.weight"
LM_HEAD = "language_model.lm_head.weight"


@dataclass(frozen=True)
class Shape:
    hidden: int
    layers: int
    intermediate: int
    vocab: int
    dtype: str


# The parameter counts (body, embeddings and LM head included) of the checkpoints measured on a GPU
# before: 100M, 717M and 4.1B; ``cpu`` is a deep, narrow shape a 2-core CPU decodes at ~100 tok/s.
SIZES = {
    "cpu": Shape(hidden=384, layers=12, intermediate=1152, vocab=8192, dtype="float32"),
    "100m": Shape(hidden=1024, layers=8, intermediate=2048, vocab=8192, dtype="float32"),
    "717m": Shape(hidden=2048, layers=16, intermediate=4096, vocab=13056, dtype="bfloat16"),
    "4b": Shape(hidden=4096, layers=24, intermediate=8192, vocab=14336, dtype="bfloat16"),
}


# The tower: small (a few layers), in Qwen 3.5's patching; the processor: Qwen3-VL's, with the bounds a checkpoint
# without its own take (56² pixels to about a megapixel, one token per 32×32 pixels).
VISION_TOWER = {"depth": 2, "hidden_size": 256, "intermediate_size": 512, "num_heads": 4, "patch_size": 16,
                "spatial_patch_size": 16, "num_position_embeddings": 2304}
PREPROCESSOR_CONFIG = {
    "size": {"shortest_edge": 56 * 56, "longest_edge": 28 * 28 * 1280},
    "patch_size": 16, "temporal_patch_size": 2, "merge_size": 2,
    "image_mean": [0.5, 0.5, 0.5], "image_std": [0.5, 0.5, 0.5],
    "processor_class": "Qwen3VLProcessor", "image_processor_type": "Qwen2VLImageProcessorFast",
}


def rig_config(ids: dict[str, int], *, hidden: int, layers: int, intermediate: int, vocab: int,
               vision: bool = False) -> dict:
    config = checkpoint_config(ids, text_config(vocab, rig_shape(hidden, layers, intermediate)))
    config["tie_word_embeddings"] = False
    if vision:
        config["vision_config"] = config["vision_config"] | VISION_TOWER
    return config


def parameter_count(shape: Shape) -> tuple[int, int]:
    """(body, MTP head) parameters of a rig of ``shape``, without building it (the unused vision stub
    is left out). MLX arrays are lazy, so this allocates nothing."""
    ids = {token: i for i, token in enumerate(SPECIAL_TOKENS)} | {"vocab_size": shape.vocab}
    weights = random_parameters(rig_config(ids, hidden=shape.hidden, layers=shape.layers,
                                           intermediate=shape.intermediate, vocab=shape.vocab), seed=0)
    body = sum(v.size for k, v in weights.items() if k.startswith("language_model."))
    head = sum(v.size for k, v in weights.items() if k.startswith("mtp."))
    return body, head


def _corpus(vocab: int, seed: int) -> list[str]:
    """Pseudo-words, each seen three times: enough distinct merges for a BPE of ``vocab`` tokens."""
    rng = random.Random(seed)
    letters = "etaoinshrdlcumwfgypbvkjxqz"
    words = ["".join(rng.choice(letters) for _ in range(rng.randint(3, 8))) for _ in range(vocab)]
    lines = []
    for _ in range(3):
        rng.shuffle(words)
        lines += [" ".join(words[i : i + 16]) for i in range(0, len(words), 16)]
    return lines


def agreeing_weights(weights: dict, words: list[float], seed: int) -> dict:
    """Rewrite freshly initialised ``weights`` so the head always predicts what the body does (see above).

    ``words``: 1.0 for the tokens the LM head may pick (whole printable words), 0.0 for the rest.
    """
    import mlx.core as mx

    out = dict(weights)
    for key, value in weights.items():
        if key.startswith(("language_model.", "mtp.")) and key.endswith(ZEROED):
            out[key] = mx.zeros(value.shape, dtype=value.dtype)
    for key in UNIFORM_NORMS:
        out[key] = mx.ones_like(weights[key])
    hidden = weights["mtp.fc.weight"].shape[0]
    out["mtp.fc.weight"] = mx.concatenate([mx.eye(hidden), mx.zeros((hidden, hidden))], axis=1)

    # Row σ(t) of the LM head is token t's embedding direction: the body's hidden state for t (and the
    # head's) scores σ(t) at sqrt(hidden) and every other word at about a standard normal.
    embed = weights[EMBED].astype(mx.float32)
    unit = embed / mx.sqrt(mx.mean(embed * embed, axis=-1, keepdims=True))
    cycle = [i for i, word in enumerate(words) if word]
    if len(cycle) < 2:
        raise ValueError("the tokenizer has fewer than two word tokens for the LM head to cycle through")
    random.Random(seed).shuffle(cycle)
    source = list(range(len(words)))  # row v reads the embedding of the word whose successor is v
    for before, after in zip(cycle, cycle[1:] + cycle[:1]):
        source[after] = before
    rows = unit[mx.array(source)] * mx.array(words)[:, None] / math.sqrt(hidden)
    out[LM_HEAD] = rows.astype(weights[LM_HEAD].dtype)
    return out


ACCEPTANCE_TOLERANCE = 0.005  # how close the share of agreeing words comes to the asked acceptance
SHARE_SAMPLE = 4096  # words the share is computed over (all of them in smaller vocabularies)


def agreeing_share(weights: dict, words: list[float], fc, sample: list[int]) -> float:
    """The share of the ``sample`` words for which a head with ``fc`` (its embedding half) predicts the body's
    next word. Every layer adds nothing and every norm on the path is uniform, so the body predicts
    argmax(LM · e) and the head argmax(LM · fc · e), for e the word's embedding (its scale changes no argmax)."""
    import mlx.core as mx

    embed = weights[EMBED].astype(mx.float32)[mx.array(sample)]
    head = weights[LM_HEAD].astype(mx.float32)
    mask = mx.where(mx.array(words) > 0, 0.0, -mx.inf)  # the LM head picks words only
    body = mx.argmax(embed @ head.T + mask, axis=-1)
    drafted = mx.argmax((embed @ fc.T) @ head.T + mask, axis=-1)
    return mx.mean(body == drafted).item()


def partial_head(weights: dict, words: list[float], acceptance: float, seed: int) -> tuple[dict, float]:
    """``weights`` (an agreeing rig's) with the head's fc made to agree on a share ``acceptance`` of the words;
    returns them and the share reached."""
    import mlx.core as mx

    hidden = weights["mtp.fc.weight"].shape[0]
    noise = mx.random.normal((hidden, hidden), key=mx.random.key(seed + 1))
    word_ids = [i for i, word in enumerate(words) if word]
    sample = random.Random(seed).sample(word_ids, min(SHARE_SAMPLE, len(word_ids)))

    def share(sigma: float) -> float:
        return agreeing_share(weights, words, mx.eye(hidden) + sigma * noise, sample)

    low, high = 0.0, 1.0
    while share(high) > acceptance:  # noise enough to fall below the asked share
        low, high = high, high * 2
    reached = 1.0
    for _ in range(40):
        sigma = (low + high) / 2
        reached = share(sigma)
        if abs(reached - acceptance) <= ACCEPTANCE_TOLERANCE:
            break
        low, high = (sigma, high) if reached > acceptance else (low, sigma)
    fc = mx.concatenate([mx.eye(hidden) + sigma * noise, mx.zeros((hidden, hidden))], axis=1)
    return {**weights, "mtp.fc.weight": fc.astype(weights["mtp.fc.weight"].dtype)}, reached


def build_rig(out: str | Path, *, hidden: int, layers: int, intermediate: int, vocab: int,
              dtype: str = "float32", seed: int = 0, vision: bool = False, acceptance: float = 1.0) -> Path:
    """Write a rig checkpoint to ``out`` (replacing it) and return its path: every draft accepted, or about a
    share ``acceptance`` of them; ``vision``: one that can see (see above)."""
    import mlx.core as mx

    out = fresh_folder(out)
    ids = build_tokenizer(out, vocab, corpus=_corpus(vocab, seed))
    if ids["vocab_size"] != vocab:
        raise ValueError(f"the tokenizer reached {ids['vocab_size']} tokens, not {vocab}: pick a smaller vocab")
    config = rig_config(ids, hidden=hidden, layers=layers, intermediate=intermediate, vocab=vocab, vision=vision)
    words = word_mask(out)
    weights = agreeing_weights(random_parameters(config, seed), words, seed)
    if acceptance < 1.0:
        weights, _ = partial_head(weights, words, acceptance, seed)
    cast = getattr(mx, dtype)
    weights = {k: v.astype(cast) if mx.issubdtype(v.dtype, mx.floating) else v for k, v in weights.items()}
    save_checkpoint(out, config, weights)
    if vision:
        (out / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2))
    return out


def head_share(folder: Path) -> float:
    """The share of words on which the rig in ``folder`` drafts what its body says (its head's fc as saved)."""
    import mlx.core as mx

    weights = mx.load(str(folder / "model.safetensors"))
    words = word_mask(folder)
    hidden = weights["mtp.fc.weight"].shape[0]
    word_ids = [i for i, word in enumerate(words) if word]
    sample = random.Random(0).sample(word_ids, min(SHARE_SAMPLE, len(word_ids)))
    return agreeing_share(weights, words, weights["mtp.fc.weight"][:, :hidden].astype(mx.float32), sample)


def acceptance_share(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: pass a share from 0 to 1, e.g. 0.85")
    return value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="folder to write the checkpoint to (replaced)")
    parser.add_argument("--size", choices=sorted(SIZES), default="cpu")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--vision", action="store_true", help="with a small vision tower and its image processor")
    parser.add_argument("--acceptance", type=acceptance_share, default=1.0,
                        help="the share of words the head agrees on (0 to 1; default 1, every draft accepted)")
    args = parser.parse_args()
    shape = SIZES[args.size]
    body, head = parameter_count(shape)
    path = build_rig(args.output, hidden=shape.hidden, layers=shape.layers, intermediate=shape.intermediate,
                     vocab=shape.vocab, dtype=shape.dtype, seed=args.seed, vision=args.vision,
                     acceptance=args.acceptance)
    print(f"{path}: {args.size}, {body / 1e6:.1f}M parameters in the body, {head / 1e6:.1f}M in the MTP head, "
          f"{shape.dtype}{', with a vision tower' if args.vision else ''}, the head agreeing on "
          f"{head_share(path):.1%} of the words")


if __name__ == "__main__":
    main()
