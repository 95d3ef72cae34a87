"""Ask checkpoints how many times each letter of the alphabet appears in words that contain it, in every held-out
letter wording, thinking on, in fresh chats: right / asked per letter and per wording, and the wrong replies.

Stage 28 read the letter of "How many m's would you say mango has?" as "w" (the first letter of "would") in 6 of 8
words with an m in them, where a, e, g, h, s and the other letters it was asked came out right: a misread of one
letter in one wording, which screens that draw the letter at random meet about once in 150 questions. Words are
made of the tokenizer's pieces (``corpus.pieces_word``), or with ``--tempting`` hold a piece of a known word
(``corpus.tempting_word``), each with the letter in it; held-out words are never drawn.

    python -m training.probe_letters demo_model/specchat-demo OTHER_CHECKPOINT [--words 4] [--tempting]
        [--seed 20261203]
"""

from __future__ import annotations

import argparse
import random
import string
import sys

from webapp.blas import ensure_fast_blas
from webapp.precision import keep_float32_exact

from . import corpus, evaluate
from .probe_words import ask_each, report


def word_with(rng: random.Random, letter: str, draw=corpus.pieces_word) -> str:
    """A made-up word (``draw``, the tokenizer's pieces unless told) with ``letter`` in it, not a held-out word."""
    held_out = set(corpus.HELD_OUT_WORDS)
    while True:
        word = draw(rng)
        if letter in word and word not in held_out and 3 <= len(word) <= corpus.MAX_WORD_LETTERS:
            return word


def questions(rng: random.Random, per_letter: int,
              draw=corpus.pieces_word) -> list[tuple[str, str, corpus.Exchange]]:
    """(letter, wording, exchange) for ``per_letter`` words a letter in each held-out letter wording."""
    asked = []
    for letter in string.ascii_lowercase:
        for wording in evaluate.HELD_OUT_LETTERS:
            for _ in range(per_letter):
                word = word_with(rng, letter, draw)
                asked.append((letter, wording, corpus.letters_exchange(word, letter,
                                                                       wording.format(w=word, c=letter))))
    return asked


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--words", type=int, default=4, help="words for each letter in each wording")
    parser.add_argument("--tempting", action="store_true", help="words with a piece of a known word in them")
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--blas", default="auto", help="auto (OpenBLAS when installed), bundled, or a library path")
    args = parser.parse_args()
    keep_float32_exact()
    ensure_fast_blas(args.blas, sys.argv[1:], module="training.probe_letters")
    asked = questions(random.Random(args.seed), args.words,
                      corpus.tempting_word if args.tempting else corpus.pieces_word)
    for checkpoint in args.checkpoints:
        right, wrong = ask_each(evaluate.Runner(checkpoint), [ex for _, _, ex in asked])
        report(checkpoint, right, wrong, {"letter": [letter for letter, _, _ in asked],
                                          "wording": [wording for _, wording, _ in asked]})


if __name__ == "__main__":
    main()
