"""Measure the demo checkpoint against its bars, on held-out prompts, on this CPU.

Prints: every skill's accuracy, thinking on and off, on questions in wordings
the corpus never uses (a reply is right when its answer is exactly the expected
one); exact-match accuracy on held-out 2-3 digit add/subtract questions with
thinking on; whether every thinking block closed; whether thinking-off replies
hold no reasoning; whether greedy output is identical with and without the MTP
drafter; MTP acceptance per draft block size; and decode tok/s with the drafter
divided by without it, measured side by side in this one process.

The answers the skills, the room, long chats, known faults and tool calls are
judged on come from specchat's own loop drafting at ``ANSWER_BLOCK``
(``Runner.answer``: greedy, so the drafter-off reply, about twice as fast as
mlx-vlm's plain generation on this CPU); the bars (identity with the drafter,
acceptance, speed) run on mlx-vlm's own loop (``Runner.generate``).

On Linux the mlx-cpu wheel's reference BLAS makes a k-token verify cost about k
single steps, so speculative decoding cannot pay; the script re-runs itself with
the system's OpenBLAS preloaded when one is installed, as specchat does
(``--blas bundled`` keeps the wheel's BLAS), and says which BLAS it measured with.

    python -m training.evaluate demo_model/specchat-demo
    python -m training.evaluate demo_model/specchat-demo --ask "How many r's are in strawberry?"
"""

from __future__ import annotations

import argparse
import os
import random
import re
import sys
import time
from dataclasses import dataclass
from decimal import Decimal
from functools import cached_property
from pathlib import Path

from webapp.blas import blas_in_use, ensure_fast_blas
from webapp.precision import keep_float32_exact

from . import corpus
from .corpus import FollowUp
from .known_faults import known_faults

ANSWER_NUMBER = re.compile(r"-?\d+")
ANSWER_BLOCK = 4  # the block Runner.answer drafts at: the fastest on the demo model on this CPU, and greedy anyway
BARS = {"accuracy": 0.90, "acceptance_2": 0.70, "acceptance_3": 0.55, "speedup": 1.3}


@dataclass
class Reply:
    text: str
    tokens: list[int]
    decode_s: float  # first token to last token


class Runner:
    def __init__(self, checkpoint: str):
        import json

        from mlx_vlm import load
        from mlx_vlm.speculative.drafters import load_drafter

        from engines.mlx.widening import widen_to_declared

        self.model, self.processor = load(checkpoint)[:2]
        self.tokenizer = getattr(self.processor, "tokenizer", self.processor)
        self.config = json.loads((Path(checkpoint) / "config.json").read_text())
        self.drafter, self.kind = load_drafter(checkpoint)
        widen_to_declared(self.model, self.config)
        widen_to_declared(self.drafter, self.config)
        self.context = (self.config.get("text_config") or self.config).get("max_position_embeddings")

    @cached_property
    def loaded(self):
        """The model as specchat's engine holds it (engines/mlx/loading.py), drafter included."""
        from engines.mlx.loading import LoadedModel

        return LoadedModel(self.model, self.processor, self.tokenizer, self.config, Path("."), self.drafter, self.kind)

    @cached_property
    def app_prompts(self):
        """specchat's own prompt builder, so that chats here are the ids the app sends."""
        from engines.mlx.prompts import PromptBuilder

        return PromptBuilder(self.loaded)

    @cached_property
    def own_loop(self):
        """(decoder, stop ids): specchat's own loop on this checkpoint, checked against mlx-vlm's as the engine
        checks it."""
        from engines.mlx.engine import own_decoder

        decoder, stop_ids, why, _ = own_decoder(self.loaded, self.app_prompts)
        if decoder is None:
            raise SystemExit(f"specchat's own loop cannot answer on this checkpoint: {why}")
        return decoder, stop_ids

    def first_turn_ids(self, user: str, thinking: bool) -> list[int]:
        from engines.base import Message

        return self.app_prompts.conversation_ids(corpus.DEFAULT_SYSTEM, [Message("user", user)], thinking)

    def next_turn_ids(self, history: list[int], user: str, thinking: bool) -> list[int]:
        """``history`` (prompt and reply ids, the reply's end token included or not) and a new user turn."""
        prompts = self.app_prompts
        if history and history[-1] == prompts.eos_id:
            history = history[:-1]
        return prompts.next_turn_ids(history, False, user, thinking)

    def chat_ids(self, before: list[tuple[corpus.Exchange, bool]], ex: corpus.Exchange, thinking: bool) -> list[int]:
        """``ex`` asked after the exchanges ``before``, each answered as expected, as specchat sends the chat."""
        if not before:
            return self.prompt_ids(messages(ex.user), thinking)
        ids = self.first_turn_ids(before[0][0].user, before[0][1])
        for i, (past, past_thinking) in enumerate(before):
            if i:
                ids = self.next_turn_ids(ids, past.user, past_thinking)
            ids = ids + self.app_prompts.encode(corpus.completion_text(past, past_thinking))
        return self.next_turn_ids(ids, ex.user, thinking)

    def prompt_ids(self, messages: list[dict], thinking: bool) -> list[int]:
        from mlx_vlm.prompt_utils import apply_chat_template

        text = apply_chat_template(self.processor, self.config, messages, enable_thinking=thinking)
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def generate(self, ids: list[int], block: int | None, max_tokens: int = 400) -> Reply:
        import mlx.core as mx
        from mlx_vlm import stream_generate

        kwargs = {}
        if block is not None:
            kwargs = {"draft_model": self.drafter, "draft_kind": self.kind, "draft_block_size": block}
        text, tokens, first, last = "", [], None, None
        for chunk in stream_generate(
            self.model, self.processor, "", input_ids=mx.array([ids]), max_tokens=max_tokens, temperature=0.0, **kwargs
        ):
            text += chunk.text
            if chunk.finish_reason is None:  # the final chunk repeats the last token
                tokens.append(int(chunk.token))
                last = time.perf_counter()
                first = first or last
        return Reply(text, tokens, (last - first) if first else 0.0)

    def answer(self, ids: list[int], max_tokens: int = 400) -> Reply:
        """The greedy reply as specchat computes it: its own loop (engines/mlx/decoding.py), drafting with the
        checkpoint's head at ``ANSWER_BLOCK``. Greedy output with the drafter is drafter-off output (the bars check
        it on mlx-vlm's loop, the identity tests on this one), so the reply is the plain one, about twice as fast on
        this CPU as ``generate(ids, None)``. ``max_tokens`` and the text as ``generate`` gives them."""
        from engines.mlx.decoding import Sampling

        decoder, eos = self.own_loop
        state = decoder.new_state()
        first = decoder.feed(state, ids, 0, Sampling())
        tokens, started, last = [], None, None
        for step in decoder.decode(state, first, max_tokens=max_tokens, block=ANSWER_BLOCK if decoder.drafter else 1,
                                   sampling=Sampling(), stop_ids=eos, cancelled=lambda: False):
            tokens += step.tokens
            last = time.perf_counter()
            started = started or last
        shown = tokens[:-1] if tokens and tokens[-1] in eos else tokens  # as mlx-vlm's stream gives them
        return Reply(self.tokenizer.decode(shown), shown, (last - started) if started else 0.0)

    def stats(self):
        from mlx_vlm.speculative.common import speculative_stats_snapshot

        return speculative_stats_snapshot(self.drafter)

    def since(self, snapshot) -> tuple[int, int]:
        from mlx_vlm.speculative.common import speculative_stats_since

        _, accepted, drafted = speculative_stats_since(self.drafter, snapshot)
        return accepted or 0, drafted or 0


