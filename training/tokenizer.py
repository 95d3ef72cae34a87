"""Train the demo model's byte-level BPE tokenizer on the corpus.

The pre-tokenizer is Qwen 2/3.5's (one digit per token, words with their
leading space), so ``transformers``' Qwen2Tokenizer and the raw ``tokenizers``
file split text the same way, and streamed text is released word by word.

    python -m training.tokenizer OUTPUT_DIR
"""

from __future__ import annotations

import argparse
from pathlib import Path

from demo_model.checkpoint_files import bpe_trainer, save_tokenizer

from . import corpus

VOCAB_SIZE = 1024
SEED = 7
SAMPLES = 40_000
# Qwen2's split pattern: contractions, letters with one leading non-letter, single digits, punctuation runs.
QWEN_PATTERN = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+"
)


def build_tokenizer(out: Path, vocab_size: int = VOCAB_SIZE) -> dict[str, int]:
    """Write tokenizer.json, tokenizer_config.json and chat_template.jinja; return special ids."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

    out.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN_PATTERN), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    trainer = bpe_trainer(vocab_size)
    texts = (p + c for p, c in corpus.samples(SEED, SAMPLES))
    tok.train_from_iterator(texts, trainer=trainer)
    return save_tokenizer(tok, out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("output")
    args = parser.parse_args()
    print(build_tokenizer(Path(args.output)))


if __name__ == "__main__":
    main()
