"""Ask checkpoints the length of made-up words that begin with a short English word, against words that begin with
another two-letter token: the misread that stages 18 to 27 share (meadow, encoded " me" + "ad" + "ow", spelled
"isadow" after "How many m's would you say", its " me" read as a word of the clause before it).

Every checkpoint gets the same questions, in the evaluation's held-out wordings, thinking on, in fresh chats: the
word's length, or with ``--letters`` how many times one of its letters appears. A probe word is one of
``WORD_STARTS`` and one to three more of the tokenizer's pieces, kept only where its encoding starts with that word's
token; a control word is pieces whose encoding starts with any other two-letter token.
Prints right / asked for each set, split by how many tokens the word is and by wording, and the wrong replies.
Held-out words are never drawn.

    python -m training.probe_words demo_model/specchat-demo OTHER_CHECKPOINT [--words 150] [--letters]
        [--seed 20261203]
"""

from __future__ import annotations

import argparse
import functools
import random
import sys

from webapp.blas import ensure_fast_blas
from webapp.precision import keep_float32_exact

from . import corpus, evaluate

# Words that stand alone in the questions the corpus asks ("Tell me", "How many letters is it?", "and in
# seconds?") and that the tokenizer also has as a word-start token.
WORD_STARTS = ("me", "go", "an", "un", "be", "in", "is", "it", "to", "of", "on", "we", "my", "no", "do", "so")
MIN_LETTERS, MAX_LETTERS = 4, 12


@functools.cache
def demo_tokenizer():
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(corpus.TOKENIZER_FILE))


def first_token(tokenizer, word: str) -> str:
    return tokenizer.id_to_token(tokenizer.encode(" " + word).ids[0])


def token_count(tokenizer, word: str) -> int:
    """How many tokens the word is as the question has it, after a space."""
    return len(tokenizer.encode(" " + word).ids)


def tally(keys: list, right: list[bool]) -> str:
    """Right / asked for each key, in sorted order: "2 tokens 19/20, 3 tokens 12/14"."""
    return ", ".join(f"{key} {sum(r for k, r in zip(keys, right) if k == key)}/{keys.count(key)}"
                     for key in sorted(set(keys)))


def report(heading: str, right: list[bool], wrong: list[str], by: dict[str, list], detail: str = "") -> None:
    """Print right / asked under ``heading`` (then ``detail``), right / asked for each key of each list in ``by``
    (one key a question), and the wrong replies."""
    print(f"{heading}: {sum(right)}/{len(right)} right{detail}", flush=True)
    for name, keys in by.items():
        print(f"  by {name}: {tally(keys, right)}", flush=True)
    for line in wrong:
        print(f"  wrong: {line}", flush=True)


def ask_each(runner, exchanges: list) -> tuple[list[bool], list[str]]:
    """Each exchange's question asked with thinking on in a fresh chat: whether each reply is right, and the wrong
    ones as "question -> answer" lines."""
    right, wrong = [], []
    for ex in exchanges:
        text = evaluate.ask(runner, ex, True)
        right.append(evaluate.judge(text, ex, True) == "right")
        if not right[-1]:
            wrong.append(f"{ex.user!r} -> {evaluate.final_answer(text)!r}")
    return right, wrong


def words(rng: random.Random, count: int, probe: bool) -> list[str]:
    """``count`` probe words (beginning with one of WORD_STARTS as a token) or control words (beginning with any
    other two-letter token), of MIN_LETTERS to MAX_LETTERS letters."""
    tokenizer = demo_tokenizer()
    held_out = set(corpus.HELD_OUT_WORDS)
    found: list[str] = []
    while len(found) < count:
        start = rng.choice(WORD_STARTS) if probe else None
        word = corpus.pieces_word(rng, start)
        first = first_token(tokenizer, word)
        fits = first == "Ġ" + start if probe else len(first) == 3 and first[1:] not in WORD_STARTS
        if fits and word not in held_out and MIN_LETTERS <= len(word) <= MAX_LETTERS:
            found.append(word)
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoints", nargs="+")
    parser.add_argument("--words", type=int, default=150,
                        help="words in each set (at 40 a difference of a few is noise)")
    parser.add_argument("--letters", action="store_true",
                        help="ask how many times one of the word's letters appears, not the word's length")
    parser.add_argument("--seed", type=int, default=20261203)
    parser.add_argument("--blas", default="auto", help="auto (OpenBLAS when installed), bundled, or a library path")
    args = parser.parse_args()
    keep_float32_exact()
    ensure_fast_blas(args.blas, sys.argv[1:], module="training.probe_words")
    rng = random.Random(args.seed)
    words_of, wordings, sets = {}, {}, {}
    for name, probe in (("begins with a word", True), ("begins with another two-letter token", False)):
        words_of[name] = words(rng, args.words, probe)
        sets[name], wordings[name] = [], []
        for w in words_of[name]:
            letter = rng.choice(w) if args.letters else ""
            wordings[name].append(rng.choice(evaluate.HELD_OUT_LETTERS if args.letters else evaluate.HELD_OUT_LENGTH))
            question = wordings[name][-1].format(w=w, c=letter)
            sets[name].append(corpus.letters_exchange(w, letter, question) if args.letters
                              else corpus.length_exchange(w, question))
    tokenizer = demo_tokenizer()
    for checkpoint in args.checkpoints:
        runner = evaluate.Runner(checkpoint)
        for name, exchanges in sets.items():
            right, wrong = ask_each(runner, exchanges)
            counts = [f"{token_count(tokenizer, word)} tokens" for word in words_of[name]]
            report(f"{checkpoint}, {name}", right, wrong, {"wording": wordings[name]}, f" ({tally(counts, right)})")


if __name__ == "__main__":
    main()