def messages(user: str) -> list[dict]:
    return [{"role": "system", "content": corpus.DEFAULT_SYSTEM}, {"role": "user", "content": user}]


def answer_number(text: str) -> int | None:
    numbers = ANSWER_NUMBER.findall(final_answer(text))
    return int(numbers[-1]) if numbers else None


def holds_reasoning(text: str, ex: corpus.Exchange | None) -> bool:
    """Whether a thinking-off reply holds reasoning: its tags, or the reasoning's first line (a sum's when `ex` is
    None) where the expected reply does not say that line itself ("weeks measure time and ...")."""
    first_line = ex.reasoning.splitlines()[0] if ex else "column by column"
    copied = first_line in text and not (ex and first_line in ex.reply(False))
    return "<think>" in text or "</think>" in text or copied


def other_prompts(seed: int, count: int) -> list[corpus.Exchange]:
    """Questions from every skill but add/subtract, with their reference reasoning and answers."""
    rng = random.Random(seed)
    skills = [t[0] for t in corpus.TASKS if t[0] is not corpus.add_sub]
    return [skills[i % len(skills)](rng) for i in range(count)]


# ---------------------------------------------------------------- skills on phrasings the corpus never uses

# Every template here is worded in a way corpus.py never produces (tests/test_demo_skills.py checks it), so
# a right answer means the model understood the question, not that it remembered the sentence.
HELD_OUT_ADD = ["What do you get if you add {a} and {b}?", "Work out {a} + {b}.", "Find {a} plus {b}.",
                "{a} plus {b} equals?", "I need the total of {a} and {b}."]
HELD_OUT_SUB = ["What do you get if you subtract {b} from {a}?", "Work out {a} - {b}.", "Find {a} minus {b}.",
                "{a} minus {b} equals?", "How much is left when you take {b} from {a}?"]
HELD_OUT_MUL = ["What do you get if you multiply {a} by {b}?", "Work out {a} × {b}.", "Find {a} times {b}.",
                "{a} times {b} equals?"]
HELD_OUT_UNITS = ["Express {n} {frm} in {to}.", "{n} {frm} equals how many {to}?", "Change {n} {frm} into {to}.",
                  "I have {n} {frm}. How many {to} is that?", "Could you turn {n} {frm} into {to}?",
                  "What's {n} {frm} in {to}?"]
HELD_OUT_UNKNOWN_UNITS = corpus.HELD_OUT_UNKNOWN_UNITS
HELD_OUT_LETTERS = ["In the word {w}, how many {c}'s are there?", "Count how many times {c} appears in {w}.",
                    "How often does the letter {c} occur in {w}?", "What is the number of {c}'s in {w}?",
                    "Tell me the number of {c}'s in {w}.", "How many {c}'s would you say {w} has?"]
HELD_OUT_COMPARE = ["Of {a} and {b}, which is {w}?", "Between {a} and {b}, which one is {w}?",
                    "Tell me the {w} number: {a} or {b}.", "Which would you say is {w}, {a} or {b}?"]
HELD_OUT_AFTER = ["Starting on {d}, what day is it after {n} days?", "What weekday comes {n} days after {d}?",
                  "{n} days from {d} is which day?", "Which day comes {n} days after {d}?"]
HELD_OUT_BEFORE = ["Which day was {n} days before {d}?", "What weekday was it {n} days before {d}?",
                   "Going back {n} days from {d}, what day is it?"]
# (question, index into corpus.SPECCHAT or corpus.SMALL_TALK)
HELD_OUT_SPECCHAT = [
    ("How do I set the reasoning budget?", 0), ("Can I make you think for less time?", 0),
    ("Can you tell me what the drafter does?", 1), ("What's the drafter for?", 1),
    ("How do I clear the cache?", 2), ("What's the prompt cache for?", 2), ("What's tok/s?", 3),
    ("What do the tokens per second mean?", 3), ("What's acceptance?", 4), ("What's time to first token?", 5),
    ("What is this app?", 6), ("Who are you exactly?", 7), ("What sort of things can you do?", 8),
]
HELD_OUT_SMALL_TALK = [("Hello there", 0), ("Good afternoon", 0), ("Hiya!", 0), ("How are you today?", 1),
                       ("Thanks so much", 2), ("Goodbye for now", 3), ("Can you tell me a joke?", 4)]
HELD_OUT_OTHER = ["What is the population of {x}?", "Write a song about {y}.", "Summarize the history of {x}.",
                  "Give me advice about {z}.", "What's the best way to learn {z}?", "Who invented the telephone?"]
HELD_OUT_TEMPLATES = (HELD_OUT_ADD + HELD_OUT_SUB + HELD_OUT_MUL + HELD_OUT_UNITS + HELD_OUT_LETTERS
                      + HELD_OUT_COMPARE + HELD_OUT_AFTER + HELD_OUT_BEFORE + HELD_OUT_OTHER
                      + [q for q, _ in HELD_OUT_SPECCHAT + HELD_OUT_SMALL_TALK])
SKILLS = ["add/subtract", "multiply", "units", "unknown units", "too long", "letters", "compare", "weekdays",
          "specchat", "small talk", "other topics"]
SKILL_BAR = 0.97


def _unit_question(rng: random.Random, frm: str, to: str, n: str) -> str:
    return rng.choice(HELD_OUT_UNITS).format(n=n, frm=frm, to=to)


def _held_out_conversion(rng: random.Random) -> corpus.Exchange:
    frm, to = corpus.unit_pair(rng)
    amount = corpus.time_amount(frm, to, rng) if frm.kind == "time" else corpus.metric_amount(rng)
    frm_text = corpus.written_unit(frm, amount, rng)
    to_text = to.plural if rng.random() < 0.5 or not to.forms else rng.choice(to.forms)
    return corpus.conversion(frm, to, amount, _unit_question(rng, frm_text, to_text, corpus.fmt(amount)))


