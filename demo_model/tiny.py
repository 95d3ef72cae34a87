"""Build a tiny random-weight Qwen 3.5 checkpoint with a bundled MTP head.

It has the exact layout of a real Qwen 3.5 MLX checkpoint (``model_type``
``qwen3_5``, native ``mtp.*`` weights, a Qwen-style tokenizer and chat
template), so the app loads it through the same code as a hub model. Its
weights are random: it proves the plumbing in seconds, offline.

    python -m demo_model.tiny OUTPUT_DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .architecture import TINY, text_config
from .checkpoint_files import (
    bpe_trainer, checkpoint_config, fresh_folder, random_parameters, save_checkpoint, save_tokenizer,
)

VOCAB_SIZE = 2048


def _corpus() -> list[str]:
    """A small deterministic corpus: enough for a byte-level BPE to learn words."""
    words = (
        "the model thinks before it answers . speculative decoding drafts tokens and "
        "the target verifies them ; acceptance is the share of drafted tokens kept . "
        "hello how are you today ? i am fine , thank you . the cache keeps the prompt "
        "so the next turn starts fast . reasoning budget limits thinking tokens . "
        "one two three four five six seven eight nine ten 0 1 2 3 4 5 6 7 8 9 + - * = "
    ).split()
    lines = []
    for i in range(400):
        lines.append(" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(24)))
    return lines


def build_tokenizer(out: Path, vocab_size: int = VOCAB_SIZE, corpus: list[str] | None = None) -> dict[str, int]:
    """Train a byte-level BPE on ``corpus`` (default: the small word list here); return the special
    tokens' ids and the real vocabulary size."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = bpe_trainer(vocab_size)
    tok.train_from_iterator(corpus or _corpus(), trainer=trainer)
    return save_tokenizer(tok, out)


def word_mask(out: Path) -> list[float]:
    """1.0 for whole words (printable, with a leading space), 0.0 for the rest.

    Each token is then a word of its own, and a reply streams word by word.
    """
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    mask = []
    for i in range(tok.get_vocab_size()):
        text = tok.decode([i], skip_special_tokens=True)
        word = text.startswith(" ") and text.strip() and text.isprintable() and text.isascii()
        mask.append(1.0 if word else 0.0)
    return mask


def build_tiny_checkpoint(out: str | Path, seed: int = 0, moe: bool = False) -> Path:
    """Write a complete tiny checkpoint to ``out`` (replacing it) and return its path; ``moe``: a
    ``qwen3_5_moe`` one (``moe_text_config``)."""
    out = fresh_folder(out)
    ids = build_tokenizer(out)
    # The model's vocabulary matches the tokenizer's, so every sampled id decodes.
    text = moe_text_config(ids["vocab_size"]) if moe else text_config(ids["vocab_size"], TINY)
    config = checkpoint_config(ids, text)
    if moe:
        config |= {"model_type": "qwen3_5_moe", "architectures": ["Qwen3_5MoeForConditionalGeneration"],
                   "vision_config": config["vision_config"] | {"model_type": "qwen3_5_moe"}}
    save_checkpoint(out, config, printable_parameters(config, seed, out))
    return out


def printable_parameters(config: dict, seed: int, folder: Path) -> dict:
    """Random parameters for ``config`` whose greedy output is printable with the tokenizer in ``folder``.

    Random weights would often pick byte fragments that never decode to text. With tied embeddings, a zero
    row gives a zero logit, so greedy decoding keeps to printable tokens.
    """
    import mlx.core as mx

    weights = random_parameters(config, seed)
    key = "language_model.model.embed_tokens.weight"
    weights[key] = weights[key] * mx.array(word_mask(folder))[:, None]
    return weights


def moe_text_config(vocab_size: int) -> dict:
    """The tiny model's shape with a sparse feed-forward block (``qwen3_5_moe``, the 35B-A3B class): four
    experts, two per token, and a shared expert, in the body and in the MTP head."""
    return text_config(vocab_size, TINY) | {
        "model_type": "qwen3_5_moe",
        "num_experts": 4,
        "num_experts_per_tok": 2,
        "moe_intermediate_size": 64,
        "shared_expert_intermediate_size": 64,
        "norm_topk_prob": True,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output", help="folder to write the checkpoint to")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--moe", action="store_true", help="a qwen3_5_moe checkpoint (experts in body and head)")
    args = parser.parse_args()
    print(build_tiny_checkpoint(args.output, seed=args.seed, moe=args.moe))


if __name__ == "__main__":
    main()