def _held_out_sum(rng: random.Random) -> corpus.Exchange:
    while True:
        op = rng.choice("+-")
        a, b = corpus.arithmetic_operands(rng)
        if corpus.is_held_out(a, op, b):
            template = rng.choice(HELD_OUT_ADD if op == "+" else HELD_OUT_SUB)
            build = corpus.add_exchange if op == "+" else corpus.sub_exchange
            return build(a, b, template.format(a=a, b=b))


def _held_out_too_long(rng: random.Random) -> corpus.Exchange:
    r = rng.random()
    if r < 0.3:
        op = rng.choice("+-")
        a, b = corpus.too_long_operands(rng, corpus.MAX_ADD_DIGITS)
        template = rng.choice(HELD_OUT_ADD if op == "+" else HELD_OUT_SUB)
        return corpus.too_long_add_sub(a, op, b, template.format(a=a, b=b))
    if r < 0.55:
        while True:
            a, b = corpus.number_of_digits(rng, rng.randint(1, 6)), corpus.number_of_digits(rng, rng.randint(1, 6))
            if not corpus.multiplies(a, b):
                return corpus.too_long_multiply(a, b, rng.choice(HELD_OUT_MUL).format(a=a, b=b))
    if r < 0.8:
        a, b = corpus.too_long_operands(rng, corpus.MAX_COMPARE_DIGITS)
        question = rng.choice(HELD_OUT_COMPARE).format(w=rng.choice(["larger", "smaller"]), a=a, b=b)
        return corpus.too_long_compare(a, b, question)
    frm, to = corpus.unit_pair(rng)
    amount = Decimal(corpus.number_of_digits(rng, rng.randint(corpus.MAX_UNIT_DIGITS + 1, corpus.MAX_UNIT_DIGITS + 4)))
    return corpus.conversion(frm, to, amount, _unit_question(rng, frm.plural, to.plural, corpus.fmt(amount)))


def _held_out_multiply(rng: random.Random) -> corpus.Exchange:
    if rng.random() < 0.6:
        a, b = corpus.number_of_digits(rng, rng.choice([1, 2, 3])), rng.randint(2, 9)
    else:
        a, b = corpus.number_of_digits(rng, 2), corpus.number_of_digits(rng, 2)
    return corpus.mul_exchange(a, b, rng.choice(HELD_OUT_MUL).format(a=a, b=b))


def _held_out_unknown_unit(rng: random.Random) -> corpus.Exchange:
    known = rng.choice(corpus.UNITS)
    other = rng.choice(HELD_OUT_UNKNOWN_UNITS)
    frm, to = (other, known.plural) if rng.random() < 0.5 else (known.plural, other)
    question = _unit_question(rng, frm, to, str(rng.randint(1, 500)))
    return corpus.unknown_unit_exchange(question)


def _held_out_letters(rng: random.Random) -> corpus.Exchange:
    word = rng.choice(corpus.WORDS)
    letter = rng.choice(word) if rng.random() < 0.8 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    return corpus.letters_exchange(word, letter, rng.choice(HELD_OUT_LETTERS).format(c=letter, w=word))


def _held_out_compare(rng: random.Random) -> corpus.Exchange:
    a, b = corpus.compare_operands(rng)
    word = rng.choice(["larger", "bigger", "greater", "smaller"])
    return corpus.compare_exchange(a, b, word, rng.choice(HELD_OUT_COMPARE).format(w=word, a=a, b=b))


def _held_out_weekday(rng: random.Random) -> corpus.Exchange:
    start, n, forward = rng.randrange(7), rng.randint(1, corpus.MAX_WEEKDAY_DAYS), rng.random() < 0.6
    template = rng.choice(HELD_OUT_AFTER if forward else HELD_OUT_BEFORE)
    return corpus.weekday_exchange(start, n, forward, template.format(n=n, d=corpus.DAYS[start]))


def _held_out_table(held_out, table):
    def make(rng: random.Random) -> corpus.Exchange:
        question, index = rng.choice(held_out)
        return corpus.Exchange(question, table[index][1], table[index][2])
    return make


def _held_out_other(rng: random.Random) -> corpus.Exchange:
    question = rng.choice(HELD_OUT_OTHER).format(
        x=rng.choice(corpus.OOD_X), y=rng.choice(corpus.OOD_Y), z=rng.choice(corpus.OOD_Z))
    return corpus.Exchange(question, corpus.FALLBACK_THOUGHT, corpus.FALLBACK)


HELD_OUT_MAKERS = {
    "add/subtract": _held_out_sum, "multiply": _held_out_multiply, "units": _held_out_conversion,
    "unknown units": _held_out_unknown_unit, "too long": _held_out_too_long, "letters": _held_out_letters,
    "compare": _held_out_compare, "weekdays": _held_out_weekday,
    "specchat": _held_out_table(HELD_OUT_SPECCHAT, corpus.SPECCHAT),
    "small talk": _held_out_table(HELD_OUT_SMALL_TALK, corpus.SMALL_TALK), "other topics": _held_out_other,
}


def held_out_skills(per_skill: int, seed: int = 97) -> list[tuple[str, corpus.Exchange]]:
    """``per_skill`` questions of every skill, in held-out wordings, with the replies they should get."""
    return _draw(HELD_OUT_MAKERS, SKILLS, per_skill, seed)


# ---------------------------------------------------------------- what a room tries first, in held-out wordings

HELD_OUT_PERCENT = ["Work out {p}% of {n}.", "Find {p} percent of {n}.", "What would {p}% of {n} be?",
                    "I need {p}% of {n}.", "How big is {p} percent of {n}?"]
HELD_OUT_OTHER_MATHS = ["Work out {a} / {b}.", "Find {a} divided by {b}.", "What do you get if you divide {a} by {b}?",
                        "Work out {f} + {g}.", "Find the square root of {a}.", "What would {a} divided by {b} be?",
                        "Find {b} to the power {c}."]
HELD_OUT_LENGTH = ["What is the letter count of {w}?", "Tell me the number of letters in {w}.",
                   "What number of letters does {w} have?", "Spell out {w} and tell me its length.",
                   "How many letters would you say {w} has?"]
HELD_OUT_UNIT_FOLLOW_UPS = ["How about in {to}?", "Could I have that in {to}?", "Give it to me in {to}.",
                            "Could you do that in {to}?", "Redo that in {to}.", "Tell me the same in {to}."]
HELD_OUT_AMOUNT_FOLLOW_UPS = ["And if it were {n} {frm}?", "Try {n} {frm} instead.", "Suppose it were {n} {frm}.",
                              "What if I had {n} {frm}?"]
# The corpus keeps these out of every wording of "again?" it puts together.
HELD_OUT_AGAIN = corpus.HELD_OUT_AGAIN
# Real words that are not in the corpus's word list: their letters are read from the question.
HELD_OUT_WORDS = corpus.HELD_OUT_WORDS
ROOM_TEMPLATES = (HELD_OUT_PERCENT + HELD_OUT_OTHER_MATHS + HELD_OUT_LENGTH + HELD_OUT_UNIT_FOLLOW_UPS
                  + HELD_OUT_AMOUNT_FOLLOW_UPS + HELD_OUT_AGAIN)


def _held_out_not_whole(rng: random.Random) -> corpus.Exchange:
    a, b = corpus.operand_texts(rng, corpus.not_whole_number)
    op = rng.choice("+-×")
    template = rng.choice({"+": HELD_OUT_ADD, "-": HELD_OUT_SUB, "×": HELD_OUT_MUL}[op])
    return corpus.not_whole_exchange([a, b], template.format(a=a, b=b))


def _held_out_decimal_compare(rng: random.Random) -> corpus.Exchange:
    a, b = corpus.operand_texts(rng, corpus.not_whole_number)
    question = rng.choice(HELD_OUT_COMPARE).format(w=rng.choice(["larger", "smaller"]), a=a, b=b)
    return corpus.not_whole_exchange([a, b], question, compare=True)


def _held_out_percent(rng: random.Random) -> corpus.Exchange:
    question = rng.choice(HELD_OUT_PERCENT).format(p=rng.randint(1, 100), n=rng.randint(1, 5000))
    return corpus.Exchange(question, "", corpus.PERCENT)


def _held_out_other_maths(rng: random.Random) -> corpus.Exchange:
    f, g = (f"{rng.randint(1, 9)}/{rng.randint(2, 12)}" for _ in range(2))
    question = rng.choice(HELD_OUT_OTHER_MATHS).format(a=rng.randint(1, 999), b=rng.randint(2, 99),
                                                       c=rng.randint(2, 5), f=f, g=g)
    return corpus.Exchange(question, "", corpus.OTHER_MATHS)


def _held_out_number_format(rng: random.Random) -> corpus.Exchange:
    odd = corpus.written_number(rng)[0]
    other = str(corpus.number_of_digits(rng, rng.choice([1, 2, 3])))
    a, b = (odd, other) if rng.random() < 0.5 else (other, odd)
    r = rng.random()
    if r < 0.6:
        question = rng.choice(HELD_OUT_ADD + HELD_OUT_SUB + HELD_OUT_MUL).format(a=a, b=b)
    elif r < 0.8:
        question = rng.choice(HELD_OUT_COMPARE).format(w="larger", a=a, b=b)
    else:
        frm, to = corpus.unit_pair(rng)
        odd = "three" if odd == "one" else odd
        question = _unit_question(rng, frm.plural, to.plural, odd)
    return corpus.number_format_exchange(odd, question)


def _held_out_mixed_units(rng: random.Random) -> corpus.Exchange:
    n, frm, to = corpus.mixed_amount(rng)
    return corpus.Exchange(_unit_question(rng, frm, to, n), "", corpus.MIXED_UNITS)


def _held_out_word(rng: random.Random) -> str:
    if rng.random() < 0.7:
        return rng.choice(HELD_OUT_WORDS)
    return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(3, 12)))


def _held_out_any_letters(rng: random.Random) -> corpus.Exchange:
    word = _held_out_word(rng)
    letter = rng.choice(word) if rng.random() < 0.8 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    return corpus.letters_exchange(word, letter, rng.choice(HELD_OUT_LETTERS).format(c=letter, w=word))


def _held_out_length(rng: random.Random) -> corpus.Exchange:
    word = _held_out_word(rng)
    return corpus.length_exchange(word, rng.choice(HELD_OUT_LENGTH).format(w=word))


def held_out_follow_up(before: corpus.Exchange, rng: random.Random, thinking_before: bool = True) -> corpus.Exchange:
    """A follow-up to ``before`` in a held-out wording: a new unit or amount after a conversion, or "again"."""
    if before.topic is None or rng.random() < 0.35:
        return FollowUp(rng.choice(HELD_OUT_AGAIN), "", before.reply(thinking_before), before=before)
    frm, to, amount = before.topic
    if rng.random() < 0.6:
        new_to = rng.choice([u for u in corpus.UNITS if u.kind == frm.kind and u is not frm])
        ex = corpus.conversion(frm, new_to, amount, rng.choice(HELD_OUT_UNIT_FOLLOW_UPS).format(to=new_to.plural))
    else:
        new = corpus.time_amount(frm, to, rng) if frm.kind == "time" else corpus.metric_amount(rng)
        question = rng.choice(HELD_OUT_AMOUNT_FOLLOW_UPS).format(n=corpus.fmt(new), frm=corpus.unit_words(frm, new))
        ex = corpus.conversion(frm, to, new, question)
    return FollowUp.after(before, ex)


def _held_out_follow_up(rng: random.Random) -> corpus.Exchange:
    while True:
        before = _held_out_conversion(rng)
        if before.topic:
            return held_out_follow_up(before, rng)


def _held_out_no_context(rng: random.Random) -> corpus.Exchange:
    """A follow-up of every kind (again, a new unit, a new amount) as a chat's first question."""
    r = rng.random()
    if r < 0.4:
        return corpus.Exchange(rng.choice(HELD_OUT_AGAIN), "", corpus.NOTHING_TO_REPEAT)
    unit = rng.choice(corpus.UNITS)
    if r < 0.75:
        question = rng.choice(HELD_OUT_UNIT_FOLLOW_UPS).format(to=unit.plural)
    else:
        question = rng.choice(HELD_OUT_AMOUNT_FOLLOW_UPS).format(n=rng.randint(2, 99), frm=unit.plural)
    return corpus.Exchange(question, "", corpus.NOTHING_BEFORE)


ROOM_MAKERS = {
    "decimals, negatives": _held_out_not_whole, "compare decimals": _held_out_decimal_compare,
    "percentages": _held_out_percent, "division, fractions": _held_out_other_maths,
    "commas, words": _held_out_number_format, "mixed units": _held_out_mixed_units,
    "letters, any word": _held_out_any_letters, "word length": _held_out_length,
    "follow-ups": _held_out_follow_up, "follow-up, fresh chat": _held_out_no_context,
}
ROOM_CLASSES = list(ROOM_MAKERS)
ROOM_BAR = 0.99  # right or an honest limit


def _draw(makers: dict, skills: list[str], per_skill: int, seed: int) -> list[tuple[str, corpus.Exchange]]:
    out = []
    for skill in skills:
        # One stream per skill, so that a change to one skill's generator in the corpus leaves the others' draws.
        rng = random.Random(f"{seed}:{skill}")
        seen: set[str] = set()
        for _ in range(100 * per_skill):  # a skill with fewer held-out questions asks each of them
            ex = makers[skill](rng)
            key = ex.user + (ex.before.user if isinstance(ex, FollowUp) else "")
            if key not in seen:
                seen.add(key)
                out.append((skill, ex))
            if len(seen) == per_skill:
                break
    return out


def room_questions(per_class: int, seed: int = 97,
                   classes: list[str] | None = None) -> list[tuple[str, corpus.Exchange]]:
    """``per_class`` questions of every class a room tries first (or of ``classes``), in held-out wordings."""
    return _draw(ROOM_MAKERS, classes or ROOM_CLASSES, per_class, seed)


def judge(text: str, ex: corpus.Exchange, thinking: bool) -> str:
    """"right" (exactly the expected reply), "honest" (a limit, naming no result) or "wrong"."""
    answer = final_answer(text)
    if not thinking and "think>" in text:
        return "wrong"
    if answer == ex.reply(thinking):
        return "right"
    return "honest" if corpus.is_limit(answer) else "wrong"


def ask(runner: "Runner", ex: corpus.Exchange, thinking: bool) -> str:
    before = [(ex.before, True)] if isinstance(ex, FollowUp) and ex.before else []
    return runner.answer(runner.chat_ids(before, ex, thinking), max_tokens=500).text


def outcomes(runner: "Runner", asked: list[tuple[str, corpus.Exchange]],
             log=print) -> dict[tuple[str, bool], dict[str, int]]:
    """(class, thinking) -> counts of right, honest and wrong replies, each question asked in both modes."""
    results: dict[tuple[str, bool], dict[str, int]] = {}
    for skill, ex in asked:
        for thinking in (True, False):
            reply = ask(runner, ex, thinking)
            verdict_ = judge(reply, ex, thinking)
            score = results.setdefault((skill, thinking), {"right": 0, "honest": 0, "wrong": 0})
            score[verdict_] += 1
            if verdict_ != "right":
                log(f"  {verdict_} ({skill}, thinking {'on' if thinking else 'off'}): {ex.user!r} -> "
                    f"{final_answer(reply)!r}, expected {ex.reply(thinking)!r}")
    return results


# ---------------------------------------------------------------- tools: the calls a question needs, and the answers

# Wordings of date questions that tools_corpus.py never uses (tests/test_tool_training_chats.py checks it).
HELD_OUT_DATE = ["Could you give me today's date?", "Which weekday are we on today?", "What is the current date?",
                 "Which date is it today?", "I need today's weekday and date."]
# The calculator's expression for each held-out wording of division, fractions, powers and roots.
HELD_OUT_OTHER_MATHS_EXPRESSIONS = {
    "Work out {a} / {b}.": "{a} / {b}", "Find {a} divided by {b}.": "{a} / {b}",
    "What do you get if you divide {a} by {b}?": "{a} / {b}", "Work out {f} + {g}.": "{f} + {g}",
    "Find the square root of {a}.": "sqrt({a})", "What would {a} divided by {b} be?": "{a} / {b}",
    "Find {b} to the power {c}.": "{b} ** {c}",
}


@dataclass
class ToolProbe:
    """A question a tool answers, the call it needs, and the clock's time for a clock call."""

    question: str
    tool: str
    arguments: dict
    now: object = None  # datetime.datetime


def _probe_sum(rng: random.Random) -> ToolProbe:
    a, b = corpus.operand_texts(rng, corpus.not_whole_number)
    op = rng.choice("+-*")
    template = rng.choice({"+": HELD_OUT_ADD, "-": HELD_OUT_SUB, "*": HELD_OUT_MUL}[op])
    return ToolProbe(template.format(a=a, b=b), "calculator", {"expression": f"{a} {op} {b}"})


def _probe_percent(rng: random.Random) -> ToolProbe:
    p, n = rng.randint(1, 100), rng.randint(1, 5000)
    return ToolProbe(rng.choice(HELD_OUT_PERCENT).format(p=p, n=n), "calculator", {"expression": f"{p}% of {n}"})


def _probe_other_maths(rng: random.Random) -> ToolProbe:
    values = dict(a=rng.randint(1, 999), b=rng.randint(2, 99), c=rng.randint(2, 5),
                  f=f"{rng.randint(1, 9)}/{rng.randint(2, 12)}", g=f"{rng.randint(1, 9)}/{rng.randint(2, 12)}")
    template = rng.choice(list(HELD_OUT_OTHER_MATHS_EXPRESSIONS))
    expression = HELD_OUT_OTHER_MATHS_EXPRESSIONS[template].format(**values)
    return ToolProbe(template.format(**values), "calculator", {"expression": expression})


def _probe_too_long(rng: random.Random) -> ToolProbe:
    a, b = corpus.too_long_operands(rng, corpus.MAX_ADD_DIGITS)
    return ToolProbe(rng.choice(HELD_OUT_ADD).format(a=a, b=b), "calculator", {"expression": f"{a} + {b}"})


def _probe_date(rng: random.Random) -> ToolProbe:
    from .tools_corpus import random_now

    return ToolProbe(rng.choice(HELD_OUT_DATE), "clock", {"action": "today"}, random_now(rng))


TOOL_PROBES = {"decimals, negatives": _probe_sum, "percentages": _probe_percent,
               "division, fractions": _probe_other_maths, "too long": _probe_too_long, "today's date": _probe_date}
TOOL_CLASSES = list(TOOL_PROBES)


def tool_probes(per_class: int, seed: int = 97) -> list[tuple[str, ToolProbe]]:
    """``per_class`` questions of every class a tool answers, in held-out wordings."""
    out = []
    for cls in TOOL_CLASSES:
        rng = random.Random(f"{seed}:tools:{cls}")
        seen: dict[str, ToolProbe] = {}
        for _ in range(100 * per_class):
            probe = TOOL_PROBES[cls](rng)
            seen.setdefault(probe.question, probe)
            if len(seen) == per_class:
                break
        out += [(cls, probe) for probe in seen.values()]
    return out


def read_call(text: str, parser, tools: list[dict]) -> dict | None:
    """The one call a reply's text makes ({"name", "arguments"}), read by mlx-vlm's parser; None when the reply
    makes no well-formed call."""
    if text.count(parser.tool_call_start) != 1 or parser.tool_call_end not in text:
        return None
    body = text.split(parser.tool_call_start)[1].split(parser.tool_call_end)[0]
    try:
        call = parser.parse_tool_call(body.strip(), tools)
    except Exception:  # the parser reads the model's free text: any failure is a malformed call
        return None
    return call if isinstance(call, dict) and isinstance(call.get("arguments"), dict) else None


def right_call(call: dict | None, probe: ToolProbe) -> bool:
    """The probe's tool, with arguments that give the expected result (a calculator expression may be written
    another way)."""
    from .tools_corpus import run_tool

    if call is None or call["name"] != probe.tool:
        return False
    if probe.tool == "clock":
        return call["arguments"].get("action", "now") == probe.arguments["action"]
    try:
        return run_tool("calculator", call["arguments"]) == run_tool("calculator", probe.arguments)
    except ValueError:
        return False


def tool_outcomes(runner: "Runner", asked: list[tuple[str, ToolProbe]],
                  log=print) -> dict[tuple[str, bool], dict[str, int]]:
    """(class, thinking) -> counts: "call" (a well-formed call of the right tool with the right arguments, tools
    on), "answer" (the answer after the call's result holds the result), "limit" (tools off: an honest limit),
    and "asked"."""
    from mlx_vlm.tools import load_tool_module

    from engines.base import Message
    from engines.events import ToolCall
    from engines.mlx.library import tool_parser_name

    from .tools_corpus import TOOL_SPECS, run_tool

    name = tool_parser_name(runner.processor)
    if name != "qwen3_coder":
        raise SystemExit(f"the checkpoint's chat template is not Qwen 3.5's tool format (mlx-vlm reads it as {name}): "
                         "install training/chat_template_tools.jinja as its chat template first")
    parser = load_tool_module(name)
    tools = tuple(TOOL_SPECS.values())
    prompts = runner.app_prompts
    results: dict[tuple[str, bool], dict[str, int]] = {}
    for cls, probe in asked:
        for thinking in (True, False):
            score = results.setdefault((cls, thinking), {"call": 0, "answer": 0, "limit": 0, "asked": 0})
            score["asked"] += 1
            off = runner.answer(runner.first_turn_ids(probe.question, thinking), max_tokens=300).text
            limit = corpus.is_limit(final_answer(off))
            score["limit"] += limit
            if not limit:
                log(f"  no limit without tools ({cls}, thinking {'on' if thinking else 'off'}): {probe.question!r} -> "
                    f"{off!r}")
            user = [Message("user", probe.question)]
            ids = prompts.conversation_ids(corpus.DEFAULT_SYSTEM, user, thinking, tools)
            reply = runner.answer(ids, max_tokens=300)
            call = read_call(reply.text, parser, list(tools))
            right = right_call(call, probe)
            score["call"] += right
            if call is None:
                log(f"  no call ({cls}, thinking {'on' if thinking else 'off'}): {probe.question!r} -> {reply.text!r}")
                continue
            if not right:
                log(f"  wrong call ({cls}): {probe.question!r} -> {call}, where {probe.arguments} was wanted")
            try:
                result = run_tool(call["name"], call["arguments"], probe.now)
            except (KeyError, ValueError) as exc:
                log(f"  failed call ({cls}): {probe.question!r} -> {call}: {exc}")
                continue
            said = reply.text.split(parser.tool_call_start)[0]
            reasoning, content = (said.split("</think>")[0], said.split("</think>")[-1]) if thinking else ("", said)
            messages = user + [Message("assistant", content.strip(), reasoning.strip(),
                                       tool_calls=(ToolCall("probe", call["name"], call["arguments"]),)),
                               Message("tool", result, tool_call_id="probe")]
            closed = bool(reply.tokens) and reply.tokens[-1] == prompts.eos_id
            after = (prompts.tool_result_ids(ids + reply.tokens, closed, corpus.DEFAULT_SYSTEM, messages, 1, thinking,
                                             tools)
                     or prompts.conversation_ids(corpus.DEFAULT_SYSTEM, messages, thinking, tools))
            answer = final_answer(runner.answer(after, max_tokens=300).text)
            score["answer"] += result in answer
            if result not in answer:
                log(f"  answer without the result ({cls}): {probe.question!r}, result {result!r} -> {answer!r}")
    return results


# ---------------------------------------------------------------- long chats, as specchat sends them

CHAT_CLASSES = [c for c in SKILLS + ROOM_CLASSES if c not in ("follow-ups", "follow-up, fresh chat")]
DEEP_TURN = 10  # from the 11th question of a chat on, 10 or more turns come before it


def chat_questions(rng: random.Random, turns: int) -> list[tuple[str, corpus.Exchange, bool]]:
    """A chat of ``turns`` held-out questions of every class, some of them follow-ups to the one before."""
    makers = HELD_OUT_MAKERS | ROOM_MAKERS
    out: list[tuple[str, corpus.Exchange, bool]] = []
    for _ in range(turns):
        if out and rng.random() < 0.15:
            _, before, thinking_before = out[-1]
            skill, ex = "follow-ups", held_out_follow_up(before, rng, thinking_before)
        else:
            skill = rng.choice(CHAT_CLASSES)
            ex = makers[skill](rng)
        out.append((skill, ex, rng.random() < 0.7))
    return out


def chat_run(runner: "Runner", chats: int, turns: int, seed: int = 7,
             log=print) -> list[tuple[int, str, bool, str]]:
    """Ask ``chats`` chats of ``turns`` questions, each reply the model's own and kept, reasoning included, as
    specchat keeps it; (turn index, class, thinking, verdict) for every question."""
    out = []
    for chat in range(chats):
        history: list[int] = []
        for turn, (skill, ex, thinking) in enumerate(chat_questions(random.Random(f"{seed}:chat:{chat}"), turns)):
            ids = runner.next_turn_ids(history, ex.user, thinking) if history else runner.first_turn_ids(ex.user, thinking)
            if runner.context and len(ids) + 500 > runner.context:
                log(f"  chat {chat}: turn {turn + 1} would pass the declared context; the chat ends there")
                break
            reply = runner.answer(ids, max_tokens=500)
            history = ids + reply.tokens
            result = judge(reply.text, ex, thinking)
            out.append((turn, skill, thinking, result))
            if result != "right":
                log(f"  {result} (chat {chat}, turn {turn + 1}, {len(ids)} tokens in, {skill}, thinking "
                    f"{'on' if thinking else 'off'}): {ex.user!r} -> {final_answer(reply.text)!r}, "
                    f"expected {ex.reply(thinking)!r}")
    return out


def tally(results) -> dict[str, int]:
    counts = {"right": 0, "honest": 0, "wrong": 0}
    for result in results:
        counts[result] += 1
    return counts


def cell(counts: dict[str, int]) -> str:
    asked = sum(counts.values())
    if not asked:
        return "-"
    return f"{counts['right']}/{asked} right, {counts['honest']} limit, {counts['wrong']} wrong"


def final_answer(text: str) -> str:
    return text.split("</think>")[-1].strip()


def skill_accuracy(runner: "Runner", per_skill: int, seed: int = 97,
                   log=print) -> dict[tuple[str, bool], tuple[int, int]]:
    """(skill, thinking) -> (right, asked): a reply is right when its answer is exactly the expected one."""
    counts = outcomes(runner, held_out_skills(per_skill, seed), log)
    return {k: (v["right"], sum(v.values())) for k, v in counts.items()}


def pct(x: float) -> str:
    return f"{x:.1%}"


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("checkpoint")
    parser.add_argument("--questions", type=int, default=200, help="held-out arithmetic questions")
    parser.add_argument("--prompts", type=int, default=24, help="held-out prompts for identity and acceptance")
    parser.add_argument("--blocks", default="2,3,4", help="draft block sizes to measure")
    parser.add_argument("--speed-rounds", type=int, default=3, help="side-by-side speed passes")
    parser.add_argument("--skills", type=int, default=40, help="held-out-wording questions per skill")
    parser.add_argument("--skills-seed", type=int, default=97, help="another seed draws other held-out questions")
    parser.add_argument("--room", type=int, default=20, help="held-out questions per class a room tries first")
    parser.add_argument("--chats", type=int, default=10, help="long chats of mixed held-out questions")
    parser.add_argument("--turns", type=int, default=20, help="questions per long chat")
    parser.add_argument("--chats-seed", type=int, default=7, help="another seed draws other long chats")
    parser.add_argument("--parts", default="skills,room,chats,bars,speed",
                        help="what to measure, comma-separated: skills (held-out wordings), room (what a room tries "
                             "first: decimals, percentages, follow-ups, ...), faults (the questions trained stages "
                             "got wrong: a first screen, not part of the default), chats (long chats as specchat sends "
                             "them), bars (held-out sums, thinking off, drafter identity and acceptance), speed "
                             "(implies bars), tools (the calls of the built-in tools and the answers from their "
                             "results, with tools on, and the limits with tools off: not part of the default)")
    parser.add_argument("--tools", type=int, default=10,
                        help="held-out questions per class a tool answers, for --parts tools")
    parser.add_argument("--room-class", action="append", default=[], choices=ROOM_CLASSES, metavar="CLASS",
                        help="ask the room part's questions of this class only (repeatable), to screen a checkpoint "
                             "on many questions of one class: --room 150 --room-class 'letters, any word'")
    parser.add_argument("--blas", default="auto", help="auto (OpenBLAS when installed), bundled, or a library path")
    parser.add_argument("--ask", action="append", default=[], metavar="QUESTION",
                        help="instead of measuring, print the whole greedy reply (reasoning too) to QUESTION in a "
                             "fresh chat, thinking on and off; repeatable")
    args = parser.parse_args()
    parts = set(args.parts.split(","))
    keep_float32_exact()
    ensure_fast_blas(args.blas, sys.argv[1:], module="training.evaluate")
    blocks = [int(b) for b in args.blocks.split(",")]
    import mlx.core as mx
    import mlx_vlm

    runner = Runner(args.checkpoint)
    print(f"checkpoint {args.checkpoint}; mlx {mx.__version__}, mlx-vlm {mlx_vlm.__version__}, "
          f"device {mx.default_device()}, {os.cpu_count()} CPUs; BLAS: {blas_in_use()}; drafter kind {runner.kind}")
    if args.ask:
        for question in args.ask:
            for thinking in (True, False):
                reply = runner.answer(runner.first_turn_ids(question, thinking))
                print(f"\n--- {question} (thinking {'on' if thinking else 'off'})\n{reply.text}")
        return
    failures = []

    # 0. Every skill, in wordings the corpus never uses, thinking on and off.
    if "skills" in parts:
        t0 = time.time()
        scores = skill_accuracy(runner, args.skills, args.skills_seed)
        print(f"\nskills on held-out wordings ({args.skills} questions each, greedy, {time.time() - t0:.0f}s; "
              f"right = exactly the expected answer; bar >= {pct(SKILL_BAR)}):")
        print(f"  {'skill':<14} {'thinking on':>25} {'thinking off':>25}")
        for skill in SKILLS:
            cells = []
            for thinking in (True, False):
                right, asked = scores[(skill, thinking)]
                mark = verdict(right / asked >= SKILL_BAR)
                cells.append(f"{right}/{asked} = {pct(right / asked)} {mark}")
            print(f"  {skill:<14} {cells[0]:>25} {cells[1]:>25}")

    # 0b. What a room tries first, in fresh chats (a follow-up after the one exchange it follows).
    if "room" in parts:
        t0 = time.time()
        classes = args.room_class or ROOM_CLASSES
        counts = outcomes(runner, room_questions(args.room, args.skills_seed, classes))
        print(f"\nwhat a room tries first ({args.room} questions each, greedy, {time.time() - t0:.0f}s; "
              f"bar: right or an honest limit >= {pct(ROOM_BAR)}, and never wrong):")
        for skill in classes:
            cells = []
            for thinking in (True, False):
                c = counts[(skill, thinking)]
                ok = (c["right"] + c["honest"]) / sum(c.values()) >= ROOM_BAR and c["wrong"] == 0
                cells.append(f"{cell(c)} {verdict(ok)}")
            print(f"  {skill:<22} on: {cells[0]:<42} off: {cells[1]}")

    # 0c. The questions trained stages got wrong, as a first screen of a new checkpoint.
    if "faults" in parts:
        t0 = time.time()
        asked = known_faults()
        counts = outcomes(runner, asked)
        modes = [{k: sum(c[k] for (_, th), c in counts.items() if th == thinking) for k in ("right", "honest", "wrong")}
                 for thinking in (True, False)]
        print(f"\nknown faults ({len(asked)} questions stages got wrong, greedy, {time.time() - t0:.0f}s): "
              f"on: {cell(modes[0])}; off: {cell(modes[1])}")

    # 0c'. With the built-in tools offered: the right call, then an answer that holds the result; without, a limit.
    if "tools" in parts:
        t0 = time.time()
        counts = tool_outcomes(runner, tool_probes(args.tools, args.skills_seed))
        print(f"\ntools ({args.tools} held-out questions a class, greedy, {time.time() - t0:.0f}s): with tools, the "
              "right call and an answer holding its result; without tools, an honest limit:")
        for cls in TOOL_CLASSES:
            cells = [f"call {c['call']}/{c['asked']}, answer {c['answer']}/{c['asked']}, no tools: limit "
                     f"{c['limit']}/{c['asked']}" for c in (counts[(cls, True)], counts[(cls, False)])]
            print(f"  {cls:<20} thinking on: {cells[0]:<50} thinking off: {cells[1]}")

    # 0d. Long chats: every question in a chat whose earlier replies are the model's own.
    if "chats" in parts:
        t0 = time.time()
        results = chat_run(runner, args.chats, args.turns, args.chats_seed)
        print(f"\nlong chats ({args.chats} chats of up to {args.turns} mixed held-out questions, {len(results)} "
              f"asked, thinking on in about 70%, greedy, {time.time() - t0:.0f}s):")
        fresh = [r for t, _, _, r in results if t < DEEP_TURN]
        deep = [r for t, _, _, r in results if t >= DEEP_TURN]
        print(f"  turns 1-{DEEP_TURN}: {cell(tally(fresh))}; turns {DEEP_TURN + 1}+: {cell(tally(deep))}")
        for skill in CHAT_CLASSES + ["follow-ups"]:
            mine = [(t, th, r) for t, s_, th, r in results if s_ == skill]
            on = tally(r for _, th, r in mine if th)
            off = tally(r for _, th, r in mine if not th)
            print(f"  {skill:<22} on: {cell(on):<42} off: {cell(off)}")
        wrong = tally(r for *_, r in results)["wrong"]
        print(f"confidently wrong in {len(results)} questions: {wrong} {verdict(wrong == 0)}")
    if not parts & {"bars", "speed"}:
        return

    # 1. Held-out arithmetic, thinking on, no drafter.
    t0 = time.time()
    questions = [(ex.user, expected) for ex, expected in corpus.held_out_arithmetic(args.questions)]
    correct = closed = 0
    plain: dict[tuple[str, bool], Reply] = {}
    for question, expected in questions:
        reply = runner.generate(runner.prompt_ids(messages(question), True), None)
        plain[(question, True)] = reply
        closed += "</think>" in reply.text
        correct += answer_number(reply.text) == expected
        if answer_number(reply.text) != expected and len(failures) < 5:
            failures.append(f"{question} expected {expected}, got {reply.text.split('</think>')[-1].strip()!r}")
    accuracy = correct / len(questions)
    print(f"\narithmetic (held-out 2-3 digit add/subtract, thinking on, {len(questions)} questions, "
          f"{time.time() - t0:.0f}s): exact match {correct}/{len(questions)} = {pct(accuracy)} "
          f"(bar >= {pct(BARS['accuracy'])}) {verdict(accuracy >= BARS['accuracy'])}")
    for f in failures:
        print(f"  wrong: {f}")
    print(f"thinking blocks closed: {closed}/{len(questions)} {verdict(closed == len(questions))}")

    # 2. Thinking off: an answer straight away, with no reasoning in it.
    others = other_prompts(4242, args.prompts)
    arithmetic_off = questions[: args.prompts // 2]
    off_prompts = [(q, None) for q, _ in arithmetic_off] + [(ex.user, ex) for ex in others]
    reasoned = []
    for user, ex in off_prompts:
        reply = runner.generate(runner.prompt_ids(messages(user), False), None)
        plain[(user, False)] = reply
        if holds_reasoning(reply.text, ex):
            reasoned.append(f"{user!r} -> {reply.text!r}")
    clean = len(off_prompts) - len(reasoned)
    print(f"thinking off: {clean}/{len(off_prompts)} replies hold no reasoning "
          f"{verdict(clean == len(off_prompts))}")
    for line in reasoned:
        print(f"  with reasoning: {line}")

    # 3. Held-out prompts with the drafter: identical greedy output, and acceptance per block size.
    on_prompts = [(q, True) for q, _ in questions[: args.prompts // 2]] + [(ex.user, True) for ex in others]
    on_prompts += [(user, False) for user, _ in off_prompts[: args.prompts // 2]]
    for user, thinking in on_prompts:
        if (user, thinking) not in plain:
            plain[(user, thinking)] = runner.generate(runner.prompt_ids(messages(user), thinking), None)
    acceptance = {}
    identical = True
    for block in blocks:
        snapshot = runner.stats()
        same = 0
        for user, thinking in on_prompts:
            reply = runner.generate(runner.prompt_ids(messages(user), thinking), block)
            same += reply.tokens == plain[(user, thinking)].tokens
        accepted, drafted = runner.since(snapshot)
        acceptance[block] = accepted / drafted if drafted else 0.0
        identical &= same == len(on_prompts)
        bar = BARS.get(f"acceptance_{block}")
        print(f"draft_block_size {block}: greedy output identical on {same}/{len(on_prompts)} prompts; "
              f"acceptance {accepted}/{drafted} = {pct(acceptance[block])}"
              + (f" (bar >= {pct(bar)}) {verdict(acceptance[block] >= bar)}" if bar else ""))
    print(f"greedy output identical with and without the drafter: {verdict(identical)}")

    if "speed" not in parts:
        return

    # 4. Decode speed, side by side: each prompt runs without and with the drafter in turn.
    speed_prompts = [p for p in on_prompts if p[1]][: max(4, args.prompts // 3)]
    modes = [None, *blocks]
    tokens = {m: 0 for m in modes}
    seconds = {m: 0.0 for m in modes}
    for r in range(args.speed_rounds):
        for user, thinking in speed_prompts:
            ids = runner.prompt_ids(messages(user), thinking)
            for mode in modes[r % len(modes) :] + modes[: r % len(modes)]:
                reply = runner.generate(ids, mode)
                tokens[mode] += len(reply.tokens) - 1
                seconds[mode] += reply.decode_s
    base = tokens[None] / seconds[None]
    print(f"\ndecode speed ({len(speed_prompts)} prompts x {args.speed_rounds} passes, interleaved; "
          f"BLAS: {blas_in_use()}): no drafter {base:.1f} tok/s")
    ratios = {}
    for block in blocks:
        tps = tokens[block] / seconds[block]
        ratios[block] = tps / base
        print(f"  MTP drafter, draft_block_size {block}: {tps:.1f} tok/s = {ratios[block]:.2f}x")
    best = max(ratios, key=ratios.get)
    print(f"best: draft_block_size {best}, {ratios[best]:.2f}x (bar >= {BARS['speedup']}) "
          f"{verdict(ratios[best] >= BARS['speedup'])}")


if __name__ == "__main__":
    main()
