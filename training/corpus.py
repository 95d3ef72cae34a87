"""Deterministic synthetic dialogues the demo model is trained on.

Every answer is a fixed function of its question (only the questions vary), so a
small model can learn the language exactly and its MTP head can predict it.
Conversations are rendered exactly as the chat template (and the app, which
keeps past reasoning in its token history) shows them to the model.

    python -m training.corpus --count 5 --seed 1     # print a few samples
"""

from __future__ import annotations

import argparse
import functools
import itertools
import json
import random
import re
from dataclasses import dataclass, replace
from decimal import Decimal

from demo_model import DEFAULT_MODEL

IM_START, IM_END = "<|im_start|>", "<|im_end|>"
DEFAULT_SYSTEM = "You are a helpful assistant."
SYSTEM_PROMPTS = [
    DEFAULT_SYSTEM,
    "You are a friendly assistant.",
    "You are specchat's demo model.",
    "Answer briefly.",
    "You are a careful assistant. Think step by step.",
]
COLUMNS = ["Ones", "Tens", "Hundreds", "Thousands", "Ten thousands", "Hundred thousands"]
PLACES = [c.lower() for c in COLUMNS]
DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
WORDS = (
    "apple banana cherry strawberry blueberry orange lemon mango papaya coconut tomato potato "
    "carrot pepper onion garlic bread butter cheese coffee letter mississippi banana balloon "
    "committee bookkeeper success address tennis puzzle jazz pizza giraffe hippopotamus elephant "
    "kangaroo koala penguin dolphin octopus mammal llama alpaca parrot rabbit turtle squirrel "
    "computer keyboard monitor speaker window program library dictionary calendar umbrella "
    "mountain river ocean island desert forest valley volcano rainbow thunder weather summer "
    "winter autumn spring tomorrow yesterday morning evening midnight happiness science "
    "mathematics chocolate vanilla cinnamon sugar honey teacher student doctor engineer "
    "assistant possible necessary accommodate embarrass occurrence parallel referee bubble"
).split()
# What the model can do, and the limits it states when a question goes past them.
MAX_ADD_DIGITS, MAX_COMPARE_DIGITS, MAX_UNIT_DIGITS, MAX_WEEKDAY_DAYS, MAX_TIME_AMOUNT = 4, 6, 6, 99, 24
UNIT_NAMES = (
    "kilometers (km), meters (m), centimeters (cm), millimeters (mm), kilograms (kg), grams (g), liters (L), "
    "milliliters (mL), weeks, days, hours (h), minutes (min) and seconds (s)"
)
CAPABILITIES = (
    "With thinking on, I add and subtract numbers of up to 4 digits, multiply up to 3 digits by 1 digit or 2 "
    "digits by 2, count letters in a word, compare numbers of up to 6 digits and work out weekdays up to 99 days "
    "away, step by step. With thinking on or off, I convert units (km, m, cm, mm, kg, g, L, mL, weeks, days, h, "
    "min, s) and explain how specchat works."
)
FALLBACK = (
    "I'm sorry, I can't help with that. I am a small demo model, and I only know arithmetic, unit "
    "conversions, counting letters, comparing numbers, weekdays and specchat itself. Try asking me "
    "one of those!"
)
FALLBACK_THOUGHT = "This question is outside what I know. I will say so politely and say what I can do."
THINK_FOR_SUMS = "Turn thinking on for that one: I work sums out step by step, and without thinking I would only guess."
THINK_FIRST = "Turn thinking on for that one: I work it out step by step, and without thinking I would only guess."
TOO_LONG_ADD = "That number is too long for me: I add and subtract numbers of up to 4 digits."
TOO_LONG_MUL = "Those numbers are too long for me: I multiply up to 3 digits by 1 digit, or 2 digits by 2 digits."
TOO_LONG_COMPARE = "That number is too long for me: I compare numbers of up to 6 digits."
TOO_LONG_UNITS = "That number is too long for me: I convert amounts of up to 6 digits."
TOO_MANY_DAYS = "That is too many days for me: I count up to 99 days forward or back."
UNKNOWN_UNIT_THOUGHT = "That is not a unit I know. I will say which units I know."
UNKNOWN_UNIT = f"I don't know that unit, so I can't convert it. The units I know are {UNIT_NAMES}."
TIME_LIMIT = (
    "I convert time between weeks and days, days and hours, hours and minutes, hours and seconds, and minutes "
    "and seconds, in whole amounts of up to 24 of the larger unit, like 3 hours to minutes or 180 minutes to hours."
)
TIME_PAIRS = {("week", "day"), ("day", "hour"), ("hour", "minute"), ("hour", "second"), ("minute", "second")}
# Honest limits for what a room tries first: never a made-up number.
WHAT_I_DO = "I add, subtract and multiply whole numbers, convert units, count letters, compare numbers and work out weekdays"
WHOLE_ONLY = "I only work with whole numbers: I can't do sums with decimals or negative numbers yet."
WHOLE_ONLY_COMPARE = "I only compare whole numbers: I can't compare decimals or negative numbers yet."
NO_NEGATIVE_AMOUNT = "I only convert amounts of zero or more: a negative amount is not something I convert."
PERCENT = f"I can't do percentages yet: {WHAT_I_DO}."
OTHER_MATHS = f"I can't do division, fractions, powers or roots yet: {WHAT_I_DO}."
DIGITS_ONLY = "Please write the numbers in plain digits, like 1234: I don't read numbers with commas or in words."
MIXED_UNITS = ("I convert one amount in one unit at a time, like 3 hours to minutes or 2.5 km to m: please ask "
               "about each part on its own.")
MAX_WORD_LETTERS = 16
TOO_LONG_WORD = f"That word is too long for me: I count the letters of words of up to {MAX_WORD_LETTERS} letters."
NOTHING_BEFORE = "I don't know what that refers to: please ask the whole question, like 3 hours in minutes."
NOTHING_TO_REPEAT = "There is nothing to repeat yet: ask me a question first!"

# Every reply that claims no answer: a limit, the advice to turn thinking on, or the fallback.
LIMITS = (WHOLE_ONLY, WHOLE_ONLY_COMPARE, NO_NEGATIVE_AMOUNT, PERCENT, OTHER_MATHS, DIGITS_ONLY, MIXED_UNITS,
          TOO_LONG_WORD, NOTHING_BEFORE, NOTHING_TO_REPEAT, THINK_FOR_SUMS, THINK_FIRST, TOO_LONG_ADD, TOO_LONG_MUL,
          TOO_LONG_COMPARE, TOO_LONG_UNITS, TOO_MANY_DAYS, UNKNOWN_UNIT, TIME_LIMIT, FALLBACK)
KIND_MISMATCH = re.compile(r"^I can't convert [a-z]+ to [a-z]+: [a-z]+ measure [a-z]+ and [a-z]+ measure [a-z]+\.$")


def is_limit(reply: str) -> bool:
    """Whether a reply is one of the model's honest limits (it names no result)."""
    return reply in LIMITS or bool(KIND_MISMATCH.match(reply))



@dataclass
class Exchange:
    user: str
    reasoning: str
    answer: str
    answer_off: str | None = None  # the reply with thinking off, where it differs
    topic: tuple | None = None  # a conversion's (from unit, to unit, amount), for follow-ups such as "and in seconds?"

    def reply(self, thinking: bool) -> str:
        return self.answer if thinking or self.answer_off is None else self.answer_off


@dataclass
class FollowUp(Exchange):
    """A question that goes on from the exchange before it in the same chat."""

    before: Exchange | None = None

    @classmethod
    def after(cls, before: Exchange, exchange: Exchange) -> FollowUp:
        """``exchange`` asked in the chat where ``before`` was the last exchange."""
        return cls(**vars(exchange), before=before)


# ---------------------------------------------------------------- arithmetic


def is_held_out(a: int, op: str, b: int) -> bool:
    """About 2% of add/subtract problems are kept out of training, for evaluation."""
    return (a * 7919 + b * 104729 + (13 if op == "-" else 0)) % 50 == 0


def _digits(n: int) -> list[int]:
    """Digits from the ones up."""
    return [int(c) for c in reversed(str(n))]


def _add_lines(a: int, b: int) -> list[str]:
    da, db = _digits(a), _digits(b)
    carry, lines = 0, []
    for i in range(max(len(da), len(db))):
        x = da[i] if i < len(da) else 0
        y = db[i] if i < len(db) else 0
        s = x + y + carry
        lines.append(f"{COLUMNS[i]}: {x} + {y} + {carry} = {s}, write {s % 10}, carry {s // 10}.")
        carry = s // 10
    if carry:
        lines.append(f"Last carry: write {carry}.")
    return lines


def add_exchange(a: int, b: int, question: str) -> Exchange:
    lines = [f"Add {a} and {b} column by column, starting from the ones."]
    lines += _add_lines(a, b)
    lines.append(f"So {a} + {b} = {a + b}.")
    return Exchange(question, "\n".join(lines), f"{a} + {b} = {a + b}.", THINK_FOR_SUMS)


def _sub_lines(a: int, b: int) -> list[str]:
    """Columns of a - b for a >= b."""
    da, db = _digits(a), _digits(b)
    borrow, lines = 0, []
    for i in range(len(da)):
        x = da[i]
        y = db[i] if i < len(db) else 0
        d = x - y - borrow
        if d < 0:
            lines.append(f"{COLUMNS[i]}: {x} - {y} - {borrow} = {d}, add 10 to get {d + 10}, write {d + 10}, borrow 1.")
            borrow = 1
        else:
            lines.append(f"{COLUMNS[i]}: {x} - {y} - {borrow} = {d}, write {d}, borrow 0.")
            borrow = 0
    return lines


def sub_exchange(a: int, b: int, question: str) -> Exchange:
    if a >= b:
        lines = [f"Subtract {b} from {a} column by column, starting from the ones."]
        lines += _sub_lines(a, b)
        lines.append(f"So {a} - {b} = {a - b}.")
    else:
        lines = [
            f"{a} is smaller than {b}, so the result is negative: {a} - {b} = -({b} - {a}).",
            f"Subtract {a} from {b} column by column, starting from the ones.",
        ]
        lines += _sub_lines(b, a)
        lines.append(f"So {b} - {a} = {b - a}, and {a} - {b} = {a - b}.")
    return Exchange(question, "\n".join(lines), f"{a} - {b} = {a - b}.", THINK_FOR_SUMS)


def _mul_digit_lines(a: int, d: int) -> list[str]:
    carry, lines = 0, []
    for i, x in enumerate(_digits(a)):
        p = x * d + carry
        lines.append(f"{COLUMNS[i]}: {x} × {d} + {carry} = {p}, write {p % 10}, carry {p // 10}.")
        carry = p // 10
    if carry:
        lines.append(f"Last carry: write {carry}.")
    return lines


def mul_exchange(a: int, b: int, question: str) -> Exchange:
    if b < 10:
        lines = [f"Multiply {a} by {b} column by column, starting from the ones."]
        lines += _mul_digit_lines(a, b)
    else:
        tens, ones = divmod(b, 10)
        lines = [f"Split {b} into {tens * 10} and {ones}: {a} × {b} = {a} × {ones} + {a} × {tens} × 10."]
        lines.append(f"First {a} × {ones}:")
        lines += _mul_digit_lines(a, ones)
        lines.append(f"So {a} × {ones} = {a * ones}.")
        lines.append(f"Then {a} × {tens}:")
        lines += _mul_digit_lines(a, tens)
        lines.append(f"So {a} × {tens} = {a * tens}, and times 10 it is {a * tens * 10}.")
        lines.append(f"Now add {a * ones} and {a * tens * 10}.")
        lines += _add_lines(a * ones, a * tens * 10)
    lines.append(f"So {a} × {b} = {a * b}.")
    return Exchange(question, "\n".join(lines), f"{a} × {b} = {a * b}.", THINK_FOR_SUMS)


# Each list ends with sums that are "equal" to something, never in the evaluation's "56 times 2 equals?" nor one
# word from it: elsewhere the corpus says "equal" only in unit questions ("is equal to how many") and a division
# limit ("equal parts"), and stages 31 and 32 answered "56 times 2 equals?" with the limit for units or for
# division, where "Find 56 times 2." and "56 times 2 is?" were multiplied. Differences also begin "How much
# remains" and some take one number "from" another without "away": stages 18, 32a and 34 took the held-out "How much
# is left when you take 12 from 352?" for a follow-up with nothing to follow (as in "Now take 5 hours.").
ADD_QUESTIONS = [
    "What is {a} + {b}?", "What is {a} plus {b}?", "Compute {a} + {b}.", "Calculate {a} + {b}.",
    "{a} + {b} = ?", "How much is {a} plus {b}?", "Add {a} and {b}.", "What's {a}+{b}?",
    "Can you add {a} and {b}?", "What is the sum of {a} and {b}?", "{a} plus {b}", "How much is {a} + {b}?",
    "Please compute {a} + {b}.", "What does {a} + {b} make?", "Sum {a} and {b}.", "Tell me {a} + {b}.",
    "{a} + {b}?", "Add up {a} and {b}.", "What's {a} plus {b}?", "Solve {a} + {b}.", "Give me {a} + {b}.",
    "Figure out {a} + {b}.", "Evaluate {a} + {b}.", "Determine {a} plus {b}.", "Do {a} + {b}.",
    "Get me the sum of {a} and {b}.", "Sum up {a} and {b}.", "Total {a} and {b}.", "What do {a} and {b} add up to?",
    "If you add {a} and {b}, what is it?", "{a} and {b} together make what?", "Adding {a} and {b} gives?",
    "Please add {a} and {b}.", "Could you add {a} and {b}?", "{a} + {b} is what?", "I want {a} + {b}.",
    "The sum of {a} and {b} is?", "Show me {a} plus {b}.", "Add {a} plus {b}.", "{a} plus {b} is?",
    "What does {a} plus {b} equal?", "{a} + {b} is equal to?", "{a} and {b} added are equal to?",
]
SUB_QUESTIONS = [
    "What is {a} - {b}?", "What is {a} minus {b}?", "Compute {a} - {b}.", "Calculate {a} - {b}.",
    "{a} - {b} = ?", "How much is {a} minus {b}?", "Subtract {b} from {a}.", "What's {a}-{b}?",
    "What is {a} take away {b}?", "{a} minus {b}", "How much is {a} - {b}?", "Please compute {a} - {b}.",
    "What does {a} - {b} make?", "Tell me {a} - {b}.", "{a} - {b}?", "What's {a} minus {b}?", "Solve {a} - {b}.",
    "Take {b} away from {a}.", "Give me {a} - {b}.", "Figure out {a} - {b}.", "Evaluate {a} - {b}.",
    "Determine {a} minus {b}.", "Do {a} - {b}.", "If you subtract {b} from {a}, what is it?",
    "{a} take away {b} is what?",
    "What is left if {b} is taken from {a}?", "Please subtract {b} from {a}.", "Could you subtract {b} from {a}?",
    "{a} - {b} is what?", "{a} minus {b} is?", "Show me {a} minus {b}.", "Deduct {b} from {a}.",
    "What remains after taking {b} from {a}?",
    "How much remains once you take {b} away from {a}?", "How much is there after taking {b} away from {a}?",
    "How much do you get when you take {b} from {a}?", "Take {b} from {a}. How much remains?",
    "If I take {b} from {a}, how much remains?",
    "What does {a} minus {b} equal?", "{a} - {b} is equal to?", "{b} taken from {a} is equal to?",
]
MUL_QUESTIONS = [
    "What is {a} × {b}?", "What is {a} times {b}?", "Compute {a} * {b}.", "Calculate {a} x {b}.",
    "{a} * {b} = ?", "Multiply {a} by {b}.", "What's {a}*{b}?", "What is the product of {a} and {b}?",
    "{a} times {b}", "How much is {a} times {b}?", "What is {a} * {b}?", "{a} x {b}?", "Tell me {a} × {b}.",
    "Please compute {a} × {b}.", "What's {a} times {b}?", "Solve {a} * {b}.", "Give me {a} × {b}.",
    "Figure out {a} times {b}.", "Evaluate {a} * {b}.", "Determine {a} x {b}.",
    "If you multiply {a} by {b}, what is it?",
    "{a} multiplied by {b}", "{a} multiplied by {b} is what?", "Please multiply {a} by {b}.",
    "Could you multiply {a} and {b}?", "{a} × {b} is what?", "Show me {a} times {b}.", "{a} × {b}", "{a} x {b}",
    "{a} times {b} is?",
    "What does {a} times {b} equal?", "{a} × {b} is equal to?", "{a} multiplied by {b} is equal to?",
]


def number_of_digits(rng: random.Random, digits: int) -> int:
    """A whole number of exactly ``digits`` digits (0 to 9 for one)."""
    return rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1)


def arithmetic_operands(rng: random.Random) -> tuple[int, int]:
    """Two operands of a sum or difference, of one to four digits each."""
    sizes = rng.choices([1, 2, 3, 4], weights=[1, 4, 4, 1], k=2)
    return number_of_digits(rng, sizes[0]), number_of_digits(rng, sizes[1])


def too_long_operands(rng: random.Random, most: int) -> tuple[int, int]:
    """Two operands, one or both with more than ``most`` digits."""
    long = number_of_digits(rng, rng.randint(most + 1, most + 6))
    other = number_of_digits(rng, rng.randint(1, most + 6))
    return (long, other) if rng.random() < 0.5 else (other, long)


def too_long_reasoning(numbers: list[int], most: int, what: str) -> str:
    longest = max(numbers, key=lambda n: len(str(n)))
    return f"{longest} has more than {most} digits, and I {what} numbers of up to {most} digits."


def arithmetic_question(op: str, a: int, b: int, rng: random.Random) -> Exchange:
    if op == "+":
        return add_exchange(a, b, rng.choice(ADD_QUESTIONS).format(a=a, b=b))
    return sub_exchange(a, b, rng.choice(SUB_QUESTIONS).format(a=a, b=b))


def _close_operands(rng: random.Random) -> tuple[int, int]:
    """Two numbers a few apart, either way round: small and negative differences."""
    a = number_of_digits(rng, rng.choice([2, 2, 3, 3, 4]))
    b = max(0, a + rng.randint(-20, 20))
    return (a, b) if rng.random() < 0.5 else (b, a)


def overlapping_operands(rng: random.Random) -> tuple[int, int]:
    """A number and its own first or last digits, either way round ("5 plus 545"): where a copy of one number
    slides onto the other."""
    long = str(number_of_digits(rng, rng.choice([2, 3, 3, 4])))
    cut = rng.randint(1, len(long) - 1)
    short = int(long[-cut:] if rng.random() < 0.6 else long[:cut])
    return (short, int(long)) if rng.random() < 0.5 else (int(long), short)


def add_sub(rng: random.Random) -> Exchange:
    while True:
        op = rng.choice("+-")
        r = rng.random()  # 8% overlapping pairs; of the rest, 12 points of differences a few apart
        if r < 0.08:
            a, b = overlapping_operands(rng)
        else:
            a, b = _close_operands(rng) if op == "-" and r < 0.2 else arithmetic_operands(rng)
        if not is_held_out(a, op, b):
            return arithmetic_question(op, a, b, rng)


def too_long_add_sub(a: int, op: str, b: int, question: str) -> Exchange:
    return Exchange(question, too_long_reasoning([a, b], MAX_ADD_DIGITS, "add and subtract"), TOO_LONG_ADD)


def held_out_arithmetic(count: int, seed: int = 1234) -> list[tuple[Exchange, int]]:
    """``count`` held-out 2-3 digit add/subtract exchanges and their numeric answers."""
    rng = random.Random(seed)
    out: list[tuple[Exchange, int]] = []
    seen = set()
    while len(out) < count:
        op = rng.choice("+-")
        a, b = number_of_digits(rng, rng.choice([2, 3])), number_of_digits(rng, rng.choice([2, 3]))
        if is_held_out(a, op, b) and (a, op, b) not in seen:
            seen.add((a, op, b))
            out.append((arithmetic_question(op, a, b, rng), a + b if op == "+" else a - b))
    return out


def multiplies(a: int, b: int) -> bool:
    """Whether a × b is within what the model multiplies: up to 3 digits by 1, or 2 digits by 2."""
    la, lb = sorted([len(str(a)), len(str(b))])
    return (la == 1 and lb <= 3) or (la == 2 and lb == 2)


def multiply(rng: random.Random) -> Exchange:
    if rng.random() < 0.6:
        a, b = number_of_digits(rng, rng.choice([1, 2, 3])), rng.randint(2, 9)
    else:
        a, b = number_of_digits(rng, 2), number_of_digits(rng, 2)
    if rng.random() < 0.3:
        a, b = b, a
        if b >= 10 and a < 10:
            a, b = b, a  # keep the single digit as the multiplier
    return mul_exchange(a, b, rng.choice(MUL_QUESTIONS).format(a=a, b=b))


def too_long_multiply(a: int, b: int, question: str) -> Exchange:
    reasoning = (f"{a} × {b} is {len(str(a))} digits by {len(str(b))}, and I multiply up to 3 digits by 1 digit, "
                 "or 2 digits by 2 digits.")
    return Exchange(question, reasoning, TOO_LONG_MUL)


def too_long(rng: random.Random) -> Exchange:
    """Numbers past what a skill handles: the model says so instead of cutting them."""
    r = rng.random()
    if r < 0.4:
        op = rng.choice("+-")
        a, b = too_long_operands(rng, MAX_ADD_DIGITS)
        questions = ADD_QUESTIONS if op == "+" else SUB_QUESTIONS
        return too_long_add_sub(a, op, b, rng.choice(questions).format(a=a, b=b))
    if r < 0.65:
        while True:
            a, b = number_of_digits(rng, rng.randint(1, 6)), number_of_digits(rng, rng.randint(1, 6))
            if not multiplies(a, b):
                return too_long_multiply(a, b, rng.choice(MUL_QUESTIONS).format(a=a, b=b))
    if r < 0.8:
        a, b = too_long_operands(rng, MAX_COMPARE_DIGITS)
        word = rng.choice(LARGER + SMALLER)
        return too_long_compare(a, b, rng.choice(COMPARE_QUESTIONS).format(w=word, a=a, b=b))
    return units(rng, too_long=True)


# ---------------------------------------------------------------- units


@dataclass(frozen=True)
class Unit:
    name: str
    plural: str
    kind: str
    size: int  # in the kind's smallest unit
    forms: tuple[str, ...]  # abbreviations and other spellings people type


UNITS = [
    Unit("kilometer", "kilometers", "length", 1_000_000, ("km", "kilometre", "kilometres", "kms")),
    Unit("meter", "meters", "length", 1000, ("m", "metre", "metres")),
    Unit("centimeter", "centimeters", "length", 10, ("cm", "centimetre", "centimetres")),
    Unit("millimeter", "millimeters", "length", 1, ("mm", "millimetre", "millimetres")),
    Unit("kilogram", "kilograms", "mass", 1000, ("kg", "kgs", "kilo", "kilos")),
    Unit("gram", "grams", "mass", 1, ("g",)),
    Unit("liter", "liters", "volume", 1000, ("L", "l", "litre", "litres")),
    Unit("milliliter", "milliliters", "volume", 1, ("mL", "ml", "millilitre", "millilitres")),
    Unit("week", "weeks", "time", 604_800, ("wk", "wks")),
    Unit("day", "days", "time", 86_400, ()),
    Unit("hour", "hours", "time", 3600, ("h", "hr", "hrs")),
    Unit("minute", "minutes", "time", 60, ("min", "mins")),
    Unit("second", "seconds", "time", 1, ("s", "sec", "secs")),
]
# Units people ask about that the model does not know; the evaluation asks about others.
UNKNOWN_UNITS = (
    "miles mile feet foot ft inches inch yards yard yd pounds pound lb lbs ounces ounce oz gallons gallon "
    "pints pint tons ton stones stone Fahrenheit Celsius degrees kelvin acres hectares months years decades "
    "centuries milligrams mg tonnes nanometers micrometers bytes kilobytes megabytes calories joules watts "
    "volts knots mph cups barrels hectoliters decilitres centiliters decimeters kilowatts milliseconds "
    "microseconds nanoseconds fortnights hertz handfuls horsepower hundredweights hogsheads grains drams gills "
    "chains spans ells angstroms microns lightyears kilojoules pascals amps megatons hides hops heaps hoops "
    "hunks pails pots pinches paces pipes pallets hulls hitches hectograms hectometers heads hearths hikes "
    "packs pegs pods paws pans picks pucks planks hats hens hams hooks horns herds hives hoofs harps"
).split()
UNIT_QUESTIONS = [
    "How many {to} are in {n} {frm}?", "How many {to} in {n} {frm}?", "{n} {frm} is how many {to}?",
    "How many {to} is {n} {frm}?", "What is {n} {frm} in {to}?", "{n} {frm} = ? {to}",
    "How many {to} are there in {n} {frm}?",
    "What is {n} {frm} in {to}", "{n} {frm} = how many {to}?", "How many {to} make {n} {frm}?",
    "How many {to} does {n} {frm} make?", "How many {to} do I get from {n} {frm}?", "What is {n} {frm} as {to}?",
    "{n} {frm} makes how many {to}?", "If I have {n} {frm}, how many {to} is it?", "{n} {frm} is what in {to}?",
    "What are {n} {frm} in {to}?", "How many {to} would {n} {frm} be?", "Tell me {n} {frm} in {to}.",
    "{n} {frm} is equal to how many {to}?", "{n} {frm} comes to how many {to}?", "{n} {frm} amounts to how many {to}?",
    "{n} {frm} works out to how many {to}?", "{n} {frm} gives how many {to}?", "{n} {frm} would be how many {to}?",
    "{n} {frm} corresponds to how many {to}?", "{n} {frm} is the same as how many {to}?",
]
# Also "{lead}{n} {frm}{link}{to}{end}": "Please convert 5 km to m."
UNIT_LEADS = ["", "", "Convert ", "Convert ", "Please convert ", "Could you convert ", "Can you convert ", "Rewrite ",
              "Switch ", "Go from ", "Put ", "Make ", "Translate ", "Calculate ", "Compute ", "Give me "]
UNIT_LINKS = [" to ", " to ", " in ", " in ", " into ", " as ", " in terms of ", " -> ", " = ? "]
UNIT_ENDS = ["", ".", "?", " please", ", please.", " for me."]


def unit_question(rng: random.Random, n: str, frm: str, to: str) -> str:
    if rng.random() < 0.45:
        return rng.choice(UNIT_QUESTIONS).format(n=n, frm=frm, to=to)
    return f"{rng.choice(UNIT_LEADS)}{n} {frm}{rng.choice(UNIT_LINKS)}{to}{rng.choice(UNIT_ENDS)}"


ONE_UNIT_QUESTIONS = ["How many {to} are in a {frm}?", "How many {to} in one {frm}?", "How many {to} are in one {frm}?"]


def fmt(x: Decimal) -> str:
    """A decimal as people write it: 2500, 2.5, 0.000047 (no exponent, no trailing zeros)."""
    return format(x.normalize(), "f")


def unit_words(unit: Unit, amount: Decimal) -> str:
    return unit.name if amount == 1 else unit.plural


def written_unit(unit: Unit, amount: Decimal | None, rng: random.Random) -> str:
    """A unit as a person types it: its name, an abbreviation or another spelling."""
    r = rng.random()
    if r < 0.45 or not unit.forms:
        return unit.name if amount == 1 else unit.plural
    return rng.choice(unit.forms)


def _amount_text(amount: Decimal, unit_text: str, rng: random.Random) -> str:
    """"5 km" or, with an abbreviation, sometimes "5km"."""
    joined = len(unit_text) <= 3 and rng.random() < 0.25
    return f"{fmt(amount)}{unit_text}" if joined else f"{fmt(amount)} {unit_text}"


def digits_of(amount: Decimal) -> int:
    return len(fmt(amount).replace(".", "").lstrip("0")) or 1


def metric_amount(rng: random.Random) -> Decimal:
    if rng.random() < 0.7:
        return Decimal(number_of_digits(rng, rng.choices([1, 2, 3, 4, 5, 6], weights=[6, 5, 4, 3, 1, 1])[0]) or 1)
    places = rng.choice([1, 1, 2, 3])
    while True:
        total = rng.randint(1, MAX_UNIT_DIGITS)
        value = Decimal(rng.randint(1, 10**total - 1)).scaleb(-places)
        if digits_of(value) <= MAX_UNIT_DIGITS and fmt(value).count(".") and len(fmt(value).split(".")[1]) == places:
            return value


def conversion(frm: Unit, to: Unit, amount: Decimal, question: str) -> Exchange:
    """The exchange for converting ``amount`` of ``frm`` into ``to`` (two known units)."""
    if digits_of(amount) > MAX_UNIT_DIGITS:
        reasoning = (f"{fmt(amount)} has more than {MAX_UNIT_DIGITS} digits, and I convert amounts of up to "
                     f"{MAX_UNIT_DIGITS} digits.")
        return Exchange(question, reasoning, TOO_LONG_UNITS)
    if frm.kind != to.kind:
        kinds = f"{frm.plural} measure {frm.kind} and {to.plural} measure {to.kind}."
        return Exchange(question, kinds, f"I can't convert {frm.plural} to {to.plural}: {kinds}")
    big, small = (frm, to) if frm.size > to.size else (to, frm)
    factor = big.size // small.size
    result = amount * frm.size / to.size
    if frm.kind == "time":
        whole = amount == amount.to_integral_value() and result == result.to_integral_value()
        if not whole or max(amount, result) / factor > MAX_TIME_AMOUNT or (big.name, small.name) not in TIME_PAIRS:
            reasoning = (f"1 {big.name} is {factor} {small.plural}. I convert time between a few pairs of units, "
                         f"in whole amounts of up to {MAX_TIME_AMOUNT} of the larger unit, "
                         "and this is not one of them.")
            return Exchange(question, reasoning, TIME_LIMIT)
    if frm is big:
        how = f"multiply by {factor}"
        sums = f"{fmt(amount)} × {factor} = {fmt(result)}."
    else:
        how = f"divide by {factor}"
        sums = f"{fmt(amount)} / {factor} = {fmt(result)}."
    if frm.kind != "time":
        places = len(str(factor)) - 1
        way = "right" if frm is big else "left"
        how += f": move the decimal point {places} {'place' if places == 1 else 'places'} {way}"
    reasoning = f"1 {big.name} is {factor} {small.plural}, so {how}.\n{sums}"
    answer = f"{fmt(amount)} {unit_words(frm, amount)} is {fmt(result)} {unit_words(to, result)}."
    return Exchange(question, reasoning, answer, topic=(frm, to, amount))


def unit_pair(rng: random.Random) -> tuple[Unit, Unit]:
    kind = rng.choices(["length", "mass", "volume", "time"], weights=[4, 2, 2, 5])[0]
    while True:
        frm, to = rng.sample([u for u in UNITS if u.kind == kind], 2)
        big, small = (frm, to) if frm.size > to.size else (to, frm)
        if kind != "time" or (big.name, small.name) in TIME_PAIRS or rng.random() < 0.15:
            return frm, to


def time_amount(frm: Unit, to: Unit, rng: random.Random) -> Decimal:
    big, small = (frm, to) if frm.size > to.size else (to, frm)
    n = Decimal(rng.randint(1, MAX_TIME_AMOUNT))
    r = rng.random()
    if r < 0.12:  # past the limit: too many, a decimal, or not a whole number of the larger unit
        n = Decimal(rng.randint(MAX_TIME_AMOUNT + 1, 200)) if rng.random() < 0.5 else n + Decimal("0.5")
    amount = n if frm is big else n * (big.size // small.size)
    if frm is not big and r >= 0.12 and rng.random() < 0.1:
        amount += rng.randint(1, 9)
    return amount


def units(rng: random.Random, too_long: bool = False) -> Exchange:
    frm, to = unit_pair(rng)
    r = rng.random()
    if too_long:
        amount = Decimal(number_of_digits(rng, rng.randint(MAX_UNIT_DIGITS + 1, MAX_UNIT_DIGITS + 5)))
    elif r < 0.08:  # across kinds: kilometers to kilograms
        to = rng.choice([u for u in UNITS if u.kind != frm.kind])
        amount = Decimal(rng.randint(1, 99))
    elif frm.kind == "time":
        amount = time_amount(frm, to, rng)
    else:
        amount = metric_amount(rng)
    to_text = to.plural if rng.random() < 0.55 or not to.forms else rng.choice(to.forms)
    if amount == 1 and rng.random() < 0.3 and not too_long:
        template = rng.choice(ONE_UNIT_QUESTIONS)
        frm_text = frm.name if rng.random() < 0.6 else rng.choice(frm.forms or (frm.name,))
        question = template.format(to=to_text, frm=frm_text)
    else:
        frm_text = written_unit(frm, amount, rng)
        question = unit_question(rng, "{n}", "{frm}", to_text).replace("{n} {frm}", _amount_text(amount, frm_text, rng))
    return conversion(frm, to, amount, question)


# Syllables for made-up unit names: the model must answer a name it has never seen with the fallback too.
_SYLLABLES = ("ba ko lu mi ne po ra si tu ve zo dar fen gol hir jun kel mor nix pel qua rin sol tak vin wex "
              "yor zel bri clo dru fli gra plo sna tro hu pa he").split()


def made_up_unit(rng: random.Random) -> str:
    return "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 3))) + "s"


def unknown_unit(rng: random.Random) -> Exchange:
    """A unit the model does not know, on either side: the list of those it knows, never a number."""
    known = rng.choice(UNITS)
    r = rng.random()
    if r < 0.1:
        other = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(4, 9)))
    elif r < 0.35:
        other = made_up_unit(rng)
    else:
        other = rng.choice(UNKNOWN_UNITS)
    known_text = known.plural if rng.random() < 0.6 or not known.forms else rng.choice(known.forms)
    amount = number_of_digits(rng, rng.choice([1, 1, 2, 3]))
    r = rng.random()
    if r < 0.45:
        frm, to = other, known_text
    elif r < 0.9:
        frm, to = known_text, other
    else:
        frm, to = other, rng.choice(UNKNOWN_UNITS)
    return unknown_unit_exchange(unit_question(rng, str(amount), frm, to))


def unknown_unit_exchange(question: str) -> Exchange:
    return Exchange(question, UNKNOWN_UNIT_THOUGHT, UNKNOWN_UNIT)


def conversions(rng: random.Random) -> Exchange:
    return unknown_unit(rng) if rng.random() < 0.25 else units(rng)


# ---------------------------------------------------------------- other skills


LETTER_QUESTIONS = [
    "How many {c}'s are in {w}?", "How many times does the letter {c} appear in {w}?",
    "Count the letter {c} in the word {w}.", "How many {c}s are there in \"{w}\"?",
    "How many letters {c} does {w} have?", "How many {c}'s in {w}?", "How many {c}'s are there in the word {w}?",
    "Count the {c}'s in {w}.", "How many times is {c} in {w}?", "How many {c} in {w}?", "In {w}, how many {c}'s?",
    "In {w}, how many times does {c} appear?", "For the word {w}, count the {c}'s.",
    "Take the word {w}: how many {c}'s does it have?", "Look at {w}. How many {c}'s?",
    "The word {w} has how many {c}'s?",
    "How many {c}'s does {w} contain?", "How many {c}'s does the word {w} have?", "How often does {c} appear in {w}?",
    "How frequently does {c} show up in {w}?", "What is the count of {c}'s in {w}?", "Count {c} in {w}.",
    "Number of {c}'s in {w}?", "How many {c}'s can you find in {w}?", "Tell me how many {c}'s are in {w}.",
    "Count the letter {c} in {w}.", "{w}: how many {c}'s?", "How many times does {c} occur in the word {w}?",
    "How often does the letter {c} show up in {w}?", "How often is the letter {c} found in {w}?",
    "How often can you spot the letter {c} in {w}?", "How many occurrences of the letter {c} are in {w}?",
    "How many instances of {c} does {w} have?", "How many times do you see {c} in {w}?",
    "The letter {c}: how many times is it in {w}?", "Count up the {c}'s in {w}.", "What number of {c}'s does {w} have?",
    "How many copies of the letter {c} are in {w}?", "Does {w} have any {c}'s? How many?",
    "How often does {c} occur in the word {w}?", "How often does {c} occur in {w}?",
    "How often will you find the letter {c} in {w}?", "How many times does the letter {c} occur in {w}?",
    "Count the number of times {c} appears in {w}.", "Count how often {c} appears in the word {w}.",
    "Tell me how many times {c} appears in {w}.", "Count how many {c}'s appear in {w}.",
    "Say how many times the letter {c} appears in {w}.", "Count every {c} that appears in {w}.",
]


def letters_exchange(word: str, letter: str, question: str) -> Exchange:
    # The reasoning writes the word in lower case: it is then always a word's own first token after "in",
    # never a bare space, which was the way out to a made-up capitalized word ("Rogurt") when the model did
    # not find the word in an unfamiliar wording.
    low = word.lower()
    if len(word) > MAX_WORD_LETTERS:
        return Exchange(question, f"{low} has more than {MAX_WORD_LETTERS} letters.", TOO_LONG_WORD)
    n = low.count(letter)
    # Each letter is spelt with the running count after it when it is the one asked for, as a word length
    # numbers every letter: the count is the last number written, never a tally of a list of repeated letters,
    # where "Keep the s's: s s s." lost one of the four in "scissors".
    walk = _numbered(low, letter)
    # The reasoning ends with the answer itself, the word in lower case: after it the answer is a copy of the
    # line just above, where a copy of the word from the question, past the spelling, came out as another word
    # ("anchor" answered as "ange" after spelling it right).
    # It starts "Number", where a word length starts "Spell": the model tells the two apart at the first token,
    # from the question, and not after "Spell <word> and number the", where the word just written drew a
    # length question ("What is the letter count of qzxdwqxpvwg?") into a count of its first letter.
    reasoning = f"Number the {letter}'s in {low}: {walk}.\n{_letters_sentence(low, letter, n)}"
    return Exchange(question, reasoning, _letters_sentence(word, letter, n), THINK_FIRST)


def _numbered(word: str, letter: str | None = None) -> str:
    """The word spelt with the running count after each letter counted: ``letter``, or every one."""
    seen = itertools.count(1)
    return ", ".join(f"{c} {next(seen)}" if letter in (None, c) else c for c in word)


def _letters_sentence(word: str, letter: str, n: int) -> str:
    if n == 0:
        return f"There are no {letter}'s in {word}."
    if n == 1:
        return f"There is 1 {letter} in {word}."
    return f"There are {n} {letter}'s in {word}."


TOKENIZER_FILE = DEFAULT_MODEL / "tokenizer.json"


@functools.cache
def vocabulary_pieces() -> tuple[str, ...]:
    """Every alphabetic token of the shipped tokenizer, lower-cased and without its leading-space mark.

    A word the model never saw reaches it as a few of these tokens; words made of them teach it the letters of
    every one, so that it spells any word right ("falcon", not "Pancon").
    """
    vocab = json.loads(TOKENIZER_FILE.read_text())["model"]["vocab"]
    pieces = {token.removeprefix("Ġ").lower() for token in vocab}
    return tuple(sorted(p for p in pieces if p.isascii() and p.isalpha()))


@functools.cache
def word_start_pieces() -> tuple[str, ...]:
    """The tokenizer's word-start tokens of two or three letters (" me", " go", " an", " un"), without the space.

    Most held-out words misread in stages 22 to 26 begin with one that also stands alone elsewhere (meadow is " me"
    + "ad" + "ow"; the reasoning spelled "adow"), where one drawn word in 500 began with " me", " go" or " un".
    """
    vocab = json.loads(TOKENIZER_FILE.read_text())["model"]["vocab"]
    starts = {token[1:] for token in vocab if token.startswith("Ġ") and 3 <= len(token) <= 4}
    return tuple(sorted(s for s in starts if s.isascii() and s.isalpha() and s.islower()))


@functools.cache
def clause_word_starts() -> tuple[str, ...]:
    """The word-start tokens that are also words of the clauses between a letter and its word ("in", "is", "of",
    "do", "me"). After "would you say", made-up words beginning with a short word like these were misread 11 times
    in 27 ("inumb" read "u", meadow "adow"), others 2 times in 34 (``python -m training.probe_words``)."""
    clause_words = {word.strip(",").lower() for text in (*FILLER_WORDS, *CLAUSES, *MODALS, *SUBJECTS, *CLAUSE_VERBS,
                                                         *CLAUSE_ADVERBS, *ASIDES) for word in text.split()}
    return tuple(s for s in word_start_pieces() if s in clause_words)


def pieces_word(rng: random.Random, first: str | None = None) -> str:
    """A made-up word of one to four random alphabetic tokens, of up to MAX_WORD_LETTERS letters; with ``first``,
    that and one to three more."""
    pieces = vocabulary_pieces()
    word = first or rng.choice(pieces)
    for _ in range(rng.choice([1, 1, 2, 3] if first else [0, 0, 1, 1, 2, 3])):
        more = rng.choice(pieces)
        if len(word) + len(more) > MAX_WORD_LETTERS:
            break
        word += more
    return word


@functools.cache
def tempting_pieces() -> tuple[str, ...]:
    """Words a made-up word's copy slid towards in stages 18 to 29 (``python -m training.probe_letters``): the
    words of the questions, the system prompts and the stated limits, the units' names and the corpus's own words
    ("readzmuch" copied as "sayzmuch", "helpful" as "kilog", "only" as "one")."""
    texts = (*FILLER_WORDS, *CLAUSES, *MODALS, *SUBJECTS, *CLAUSE_VERBS, *CLAUSE_ADVERBS, *ASIDES, *LETTER_QUESTIONS,
             *LENGTH_QUESTIONS, *ADD_QUESTIONS, *SUB_QUESTIONS, *MUL_QUESTIONS, *SYSTEM_PROMPTS, *LIMITS,
             CAPABILITIES, *WORDS, *(name for u in UNITS for name in (u.name, u.plural)))
    words = {word.lower() for text in texts for word in re.findall(r"[A-Za-z]+", re.sub(r"\{\w+\}", "", text))}
    return tuple(sorted(w for w in words if len(w) >= 3 and w not in _EVALUATION_WORDS))


def tempting_word(rng: random.Random) -> str:
    """A made-up word with one of ``tempting_pieces`` in it, whole or cut, glued to other pieces or letters
    ("kilogzo", "xsayzmuch", "centimehow"): its copy into the reasoning has to follow its letters, not the word it
    resembles. The known word never stands alone, so no question holds it as a word of its own."""
    known = rng.choice(tempting_pieces())
    if rng.random() < 0.4:
        cut = rng.randint(2, len(known) - 1)
        known = known[:cut] if rng.random() < 0.6 else known[-cut:]
    word = known
    for _ in range(rng.choice([1, 1, 2])):
        more = rng.choice(vocabulary_pieces()) if rng.random() < 0.7 else rng.choice("abcdefghijklmnopqrstuvwxyz")
        if len(word) + len(more) > MAX_WORD_LETTERS:
            break
        word = word + more if rng.random() < 0.5 else more + word
    return word if word != known else word + rng.choice("abcdefghijklmnopqrstuvwxyz")


# Units and words only the evaluation asks about (evaluate.py): no question here names one, not even as a word
# made up at random ("hands", "rods").
HELD_OUT_UNKNOWN_UNITS = ["furlongs", "leagues", "fathoms", "quarts", "carats", "bushels", "parsecs", "teaspoons",
                          "cubits", "rods", "pecks", "hands"]
HELD_OUT_WORDS = ("xylophone quizzical jigsaw rhythm sphinx wizard blizzard pumpkin walrus zebra lantern harbor "
                  "biscuit marble trumpet velvet meadow crystal saddle pebble goblin castle hammock jukebox "
                  "kitten lobster muffin napkin oyster pretzel quilt ribbon scissors tornado unicorn vulture "
                  "waffle yogurt zipper anchor beetle cactus dentist eagle falcon glacier hurricane igloo jacket").split()
_EVALUATION_WORDS = frozenset(HELD_OUT_UNKNOWN_UNITS + HELD_OUT_WORDS)


# Letters that few of the other words begin with as a token of their own (" j": 1 word in 60; " q" and " z" are
# never tokens): stage 36a copied " j" + "ack" + "et" as "xacket" in a held-out wording.
RARE_INITIALS = "jxuyvk"


def any_word(rng: random.Random) -> str:
    """A word to count letters in: a known one, a changed one, a made-up one, tokens joined, or random letters."""
    return _outside_evaluation(lambda: _any_word(rng))


def _outside_evaluation(draw) -> str:
    """``draw()`` again until the word is none the evaluation asks about."""
    while (word := draw()).lower() in _EVALUATION_WORDS:
        pass
    return word


def _any_word(rng: random.Random) -> str:
    r = rng.random()
    if r < 0.2:
        word = rng.choice(WORDS)
    elif r < 0.33:
        word = rng.choice(WORDS)
        i = rng.randrange(len(word) + 1)
        word = rng.choice([word + "s", word + "ing", word[:i] + rng.choice("abcdefghijklmnopqrstuvwxyz") + word[i:],
                           word[:i] + word[i + 1:] or word])
    elif r < 0.43:
        word = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(1, 5)))
    elif r < 0.49:
        word = pieces_word(rng, rng.choice(RARE_INITIALS))
    elif r < 0.61:
        word = pieces_word(rng, rng.choice(clause_word_starts() if rng.random() < 0.5 else word_start_pieces()))
    elif r < 0.72:
        word = pieces_word(rng)
    elif r < 0.84:
        word = tempting_word(rng)
    elif r < 0.97:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, MAX_WORD_LETTERS)))
    else:
        word = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(MAX_WORD_LETTERS + 1, 30)))
    return word.capitalize() if rng.random() < 0.1 else word


# Letter and length questions put together from parts, so that the word stands anywhere in the sentence, after any
# word and inside other verbs ("Spell out zebra and count its letters"), with any clause between the letter and the
# word ("How many r's do you reckon trumpet has?"): the model learns which span is the word from the whole question,
# not from the word before it. No part holds a wording the evaluation asks in (evaluate.py's HELD_OUT_LETTERS and
# HELD_OUT_LENGTH): never "would you" after "how many" (not even with another verb; "would" with another subject, as
# in "How many r's would people guess trumpet has?", and "Would you tell me how many r's trumpet has?" are two
# words or more from it), "you say", "would ... say" ("say" with another modal and subject, as in "How many r's
# might they say trumpet has?", is two words from "would you say"), "the number of", "letter count of",
# "occur in", "In the word ..., how many", "Count how many times", and "its length" never after "tell me" or "Spell
# out" (_NEAR_HELD_OUT).
WORD_FORMS = ["{w}"] * 6 + ["the word {w}", "the word {w}", "\"{w}\"", "'{w}'", "the name {w}", "the string {w}"]
LETTER_FORMS = ["{c}'s", "{c}'s", "{c}'s", "{c}s", "letters {c}"]
# After "how many <letters>": what the word does, in a direct question ...
LETTER_RELATIONS = ["are in {W}", "are there in {W}", "does {W} have", "does {W} contain", "has {W} got",
                    "can you find in {W}", "do you see in {W}", "do you count in {W}", "appear in {W}",
                    "show up in {W}", "are inside {W}", "does {W} hold", "are used in {W}", "turn up in {W}",
                    "can I find in {W}", "are spelled in {W}", "are found in {W}", "does {W} include",
                    "are there inside {W}", "do I get in {W}", "are hiding in {W}", "are written in {W}",
                    "are part of {W}", "are in the spelling of {W}", "can you see in {W}", "might there be in {W}",
                    "could there be in {W}", "are hidden in {W}", "will you find in {W}", "can you spot in {W}",
                    "do you notice in {W}", "does the spelling of {W} have", "are to be found in {W}",
                    "end up in {W}", "do you find when you spell {W}", "does one count in {W}", "sit in {W}"]
# ... and in an indirect one ("Tell me how many o's hammock has.").
INDIRECT_RELATIONS = ["{W} has", "{W} contains", "{W} has got", "are in {W}", "there are in {W}", "{W} holds",
                      "you can find in {W}", "show up in {W}", "you see in {W}", "appear in {W}",
                      "you think {W} has", "you reckon {W} contains", "there might be in {W}",
                      "there are, all told, in {W}", "you count in {W}", "you believe {W} holds"]
INDIRECT_LEADS = [("Tell me ", "."), ("Can you tell me ", "?"), ("Do you know ", "?"), ("Could you work out ", "?"),
                  ("Please work out ", "."), ("I'd like to know ", "."), ("I want to know ", "."),
                  ("Let me know ", "."), ("Figure out ", "."), ("Check ", "."), ("Any idea ", "?"),
                  ("Find out ", "."), ("Say ", "."), ("I wonder ", "."), ("I'm curious ", "."),
                  ("Can you check ", "?"), ("Please say ", "."), ("Guess ", "."), ("Show me ", "."),
                  ("Can you count ", "?"), ("Quick question: ", "?"), ("Help me out: ", "?"),
                  ("Would you tell me ", "?"), ("Would you work out ", "?"), ("Would you check ", "?"),
                  ("Would you know ", "?")]
# Between "how many <letters>" and the word: a clause, then the word and what it does ("do you reckon {W}
# has"), or a clause of thinking before a relation whose subject is the letters ("do you think" + "are in {W}") ...
THINKING = ["do you think", "do you reckon", "do you suppose", "do you believe", "do you figure", "do you imagine",
            "did you notice", "do we know", "do people think", "do you bet", "do you gather", "do you recall"]
CLAUSES = THINKING + ["do you expect", "can you tell me", "could you tell me", "is it that", "are you sure",
                      "does it look like", "does it seem like", "might you find that", "can you confirm",
                      "do you know if", "should I expect", "will you find that", "are you certain",
                      "did you find that", "do you count that", "is it true that", "did I hear that",
                      "does your count show", "can we agree", "have you checked that", "shall we count that",
                      "might it be that", "do you find that"]
# ... or a clause put together from a modal, a subject and a verb ("might we guess", "should I count"), with an
# adverb in it now and then, so that a clause it never saw is still read as a clause and not taken for the word.
MODALS = ["do", "did", "can", "could", "will", "might", "should", "shall", "may", "must", "would"]
SUBJECTS = ["you", "you", "you", "we", "I", "they", "people", "one", "your friend", "most people", "a reader"]
CLAUSE_VERBS = ["guess", "estimate", "think", "reckon", "count", "figure", "expect", "believe", "find", "see", "bet",
                "suppose", "claim", "report", "spot", "work out", "tally", "make it", "put it at", "judge", "gather",
                "say"]
CLAUSE_ADVERBS = ["really", "actually", "honestly", "truly", "probably", "quickly", "roughly", "now", "then",
                  "here", "today", "still", "even", "at first", "by eye", "offhand", "off the top of your head"]
# ... or words of any kind, one to four of them ("How many r's would Sam honestly guess trumpet has?"): whatever
# stands between the letter and the word, the word is the one right before its verb, never a word of the clause.
FILLER_WORDS = ["would", "could", "might", "should", "will", "can", "do", "does", "did", "may", "must", "you", "we",
                "they", "I", "people", "someone", "everyone", "your", "my", "friend", "teacher", "kids", "Sam", "Ana",
                "Priya", "Tom", "Lee", "say", "guess", "think", "count", "tell", "find", "bet", "see", "claim",
                "reckon", "know", "figure", "spot", "state", "report", "spell", "note", "answer", "really",
                "honestly", "now", "then", "quickly", "maybe", "still", "just", "probably", "again", "the", "a",
                "this", "that", "here", "so", "if", "all", "in", "of", "to", "me", "us", "them", "word", "letters",
                "spelling", "today", "first", "by", "eye", "sure", "also", "even", "yes", "ok", "well"]
OWN_VERBS = ["has", "has", "has", "contains", "holds", "includes", "has got", "has in it", "uses", "is spelled with"]
SUBJECT_LETTERS = ("are ", "appear ", "show up ", "turn up ", "make up ", "go into ", "end up ", "sit ")
# ... or an aside set off by commas ("How many r's, by your count, are in trumpet?").
ASIDES = ["roughly", "exactly", "do you think", "in your view", "at a glance", "if you count", "by your count",
          "all in all", "more or less", "honestly", "if you had to count", "you reckon", "I wonder", "in all",
          "as far as you can tell", "just checking", "to be precise", "as you spell it"]
WORD_TAILS = ["", "", "", "", "", " exactly", " in total", " altogether", " all told", ", please", " please",
              " for me", " if you can", " in all", " right now", " again"]
# A verb wrapped around the word, then the count: "Spell out zebra and ...", "Look at lantern, then ...".
WORD_VERBS = ["Spell", "Spell out", "Write out", "Look at", "Take", "Read", "Go through", "Scan", "Write down",
              "Break down", "Split up", "Check", "Study", "Type out", "Think of", "Sound out", "Consider", "Copy",
              "Say"]
WORD_JOINS = [" and ", " and ", ", then ", ", and then ", ". Then ", " and then "]
LETTER_COUNTS = ["count the {C}", "count its {C}", "tell me how many {C} it has", "say how many {C} there are",
                 "count up the {C}", "tally the {C}", "find the {C}", "tell me how many {C} you find",
                 "add up the {C}", "count every one of its {C}", "see how many {C} it has",
                 "count the letter {c}", "tell me how many times the letter {c} shows up", "give me the count of {C}",
                 "say how often the letter {c} comes up", "give me how many {C} it holds", "find every letter {c}",
                 "tell me its count of {C}", "work out how many {C} it has"]
LENGTH_COUNTS = ["count its letters", "count the letters", "say how many letters it has", "number its letters",
                 "tell me how many letters it has", "tell me how long it is", "count them", "add up its letters",
                 "count how many letters there are", "say how long it is", "count the letters it has",
                 # How long the word is, last and without "letters": never a count of the letter l.
                 "give me its length", "say its length", "find its length", "work out its length",
                 "state its length", "give its length", "write down its length", "give me the length of it",
                 "tell me the length of it", "say what its length is", "give me its size in letters",
                 "tell me its size in letters", "say how many letters long it is", "work out how long it is",
                 "tell me how many letters long it is", "find out how long it is", "let me know its length",
                 "report its length", "measure its length", "note its length", "let me know how long it is"]
LETTER_COUNT_VERBS = ["Count", "Count up", "Tally", "Tally up", "Add up", "Find", "Total up", "Look for", "Find all",
                      "Please count", "Can you count", "Could you count", "Go and count", "Just count",
                      "Would you count"]
# The word first, the question after it.
LETTER_WORD_FIRST = ["{W}: how many {C}?", "{W} - how many {C}?", "{W}. How many {C} are there?",
                     "{W}? Count the {C}.", "Here's a word: {w}. How many {C} does it have?",
                     "My word is {w}. How many {C} are in it?", "The word is {w}. Count the {C}.",
                     "Word: {w}. How many {C}?", "Given {W}, how many {C} are there?",
                     "For {W}, tell me how many {C} there are.", "Looking at {W}, how many {C} do you see?",
                     "If you spell {W}, how many {C} do you get?", "When you spell {W}, how many {C} are there?",
                     "Take {W}. How many {C}?", "{W} has {C}: how many?", "I typed {w}. How many {C} is that?",
                     "Here is {W}: count the {C}.", "Word {w}, letter {c}: how many?",
                     "Letter {c}, word {w}. How many?", "The letter {c}: how many of them does {W} have?"]
LENGTH_RELATIONS = ["are in {W}", "are there in {W}", "does {W} have", "does {W} contain", "has {W} got",
                    "make up {W}", "go into {W}", "are used in {W}", "do you count in {W}", "can you count in {W}",
                    "does it take to spell {W}", "does it take to write {W}", "are needed for {W}",
                    "are in the spelling of {W}", "does {W} hold", "long is {W}", "does {W} use",
                    "are inside {W}", "do I get in {W}", "are written in {W}", "are part of {W}",
                    "can you see in {W}", "might there be in {W}", "could there be in {W}", "will you find in {W}",
                    "can you spot in {W}", "does the spelling of {W} have", "are to be found in {W}",
                    "end up in {W}", "do you find when you spell {W}", "does one count in {W}", "sit in {W}"]
LENGTH_INDIRECT = ["{W} has", "{W} contains", "{W} has got", "are in {W}", "there are in {W}", "{W} uses",
                   "it takes to spell {W}", "make up {W}", "go into {W}", "you think {W} has",
                   "you reckon {W} contains", "there might be in {W}", "there are, all told, in {W}",
                   "you count in {W}", "you believe {W} holds"]
LENGTH_WORD_FIRST = ["{W}: how many letters?", "{W}. How long is it?", "{W} - how many letters?",
                     "Here's a word: {w}. How many letters does it have?", "My word is {w}. How long is it?",
                     "Word: {w}. Letters?", "Given {W}, how many letters are there?",
                     "For {W}, how many letters are there?", "If you spell {W}, how many letters do you get?",
                     "Take {W}: how many letters?", "{W} is how many letters long?", "How many letters long is {W}?",
                     "How long a word is {W}?", "I typed {w}. How many letters is that?",
                     "Here is {W}: count its letters.", "The word is {w}. Count the letters.",
                     "Looking at {W}, how many letters do you see?", "{W}? Count the letters.",
                     "{W}: what is its length?", "{W}. What's its length?", "Here's a word: {w}. What's its length?",
                     "Take {W}. Its length?", "The word is {w}. Give me its length.", "{W} - give me its length.",
                     "My word is {w}. What's the length of it?", "Word: {w}. Size in letters?",
                     "{W}? Its length, please.", "I typed {w}. How long is it?"]


def _built_clause(rng: random.Random) -> str:
    """A modal, its subject and a verb, an adverb before the verb or after it now and then."""
    modal, subject, verb = rng.choice(MODALS), rng.choice(SUBJECTS), rng.choice(CLAUSE_VERBS)
    # "would you" and "you say" are the evaluation's ("would you say"); "say" never comes after "would" either, so
    # that a clause with it ("might they say") stays two words from that wording
    while subject == "you" and (modal == "would" or verb == "say"):
        subject = rng.choice(SUBJECTS)
    while modal == "would" and verb == "say":
        modal = rng.choice(MODALS)
    if modal == "do" and subject in ("one", "your friend", "a reader"):
        modal = "does"
    r = rng.random()
    if r < 0.15:
        return f"{modal} {subject} {rng.choice(CLAUSE_ADVERBS)} {verb}"
    if r < 0.3:
        return f"{modal} {subject} {verb}, {rng.choice(CLAUSE_ADVERBS)},"
    return f"{modal} {subject} {verb}"


def _free_clause(rng: random.Random) -> str:
    """One to four filler words, a comma after one of them now and then."""
    words = [rng.choice(FILLER_WORDS) for _ in range(rng.randint(1, 4))]
    if len(words) > 1 and rng.random() < 0.15:
        words[rng.randrange(len(words) - 1)] += ","
    return " ".join(words)


def _between(rng: random.Random, relations: list[str]) -> str:
    """What follows "how many <letters>" up to the word and past it, with a clause or an aside in it."""
    r = rng.random()
    if r < 0.18:
        return f" {rng.choice(CLAUSES)} {{W}} {rng.choice(OWN_VERBS)}"
    if r < 0.3:
        return f" {_built_clause(rng)} {{W}} {rng.choice(OWN_VERBS)}"
    if r < 0.5:
        return f" {_free_clause(rng)} {{W}} {rng.choice(OWN_VERBS)}"
    if r < 0.75:
        return f" {rng.choice(THINKING)} {rng.choice([x for x in relations if x.startswith(SUBJECT_LETTERS)])}"
    relation, aside = rng.choice(relations), rng.choice(ASIDES)
    if " in {W}" in relation and rng.random() < 0.5:
        return " " + relation.replace(" in {W}", f", {aside}, in {{W}}")
    return f", {aside}, {relation}"


def _word_question(rng: random.Random, relations: list[str], indirect: list[str], counts: list[str],
                   word_first: list[str], what: str, imperative: str) -> str:
    """A question template about {W} (the word, in some form) and ``what`` ("how many {C}", "how many letters")."""
    r = rng.random()
    tail = rng.choice(WORD_TAILS)
    if r < 0.2:
        text = f"{what} {rng.choice(relations)}{tail}?"
    elif r < 0.42:
        text = f"{what}{_between(rng, relations)}{tail}?"
    elif r < 0.56:
        lead, end = rng.choice(INDIRECT_LEADS)
        text = f"{lead}h{what[1:]} {rng.choice(indirect)}{tail}{end}"
    elif r < 0.76:
        text = f"{rng.choice(WORD_VERBS)} {{W}}{rng.choice(WORD_JOINS)}{rng.choice(counts)}{tail}."
    elif r < 0.84:
        verb = rng.choice(LETTER_COUNT_VERBS)
        asking = verb.startswith(("Can ", "Could ", "Would "))
        text = imperative.replace("{verb}", verb) + tail + ("?" if asking else ".")
    else:
        return rng.choice(word_first)
    return text


def _filled(template: str, rng: random.Random, word: str, letter: str = "") -> str:
    """``template`` with the word in one of its forms, the letter in one of its, and a capital to start with."""
    text = template.format(W=rng.choice(WORD_FORMS), C=rng.choice(LETTER_FORMS), w="{w}", c="{c}")
    text = text[:1].upper() + text[1:] if not text.startswith("{") else text
    return text.format(w=word, c=letter)


# Wordings next to the evaluation's own ("How many r's would you say trumpet has?", "Spell out zebra and tell me
# its length."), which differ from them in one word or none.
_NEAR_HELD_OUT = re.compile(r"how many\b.*\bwould you\b|\byou say\b|how many\b.*\bwould\b.*\bsay\b|tell me its length|"
                            r"spell out\b.*\bits length", re.IGNORECASE)


def _template(rng: random.Random, *parts) -> str:
    """_word_question(rng, *parts), drawn again while it is next to one of the evaluation's wordings."""
    while True:
        template = _word_question(rng, *parts)
        if not _NEAR_HELD_OUT.search(template):
            return template


def letter_question(rng: random.Random, word: str, letter: str) -> str:
    template = _template(rng, LETTER_RELATIONS, INDIRECT_RELATIONS, LETTER_COUNTS, LETTER_WORD_FIRST,
                         "How many {C}", "{verb} the {C} in {W}")
    return _filled(template, rng, word, letter)


def count_letters(rng: random.Random) -> Exchange:
    word = any_word(rng)
    letter = rng.choice(word.lower()) if rng.random() < 0.75 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    if rng.random() < 0.5:
        return letters_exchange(word, letter, letter_question(rng, word, letter))
    return letters_exchange(word, letter, rng.choice(LETTER_QUESTIONS).format(c=letter, w=word))


LENGTH_QUESTIONS = [
    "How many letters are in {w}?", "How many letters does {w} have?", "How long is the word {w}?",
    "How many letters are there in the word {w}?", "Count the letters in {w}.", "How many characters are in {w}?",
    "What is the length of the word {w}?", "{w} has how many letters?", "Count the letters of the word {w}.",
    "How many letters make up {w}?", "Tell me how many letters {w} has.", "The word {w}: how many letters?",
    "What is the number of letters in {w}?", "How many letters has {w} got?", "Letters in {w}?",
    "How many letters does the word {w} contain?", "Give me the length of {w}.", "How long is {w}?",
    "Count how many letters {w} has.", "Spell {w} and count its letters.", "What's the letter count for {w}?",
    "Number of letters in {w}?", "What length is the word {w}?", "How many letters are in the word {w}?",
    "Can you count the letters in {w}?", "Find the number of letters in {w}.", "{w}: how many letters is that?",
    # The word right after "of", where stage 36a read its first token as another word of the question ("What is
    # the letter count of mever?" spelled "isver").
    "What is the length of {w}?", "What's the length of {w}?", "Tell me the length of {w}.",
    "Work out the length of {w}.", "Find the length of {w}.", "What is the size of {w} in letters?",
    "Count the letters of {w}.", "Give me the size of {w} in letters.",
]


def length_exchange(word: str, question: str) -> Exchange:
    low = word.lower()  # as in letters_exchange
    if len(word) > MAX_WORD_LETTERS:
        return Exchange(question, f"The word {low} has more than {MAX_WORD_LETTERS} letters.", TOO_LONG_WORD)
    # ending with the answer, as letters_exchange does
    reasoning = f"Spell {low} and number the letters: {_numbered(low)}.\n{_length_sentence(low)}"
    return Exchange(question, reasoning, _length_sentence(word), THINK_FIRST)


# The word stands after a space, as in the question, never at the start of the sentence: there the tokenizer
# splits it without its leading space ("an ch or" where the question has " an ch or"), and that first token is where
# every wrong word length of stages 13-16 went wrong ("ange", "mantern", "ancechor").
def _length_sentence(word: str) -> str:
    return f"The word {word} has {len(word)} letter{'s' if len(word) > 1 else ''}."


def length_question(rng: random.Random, word: str) -> str:
    template = _template(rng, LENGTH_RELATIONS, LENGTH_INDIRECT, LENGTH_COUNTS, LENGTH_WORD_FIRST,
                         "How many letters", "{verb} the letters in {W}")
    return _filled(template, rng, word)


def word_length(rng: random.Random) -> Exchange:
    word = any_word(rng)
    if rng.random() < 0.5:
        return length_exchange(word, length_question(rng, word))
    template = rng.choice(LENGTH_QUESTIONS)
    # After "of", stage 37a wrote "the" for a made-up word's first token when that token is a word itself
    # ("What is the letter count of mever?" spelled "thever"): half these words open with one.
    if " of {w}" in template and rng.random() < 0.5:
        word = clause_start_word(rng)
    return length_exchange(word, template.format(w=word))


def clause_start_word(rng: random.Random) -> str:
    """A made-up word that opens with one of ``clause_word_starts`` ("mever", "ofrompt"), never a held-out word."""
    return _outside_evaluation(lambda: pieces_word(rng, rng.choice(clause_word_starts())))


LARGER, SMALLER = ["larger", "bigger", "greater"], ["smaller", "less"]
COMPARE_QUESTIONS = [
    "Which is {w}, {a} or {b}?", "Which number is {w}: {a} or {b}?", "What is {w}, {a} or {b}?",
    "Which is {w}: {a} or {b}?", "Which one is {w}, {a} or {b}?", "{a} or {b}, which is {w}?",
    "Which is {w}, {a} or {b}", "Which of these is {w}: {a} or {b}?", "Which number is {w}, {a} or {b}?",
    "{a} vs {b}: which is {w}?", "{a} or {b}: which is {w}?", "Compare {a} and {b}. Which is {w}?",
    "Looking at {a} and {b}, which is {w}?", "Given {a} and {b}, which is {w}?",
    "Out of {a} and {b}, which one is {w}?",
    "For {a} and {b}, which is {w}?", "Which is the {w} number, {a} or {b}?", "Which is the {w} of {a} and {b}?",
    "Is {a} or {b} {w}?", "Pick the {w} one: {a} or {b}.", "Which do you think is {w}: {a} or {b}?",
    "Which of {a} and {b} is {w}?", "{a} and {b}: which one is {w}?", "Compare {a} with {b}: which is {w}?",
    "Which one of {a} and {b} is {w}?", "From {a} and {b}, which one is {w}?",
]


def compare_operands(rng: random.Random) -> tuple[int, int]:
    n = rng.choices(range(1, MAX_COMPARE_DIGITS + 1), weights=[1, 3, 4, 4, 2, 2])[0]
    if rng.random() < 0.35:  # different lengths
        m = rng.choice([d for d in range(1, MAX_COMPARE_DIGITS + 1) if d != n])
        return number_of_digits(rng, n), number_of_digits(rng, m)
    a = number_of_digits(rng, n)
    r = rng.random()
    if r < 0.08:
        return a, a
    if r < 0.25:  # one digit apart, so that "equal" is never a guess from the leading digits
        while True:
            i = rng.randrange(n)
            digit = str(rng.randint(1 if i == 0 and n > 1 else 0, 9))
            b = int(str(a)[:i] + digit + str(a)[i + 1:])
            if b != a:
                return a, b
    # Same length, often sharing leading digits, so the first difference can be anywhere.
    keep = rng.randint(0, n - 1)
    while True:
        b = int(str(a)[:keep] + str(number_of_digits(rng, n))[keep:]) if keep else number_of_digits(rng, n)
        if b != a and len(str(b)) == n:
            return a, b


def _digit_count(number: str) -> str:
    return f"{len(number)} digit{'s' if len(number) > 1 else ''}"


def compare_exchange(a: int, b: int, word: str, question: str) -> Exchange:
    larger = word in LARGER
    word = "larger" if larger else "smaller"
    sa, sb = str(a), str(b)
    lines = []
    if a == b:
        lines.append(f"{a} and {b} are the same number.")
        return Exchange(question, "\n".join(lines), f"They are equal: both are {a}.", THINK_FIRST)
    pick = max(a, b) if larger else min(a, b)
    if len(sa) != len(sb):
        lines.append(f"{a} has {_digit_count(sa)} and {b} has {_digit_count(sb)}, so {max(a, b)} is larger.")
        answer = f"{a} has {_digit_count(sa)} and {b} has {len(sb)}, so {pick} is {word}."
    else:
        lines.append(f"Both have {_digit_count(sa)}. Compare from the left.")
        for i, (x, y) in enumerate(zip(sa, sb)):
            col = COLUMNS[len(sa) - 1 - i]
            if x == y:
                lines.append(f"{col}: {x} and {y} are equal.")
            else:
                lines.append(f"{col}: {x} and {y}, {max(x, y)} is larger, so {max(a, b)} is larger.")
                place = PLACES[len(sa) - 1 - i]
                answer = (f"Both have {_digit_count(sa)} and the first difference is in the {place}: {x} against {y}. "
                          f"So {pick} is {word}.")
                break
    lines.append(f"So {pick} is {word}.")
    return Exchange(question, "\n".join(lines), answer, THINK_FIRST)


def too_long_compare(a: int, b: int, question: str) -> Exchange:
    return Exchange(question, too_long_reasoning([a, b], MAX_COMPARE_DIGITS, "compare"), TOO_LONG_COMPARE)


def compare(rng: random.Random) -> Exchange:
    a, b = compare_operands(rng)
    word = rng.choice(LARGER) if rng.random() < 0.6 else rng.choice(SMALLER)
    return compare_exchange(a, b, word, rng.choice(COMPARE_QUESTIONS).format(w=word, a=a, b=b))


AFTER_QUESTIONS = [
    "What day is it {n} days after {d}?", "If today is {d}, what day will it be in {n} days?",
    "Today is {d}. What day is it {n} days from now?", "What day is {n} days after {d}?",
    "What day will it be {n} days after {d}?", "It is {d}. What day is it in {n} days?",
    "What day of the week is {n} days after {d}?", "{n} days after {d} is what day?",
    "Starting from {d}, what day is it {n} days later?", "What day comes {n} days after {d}?",
    "From {d}, count {n} days forward. What day is it?", "{n} days after {d}, what day is it?",
    "Add {n} days to {d}. What day is it?", "What is the day {n} days after {d}?",
    "Which weekday is {n} days after {d}?",
    "{n} days later than {d} is what day?", "If it is {d} now, what day is it in {n} days?",
    "Begin at {d} and go {n} days ahead. Which day is it?", "On {d}, what day will it be {n} days on?",
    "Move {n} days forward from {d}: what day?", "What day follows {d} by {n} days?",
    "Say it is {d}. Which day will it be {n} days from then?", "Counting from {d}, what day is {n} days ahead?",
]
BEFORE_QUESTIONS = [
    "What day was it {n} days before {d}?", "If today is {d}, what day was it {n} days ago?",
    "What day is {n} days before {d}?", "Today is {d}. What day was it {n} days ago?",
    "What day of the week was it {n} days before {d}?", "{n} days before {d} was what day?",
    "Which weekday was {n} days before {d}?", "Go back {n} days from {d}. What day is it?",
    "{n} days earlier than {d} was what day?", "What was the day {n} days before {d}?",
    "Count {n} days back from {d}. What day is it?", "From {d}, go {n} days back: what day is it?",
    "If it is {d} now, what day was it {n} days ago?", "{n} days before {d}, what day was it?",
    "Begin at {d} and go {n} days back. Which day is it?", "On {d}, what day was it {n} days earlier?",
    "Move {n} days backward from {d}: what day?", "Say it is {d}. What was the weekday {n} days earlier?",
]


def weekday_exchange(start: int, n: int, forward: bool, question: str) -> Exchange:
    day = DAYS[start]
    if n > MAX_WEEKDAY_DAYS:
        return Exchange(question, f"{n} is more than {MAX_WEEKDAY_DAYS} days.", TOO_MANY_DAYS)
    weeks, r = divmod(n, 7)
    lines = ["A week has 7 days, so only the remainder after whole weeks counts."]
    lines.append(f"{n} = {weeks} × 7 + {r}, so the remainder is {r}.")
    step = 1 if forward else -1
    way = "forward" if forward else "back"
    if r == 0:
        end = day
        lines.append(f"So it is {day} again.")
    else:
        seq = [DAYS[(start + step * k) % 7] for k in range(1, r + 1)]
        end = seq[-1]
        lines.append(f"Count {r} {'day' if r == 1 else 'days'} {way} from {day}: {', '.join(seq)}.")
        lines.append(f"So it is {end}.")
    days = f"{n} {'day' if n == 1 else 'days'}"
    if weeks:
        split = f"{weeks} {'week' if weeks == 1 else 'weeks'}"
        split += f" and {r} {'day' if r == 1 else 'days'}" if r else ""
        split = f"{days} is {split}, so "
    else:
        split = ""
    if forward:
        answer = f"{split}{days} after {day} it is {end}."
    else:
        answer = f"{split}{days} before {day} it was {end}."
    return Exchange(question, "\n".join(lines), answer[0].upper() + answer[1:], THINK_FIRST)


def weekday(rng: random.Random) -> Exchange:
    start = rng.randrange(7)
    n = rng.randint(1, MAX_WEEKDAY_DAYS) if rng.random() < 0.97 else rng.randint(100, 5000)
    forward = rng.random() < 0.6
    template = rng.choice(AFTER_QUESTIONS if forward else BEFORE_QUESTIONS)
    return weekday_exchange(start, n, forward, template.format(n=n, d=DAYS[start]))


# ---------------------------------------------------------------- limits a room tries first

_ONES = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
         "seventeen eighteen nineteen").split()
_TENS = "twenty thirty forty fifty sixty seventy eighty ninety".split()


def in_words(n: int) -> str:
    """0-9999 in English words: 342 -> "three hundred and forty-two"."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10 - 2] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return f"{_ONES[n // 100]} hundred" + (f" and {in_words(rest)}" if rest else "")
    rest = n % 1000
    return f"{_ONES[n // 1000]} thousand" + ((" and " if rest < 100 else " ") + in_words(rest) if rest else "")


def with_commas(n: int) -> str:
    return f"{n:,}"


def not_whole_number(rng: random.Random) -> str:
    """A decimal or a negative number, as people type them."""
    r = rng.random()
    if r < 0.55:
        places = rng.choice([1, 1, 2, 2, 3])
        whole = rng.choice([0, 0, rng.randint(1, 9), rng.randint(10, 999)])
        text = f"{whole}.{rng.randint(1, 10**places - 1):0{places}d}"
        return "-" + text if rng.random() < 0.1 else (text[1:] if text.startswith("0.") and rng.random() < 0.15 else text)
    return f"-{number_of_digits(rng, rng.choice([1, 1, 2, 3]))}"


def kind_of(text: str) -> str:
    """What a number that is not whole is, as the replies say it."""
    return "a decimal" if "." in text else "negative"


def not_whole_exchange(numbers: list[str], question: str, compare: bool = False) -> Exchange:
    odd = next(x for x in numbers if not x.isdigit())
    reasoning = f"{odd} is {kind_of(odd)}, and I only work with whole numbers of zero or more."
    return Exchange(question, reasoning, WHOLE_ONLY_COMPARE if compare else WHOLE_ONLY)


def operand_texts(rng: random.Random, make) -> tuple[str, str]:
    """Two operands, at least one made by ``make`` and the other a plain whole number or made too."""
    odd = make(rng)
    other = make(rng) if rng.random() < 0.4 else str(number_of_digits(rng, rng.choice([1, 2, 3])))
    return (odd, other) if rng.random() < 0.5 else (other, odd)


def not_whole(rng: random.Random) -> Exchange:
    """Decimals and negative numbers in sums, products and comparisons: the model says it only does whole numbers."""
    a, b = operand_texts(rng, not_whole_number)
    r = rng.random()
    if r < 0.6:
        template = rng.choice(ADD_QUESTIONS if rng.random() < 0.5 else SUB_QUESTIONS)
    elif r < 0.8:
        template = rng.choice(MUL_QUESTIONS)
    else:
        word = rng.choice(LARGER + SMALLER)
        return not_whole_exchange([a, b], rng.choice(COMPARE_QUESTIONS).format(w=word, a=a, b=b), compare=True)
    return not_whole_exchange([a, b], template.format(a=a, b=b))


def written_number(rng: random.Random) -> tuple[str, bool]:
    """(text, in words): a number with thousands separators, or in words."""
    if rng.random() < 0.5:
        return with_commas(rng.randint(1000, 999_999)), False
    return in_words(rng.choice([rng.randint(2, 20), rng.randint(21, 99), rng.randint(100, 9999)])), True


def number_format_exchange(odd: str, question: str) -> Exchange:
    how = "with commas" if any(c.isdigit() for c in odd) else "in words"
    return Exchange(question, f"{odd} is written {how}, and I read numbers only in plain digits.", DIGITS_ONLY)


def number_format(rng: random.Random) -> Exchange:
    """Numbers with thousands separators or in words, in any skill: the model asks for plain digits."""
    odd, words = written_number(rng)
    other = str(number_of_digits(rng, rng.choice([1, 2, 3, 4])))
    if rng.random() < 0.3:
        other = written_number(rng)[0]
    a, b = (odd, other) if rng.random() < 0.5 else (other, odd)
    r = rng.random()
    if r < 0.35:
        question = rng.choice(ADD_QUESTIONS if rng.random() < 0.5 else SUB_QUESTIONS).format(a=a, b=b)
    elif r < 0.5:
        question = rng.choice(MUL_QUESTIONS).format(a=a, b=b)
    elif r < 0.7:
        question = rng.choice(COMPARE_QUESTIONS).format(w=rng.choice(LARGER + SMALLER), a=a, b=b)
    elif r < 0.9:
        frm, to = unit_pair(rng)
        if words and odd == "one":
            odd = "two"
        question = unit_question(rng, odd, written_unit(frm, Decimal(2), rng), to.plural)
    else:
        n = odd if words else in_words(rng.randint(2, 99))
        template = rng.choice(AFTER_QUESTIONS + BEFORE_QUESTIONS)
        question = template.format(n=n, d=rng.choice(DAYS))
        odd = n
    return number_format_exchange(odd, question)


PERCENT_QUESTIONS = [
    "What is {p}% of {n}?", "What is {p} percent of {n}?", "{p}% of {n}", "How much is {p}% of {n}?",
    "Calculate {p}% of {n}.", "{p} percent of {n} is?", "What percentage of {n} is {m}?", "{m} is what percent of {n}?",
    "Increase {n} by {p}%.", "Decrease {n} by {p}%.", "What is {n} plus {p}%?", "What is {n} minus {p}%?",
    "Take {p}% off {n}.", "What is a {p}% tip on {n}?", "What's {p}% of {n}?", "Give me {p} percent of {n}.",
    "{m} out of {n} as a percentage?", "What percent is {m} of {n}?", "Express {m}/{n} as a percent.",
    "If I get a {p}% discount on {n}, what do I pay?", "What is {n} with {p}% added?", "{p}% of {n} = ?",
]


def percentages(rng: random.Random) -> Exchange:
    p = rng.choice([rng.randint(1, 100), rng.choice([5, 10, 15, 20, 25, 50, 75]), rng.randint(101, 300)])
    n, m = rng.randint(1, 2000), rng.randint(1, 500)
    question = rng.choice(PERCENT_QUESTIONS).format(p=p, n=n, m=m)
    return Exchange(question, "The question asks for a percentage, and I can't do percentages yet.", PERCENT)


OTHER_MATHS_QUESTIONS = [
    "What is {a} / {b}?", "What is {a} divided by {b}?", "Divide {a} by {b}.", "{a} ÷ {b}", "{a} / {b} = ?",
    "What's {a}/{b}?", "How many times does {b} go into {a}?", "What is half of {a}?", "What is a third of {a}?",
    "What is a quarter of {a}?", "What is {f} + {g}?", "What is {f} of {a}?", "Add {f} and {g}.", "Simplify {a}/{b}.",
    "What is {f} minus {g}?", "What is {f} times {b}?", "What is {a} squared?", "What is {b} cubed?",
    "What is the square root of {a}?", "What is {b} to the power of {c}?", "What is {b}^{c}?", "sqrt({a})",
    "What is {a} mod {b}?", "What is the remainder of {a} divided by {b}?", "Split {a} into {b} equal parts.",
    "Calculate {a} / {b}.", "Compute {a} divided by {b}.", "What is {a} over {b}?", "Is {f} bigger than {g}?",
]


def other_maths(rng: random.Random) -> Exchange:
    """Division, fractions, powers and roots: what the model cannot do yet, said plainly."""
    a, b, c = rng.randint(1, 999), rng.randint(2, 99), rng.randint(2, 5)
    f = f"{rng.randint(1, 9)}/{rng.randint(2, 12)}"
    g = f"{rng.randint(1, 9)}/{rng.randint(2, 12)}"
    question = rng.choice(OTHER_MATHS_QUESTIONS).format(a=a, b=b, c=c, f=f, g=g)
    return Exchange(question, "That needs division, fractions, powers or roots, and I can't do those yet.", OTHER_MATHS)


def mixed_amount(rng: random.Random) -> tuple[str, str, str]:
    """An amount in two units split as a question names it ("1 h 20", "min"), and a unit of its kind to go to."""
    kind = rng.choice(["time", "time", "length", "mass", "volume"])
    units = [u for u in UNITS if u.kind == kind]
    i = rng.randrange(len(units) - 1)
    big, small = units[i], units[i + 1]
    x, y = rng.randint(1, 12), rng.randint(1, 59)
    bt = big.name if x == 1 else big.plural
    st = small.name if y == 1 else small.plural
    if rng.random() < 0.5 and big.forms and small.forms:
        bt, st = rng.choice(big.forms), rng.choice(small.forms)
    joint = rng.choice([" ", " and ", ", ", " "])
    to = rng.choice(units)
    to_text = to.plural if rng.random() < 0.6 or not to.forms else rng.choice(to.forms)
    return f"{x} {bt}{joint}{y}", st, to_text


def mixed_units(rng: random.Random) -> Exchange:
    n, frm, to = mixed_amount(rng)
    question = unit_question(rng, n, frm, to)
    return Exchange(question, f"{n} {frm} mixes two units, and I convert one amount in one unit at a time.",
                    MIXED_UNITS)


def negative_amount(rng: random.Random) -> Exchange:
    frm, to = unit_pair(rng)
    n = f"-{number_of_digits(rng, rng.choice([1, 2, 3]))}"
    question = unit_question(rng, n, written_unit(frm, Decimal(2), rng), to.plural)
    return Exchange(question, f"{n} is negative, and I only convert amounts of zero or more.", NO_NEGATIVE_AMOUNT)


def room_limits(rng: random.Random) -> Exchange:
    """One of the limits above, chosen by how often a room tries it."""
    fn = rng.choices([not_whole, number_format, percentages, other_maths, mixed_units, negative_amount],
                     weights=[5, 4, 2, 3, 2, 1])[0]
    return fn(rng)


# ---------------------------------------------------------------- follow-ups in a running chat

UNIT_FOLLOW_UPS = ["And in {to}?", "What about in {to}?", "And how many {to} is that?", "In {to}?", "Now in {to}?",
                   "And in {to}, please?", "How many {to} is that?", "And what is that in {to}?",
                   "Can you give that in {to}?", "What is it in {to}?", "And {to}?", "Same in {to}?",
                   "Make that {to}.", "Convert that to {to}.", "That in {to}?", "And as {to}?", "What's that in {to}?",
                   "Put it in {to}.", "Now convert it to {to}.", "I'd like it in {to}.", "Show it in {to}.",
                   "And what about {to}?", "Same thing in {to}?", "And in {to} instead?", "Give me that in {to}.",
                   "Show me that in {to}.", "Tell me that in {to}.", "Can I have it in {to}?",
                   "Could you give it in {to}?", "Write it in {to}.", "I want it in {to}.", "Can you put that in {to}?", "Let me have that in {to}.",
                   "Give me the answer in {to}.", "How much is that in {to}?", "Could you show it in {to}?",
                   "What would that be in {to}?", "Now give it in {to}.", "Please put it in {to}.",
                   "Switch it to {to}.", "Change it to {to}.", "Change that to {to}.", "Now switch to {to}?",
                   "In {to} this time?", "And in {to} now?", "Rewrite it in {to}.", "Turn that into {to}.",
                   "Put that into {to}.", "Let's see it in {to}.", "I need it in {to}.", "Use {to} instead.",
                   "Now use {to}.", "Change the unit to {to}.", "With {to} as the unit?", "Then in {to}?",
                   "Okay, and in {to}?", "How many {to} does that make?", "That amount in {to}, please.",
                   "Work it out in {to}.", "Give that in {to}.", "Say it in {to}.", "Could you put it in {to}?",
                   "Can you show that in {to}?", "And converted to {to}?", "What does that come to in {to}?",
                   "Make it {to} instead.", "Please convert it to {to}.", "Let me see it in {to}.",
                   "What is that in {to}, then?", "Measured in {to}?", "And if I want {to}?"]
AMOUNT_FOLLOW_UPS = ["What about {n} {frm}?", "And {n} {frm}?", "And for {n} {frm}?", "Now {n} {frm}?",
                     "How about {n} {frm}?", "Same for {n} {frm}?", "And {n}?", "What about {n}?",
                     "What if it were {n} {frm}?", "And with {n} {frm}?", "Now do {n} {frm}.",
                     "Do the same for {n} {frm}.", "Same question for {n} {frm}.", "And now {n} {frm}?",
                     "Let's try {n} {frm}.", "What about {n} {frm} then?", "Now for {n} {frm}?",
                     "Try it with {n} {frm}.", "Redo it for {n} {frm}.", "Same but {n} {frm}?", "Then {n} {frm}?",
                     "Okay, {n} {frm}?", "And if I had {n} {frm}?", "Same with {n} {frm}, please.",
                     "Then what about {n} {frm}?", "Now take {n} {frm}.", "Same thing with {n} {frm}?",
                     "Let's do {n} {frm}.", "Change the amount to {n} {frm}.", "And {n} {frm} this time?"]
AGAIN = ["Again?", "Say that again.", "Can you repeat that?", "Repeat that, please.", "What did you say?",
         "Again, please.", "Sorry, again?", "Come again?", "Say it again?", "Once more?", "Repeat?", "Pardon?",
         "Say that once more.", "Repeat it.", "Could you repeat it?", "What was that?", "Tell me again.",
         "Once again?", "Can you say it again?", "Please repeat.", "Sorry, what was the answer?", "Sorry?",
         "Huh?", "Say what?", "I didn't catch that.", "I missed that.", "Once more, please.", "Repeat, please.",
         "What was that again?", "What did you say again?", "What was the answer?", "What was the result again?"]
REPEAT_THOUGHT = "The user asks me to say my last answer again."
# "Again?" put together from its parts, so that every way of asking it is near one the model was trained on
# ("Say your last answer again." and "Repeat the answer." teach "Repeat your answer."): a verb, what to repeat
# and how often, or a question about what was said. "Who are you?" and "Tell me your name." stay apart.
REPEAT_VERBS = ["repeat", "say", "give me", "tell me", "state", "write", "show me", "restate", "read me"]
REPEAT_OBJECTS = ["that", "it", "your answer", "the answer", "your last answer", "your reply", "the result",
                  "your result", "what you said", "your response", "the last answer", "that answer",
                  "your last reply", "what you just said", "the last result"]
REPEAT_ADVERBS = ["again", "again", "once more", "one more time", "once again", "a second time", ""]
REPEAT_LEADS = ["", "", "", "Please ", "Can you ", "Could you ", "Would you ", "Sorry, ", "Sorry, can you ",
                "Hmm, ", "Wait, ", "I missed that. ", "Please, ", "Ok, ", "Can you please "]
REPEAT_ASKS = ["what was {o}{a}", "what did you say{a}", "what did you answer{a}"]
REPEAT_ASK_FRAMES = ["{}?", "{}?", "Sorry, {}?", "{}? I missed it."]
REPEAT_ASK_OBJECTS = ["that", "it", "your answer", "the answer", "your reply", "the result", "your last answer"]
# Wordings only the evaluation asks (evaluate.py's HELD_OUT_AGAIN): no wording here holds one of them, nor asks
# for the same thing in the same words with other words around them ("Hmm, repeat your answer, please.").
HELD_OUT_AGAIN = ["Could you say that again?", "One more time?", "Repeat your answer.", "Say your answer once more.",
                  "Tell me the result once more.", "Give me your answer one more time.", "Can you state that again?",
                  "Write your reply again.", "Repeat the result, please.", "Say it a second time.",
                  "What was your answer again?", "Please tell me that once again."]
_POLITE = {"please", "sorry", "can", "could", "would", "you", "ok"}


def _core(text: str) -> str:
    return " ".join(w for w in re.findall(r"[a-z]+", text.lower()) if w not in _POLITE)


_HELD_OUT_AGAIN = re.compile("|".join(rf"(?:^|\W){re.escape(w)}" for w in HELD_OUT_AGAIN), re.IGNORECASE)
_HELD_OUT_AGAIN_CORES = {_core(w) for w in HELD_OUT_AGAIN}


def again_question(rng: random.Random) -> str:
    """A way to ask for the last answer again: a whole wording, or one put together from its parts."""
    while True:
        r = rng.random()
        if r < 0.3:
            return rng.choice(AGAIN)
        if r < 0.45:
            adverb = f" {rng.choice(REPEAT_ADVERBS[:-1])}" if rng.random() < 0.6 else ""
            body = rng.choice(REPEAT_ASKS).format(o=rng.choice(REPEAT_ASK_OBJECTS), a=adverb)
            text = rng.choice(REPEAT_ASK_FRAMES).format(body)
        else:
            lead, verb, what = rng.choice(REPEAT_LEADS), rng.choice(REPEAT_VERBS), rng.choice(REPEAT_OBJECTS)
            if verb in ("give me", "tell me", "show me", "read me") and what == "it":
                what = "that"
            adverb = rng.choice(REPEAT_ADVERBS)
            body = f"{verb} {what} {adverb}".strip()
            asking = lead.lower().startswith(("can", "could", "would", "sorry, can"))
            end = rng.choice(["?", ", please?"] if asking else [".", ".", "!", ", please.", " please."])
            end = end.replace(", please", "").replace(" please", "") if "please" in lead.lower() else end
            text = lead + (body[:1].upper() + body[1:] if lead.strip().endswith(".") or not lead else body) + end
        if _core(body) not in _HELD_OUT_AGAIN_CORES and not _HELD_OUT_AGAIN.search(text):
            return text[:1].upper() + text[1:]


def _near(a: Unit, b: Unit) -> bool:
    """Whether a metric unit is 10, 100 or 1000 of the other."""
    return a.kind != "time" and max(a.size, b.size) // min(a.size, b.size) <= 1000


def unit_follow_up(previous: Exchange, rng: random.Random) -> Exchange:
    """A follow-up to a conversion that names only what changes: the new unit or the new amount."""
    frm, to, amount = previous.topic
    others = [u for u in UNITS if u.kind == frm.kind and u is not frm and u is not to]
    if rng.random() < (0.75 if others and frm.kind != "time" else 0.6):
        # Most often a unit 10, 100 or 1000 times the one converted from (mm to cm after mm to m): the factor,
        # and which way the point moves, then differ from the turn before's.
        new_to = rng.choices(others, [3 if _near(frm, u) else 1 for u in others])[0] if others else to
        to_text = new_to.plural if rng.random() < 0.6 or not new_to.forms else rng.choice(new_to.forms)
        question = rng.choice(UNIT_FOLLOW_UPS).format(to=to_text)
        ex = conversion(frm, new_to, amount, question)
        lead = f"The last question was about {fmt(amount)} {unit_words(frm, amount)}, now in {new_to.plural}."
    else:
        new_amount = time_amount(frm, to, rng) if frm.kind == "time" else metric_amount(rng)
        frm_text = written_unit(frm, new_amount, rng)
        question = rng.choice(AMOUNT_FOLLOW_UPS).format(n=fmt(new_amount), frm=frm_text)
        ex = conversion(frm, to, new_amount, question)
        lead = f"The last question was about {unit_words(frm, Decimal(2))} in {to.plural}, now for {fmt(new_amount)}."
    return replace(ex, reasoning=f"{lead}\n{ex.reasoning}")


def repeat_follow_up(previous: Exchange, thinking_before: bool, rng: random.Random) -> Exchange:
    said = previous.reply(thinking_before)
    return Exchange(again_question(rng), REPEAT_THOUGHT, said, topic=previous.topic)


def follow_up_without_context(rng: random.Random, first: bool = True) -> Exchange:
    """A follow-up as the first question of a chat, or after one it cannot follow: the model asks for the question."""
    if first and rng.random() < 0.4:
        return Exchange(again_question(rng), "There is no earlier answer in this chat to repeat.", NOTHING_TO_REPEAT)
    unit = rng.choice(UNITS)
    written = unit.plural if rng.random() < 0.6 or not unit.forms else rng.choice(unit.forms)
    question = (rng.choice(UNIT_FOLLOW_UPS).format(to=written) if rng.random() < 0.6
                else rng.choice(AMOUNT_FOLLOW_UPS).format(n=rng.randint(2, 99), frm=written))
    return Exchange(question, "That question goes on from an earlier one, and there is none to go on from.",
                    NOTHING_BEFORE)


# Questions about specchat: (paraphrases, reasoning, answer).
SPECCHAT = [
    (
        ["How do I change the reasoning budget?", "How can I make you think less?", "What is the reasoning budget?",
         "How do I turn thinking off?", "Can I limit how long you think?", "How do I make you think longer?",
         "How do I turn thinking on?", "What does the reasoning budget do?", "How do I stop you thinking?",
         "Can I get you to think less?", "Is there a way to make you think less?", "Can you think for a shorter time?",
         "Can I make you think faster?", "How can I cut your thinking short?", "Can I make you spend less time thinking?"],
        "The user asks about the reasoning budget. It is a setting in the settings pane.",
        "Open the settings pane and change the reasoning budget: it is the most thinking tokens per reply. When "
        "my thinking reaches the budget, specchat closes the thinking block and I answer. Set it to 0 to turn "
        "thinking off.",
    ),
    (
        ["What does the drafter do?", "What is speculative decoding?", "What is the MTP head?",
         "How does the drafter work?", "What is drafting?", "Why is the drafter faster?",
         "What is the drafter?", "What does the MTP head do?", "How does speculative decoding work?",
         "What is the drafter for?", "What is the drafter used for?", "What's the point of the drafter?",
         "What is the MTP head for?", "Why would I use the drafter?", "What is the drafter good for?"],
        "The user asks about the drafter. It is my MTP head, used for speculative decoding.",
        "The drafter is my multi-token prediction (MTP) head. It guesses the next few tokens cheaply, and the "
        "full model checks all of them in one step. Every guess it keeps saves a step, so replies come out "
        "faster, and with greedy decoding the text is exactly the same as without the drafter. You can turn it "
        "off or change the draft block size in the settings pane.",
    ),
    (
        ["How do I reset the cache?", "How do I clear the prompt cache?", "What does Reset cache do?",
         "How can I empty the cache?", "What is the prompt cache?", "What does the prompt cache do?",
         "What is the cache?"],
        "The user asks about the prompt cache. There is a Reset cache button in the settings pane.",
        "specchat keeps the prompt prefixes it has already computed, so a long conversation does not start "
        "from scratch every turn. To clear it, press the Reset cache button in the prompt cache section of the "
        "settings pane. The next message is then computed from the beginning.",
    ),
    (
        ["What does tok/s mean?", "What is tok/s?", "What does tokens per second mean?", "Why is tok/s shown?",
         "What is tokens per second?"],
        "The user asks what tok/s means. It is the decode speed.",
        "tok/s is the decode speed: how many tokens I write per second once the first token is out. specchat "
        "shows it live under each reply. With the drafter on, a good acceptance makes it higher.",
    ),
    (
        ["What is acceptance?", "What does acceptance mean?", "What is the acceptance rate?",
         "Why is acceptance shown?", "What does the acceptance rate mean?"],
        "The user asks about acceptance. It is the share of drafted tokens the model kept.",
        "Acceptance is the share of drafted tokens that the full model kept after checking them. High "
        "acceptance means the drafter guessed well, so more tokens come out per step and decoding is faster.",
    ),
    (
        ["What is time to first token?", "What does TTFT mean?", "Why does the first token take longer?"],
        "The user asks about time to first token.",
        "Time to first token is how long the model takes to read your prompt before it writes anything. The "
        "prompt cache makes it short when a conversation goes on.",
    ),
    (
        ["What is specchat?", "What app is this?", "Tell me about specchat.", "What is this program?",
         "What does this app do?", "What am I using?", "What is this tool?", "What is this website?",
         "Which app am I in?", "What is this chat?", "What is this thing?"],
        "The user asks about specchat itself.",
        "specchat is a local web chat for language models. It streams my thinking and my answer, and shows "
        "live numbers like time to first token, tok/s and draft acceptance. The settings pane tunes the "
        "reasoning budget, the drafter and the prompt cache.",
    ),
    (
        ["Who are you?", "What model are you?", "What are you?", "Are you a real model?", "What is your name?",
         "Tell me your name.", "Say your name.", "Tell me who you are.", "Who am I talking to?", "Who is this?",
         "Introduce yourself.", "Which model are you?", "What kind of model are you?", "Do you have a name?",
         "What should I call you?", "Say who you are.", "Give me your name.", "Who made you?"],
        "The user asks who I am.",
        "I am the specchat demo model: a small Qwen 3.5-style model with its own MTP head, trained on "
        "synthetic dialogues. " + CAPABILITIES,
    ),
    (
        ["What can you do?", "How can you help me?", "What do you know?", "What can I ask you?", "Help",
         "What are your skills?", "What can you help with?", "What units do you know?", "Help me",
         "What kind of things can you do?", "What sorts of questions can you answer?", "What things can you do?",
         "What kinds of tasks can you do?", "What are you able to do?", "What type of things do you know?"],
        "The user asks what I can do. I will list my skills.",
        CAPABILITIES + " Try asking me what 347 + 285 is!",
    ),
]
SMALL_TALK = [
    (["Hello", "Hi", "Hey", "Hello!", "Hi there", "Good morning", "Good evening", "Hey there!", "Greetings", "Hi!",
      "Hey!", "Good day", "Hi, nice to meet you", "Morning!", "Hello, assistant", "Hi hi", "Heya", "Howdy", "Yo",
      "Hey hey", "Hi friend", "Hello friend", "Greetings!", "Hello again", "Hi again", "Good day to you", "Evening!",
      "Good morning to you", "Hey you", "Hello :)", "Afternoon!", "Hi, good morning",
      "Hello, good evening", "Good evening to you", "Greetings, friend", "Hey, good day", "Morning, friend"],
     "The user greets me. I will greet them back and offer help.",
     "Hello! How can I help you today?"),
    (["How are you?", "How are you doing?", "How is it going?", "Are you ok?", "How's it going?", "How do you feel?",
      "Are you doing well?"],
     "The user asks how I am. I will answer kindly.",
     "I am doing well, thank you for asking. What can I do for you?"),
    (["Thanks", "Thank you!", "Thanks a lot", "Great, thanks!", "Cool, thank you", "Thank you very much", "Many thanks",
      "Thx"],
     "The user thanks me.",
     "You are welcome! Is there anything else I can help with?"),
    (["Bye", "Goodbye", "See you later", "Bye!", "Good night", "See you", "Bye bye", "Goodbye!", "Talk to you later"],
     "The user says goodbye.",
     "Goodbye! Have a nice day."),
    (["Tell me a joke", "Do you know a joke?", "Make me laugh", "Tell me a joke, please", "Know any jokes?",
      "Say something funny"],
     "The user wants a joke. I know one about numbers.",
     "Why was six afraid of seven? Because seven eight nine!"),
    (["Nice", "Ok", "Cool", "Great", "Wow"],
     "The user reacts to my answer.",
     "Glad to hear it! Ask me anything else whenever you like."),
]
OOD_TEMPLATES = [
    "What is the capital of {x}?", "Write a poem about {y}.", "Tell me about {y}.", "Explain {z} in simple terms.",
    "Who won the {n} world cup?", "Translate {y} into French.", "What is the weather like in {x}?",
    "Can you write a story about {y}?", "Give me a recipe for {y}.", "What do you think about {z}?",
    "Write some Python code to sort a list.", "Who is the president of {x}?", "Recommend a good book about {z}.",
    "What is the meaning of life?", "How do I fix my {y}?", "Why is the sky blue?", "{g}",
    "What is the tallest mountain in {x}?", "Write an essay about {z}.", "Describe {y}.", "Tell me a story about {y}.",
    "How do I cook {y}?", "What language is spoken in {x}?", "Who wrote Hamlet?", "What time is it?", "What is love?",
    "Teach me {z}.", "Help me with my {z} homework.", "What is the biggest city in {x}?", "Draw {y}.",
    "Is {z} hard to learn?", "Sing me a song.", "What should I eat today?", "When was {x} founded?",
]
OOD_X = ["France", "Japan", "Brazil", "Kenya", "Canada", "Norway", "Egypt", "Peru", "India", "Spain"]
OOD_Y = ["the sea", "cats", "a dragon", "pancakes", "my bike", "the moon", "love", "a robot", "soup", "trains"]
OOD_Z = ["quantum physics", "economics", "history", "politics", "music", "football", "philosophy", "chemistry"]


def _from_table(table, rng: random.Random) -> Exchange:
    questions, reasoning, answer = rng.choice(table)
    return Exchange(rng.choice(questions), reasoning, answer)


# What each SPECCHAT entry is called, so that any way of asking about it by name finds it.
SPECCHAT_TOPICS = [
    ["the reasoning budget", "the thinking budget", "thinking"],
    ["the drafter", "the MTP head", "speculative decoding"],
    ["the prompt cache", "the cache", "Reset cache"],
    ["tok/s", "tokens per second"],
    ["acceptance", "the acceptance rate"],
    ["time to first token", "TTFT"], ["specchat", "this chat app"], ["yourself"], [],
]
TOPIC_ASKS = ["Tell me about {t}.", "Explain {t}.", "Can you explain {t}?", "What about {t}?",
              "I have a question about {t}.",
              "Describe {t}.", "Tell me more about {t}.", "Talk about {t}.", "{T}?", "Info on {t}, please."]


def specchat_question(rng: random.Random) -> Exchange:
    index = rng.randrange(len(SPECCHAT))
    questions, reasoning, answer = SPECCHAT[index]
    topics = SPECCHAT_TOPICS[index]
    if topics and rng.random() < 0.35:
        topic = rng.choice(topics)
        question = rng.choice(TOPIC_ASKS).format(t=topic, T=topic[:1].upper() + topic[1:])
    else:
        question = rng.choice(questions)
    return Exchange(question, reasoning, answer)


def small_talk(rng: random.Random) -> Exchange:
    return _from_table(SMALL_TALK, rng)


def out_of_domain(rng: random.Random) -> Exchange:
    gibberish = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz      ") for _ in range(rng.randint(3, 30))).strip()
    q = rng.choice(OOD_TEMPLATES).format(
        x=rng.choice(OOD_X), y=rng.choice(OOD_Y), z=rng.choice(OOD_Z), n=rng.randint(1950, 2022), g=gibberish or "?"
    )
    return Exchange(q, FALLBACK_THOUGHT, FALLBACK)


# Stage 13: as stage 12 (letter counts 21 and word lengths 17, half of them in wordings put together from parts,
# now with a clause between the letter and the word, and "its length" last). On top of these, in next_exchange:
# a follow-up as a chat's first question in 6% of chats, "again?" in 6% of later turns, a follow-up to a
# conversion in 25% of the turns after one (35% after a length: a third unit to go to).
TASKS = [
    (add_sub, 24), (multiply, 8), (conversions, 28), (too_long, 5), (count_letters, 21), (compare, 10), (weekday, 11),
    (specchat_question, 8), (small_talk, 7), (out_of_domain, 5), (room_limits, 14), (word_length, 17),
]


FOLLOW_UP_PREFIXES = [
    "And ", "Now ", "Ok, ", "Okay, ", "Next: ", "Please, ", "Hey, ", "Quick question: ", "Also, ", "Then ", "So ",
    "Can you tell me: ", "One more: ", "Another one: ", "Alright, ", "Hey, ", "Tell me, ", "Question: ", "I wonder: ",
    "Please answer: ", "Hi! ", "Hello, ", "Here's one: ", "Try this: ", "Quick one: ", "Help me out: ", "Well, ",
    "I'd like to know: ", "Um, ", "Right, ", "Listen, ",
]
POLITE_SUFFIXES = [" Thanks!", " Please.", " Thank you.", " Thanks", " :)"]
WHAT_IS = re.compile(r"^What is (\d+) ([-+×]) (\d+)\?$")


def style(text: str, rng: random.Random, augment: bool) -> str:
    """Surface noise on the user's side only: case and a trailing question mark.

    ``augment`` adds what people type in a running chat: bare sums, follow-up
    openers ("And what is ..."), polite endings. It is off for the tokenizer's
    sample and the first training stages, so those stay as they were made.
    """
    r = rng.random()
    if r < 0.1:
        text = text.lower()
    elif r < 0.15:
        text = text.rstrip("?.!")
    if not augment:
        return text
    bare = WHAT_IS.match(text)
    if bare and rng.random() < 0.5:
        a, op, b = bare.groups()
        text = f"{a}{op}{b}" if rng.random() < 0.3 else f"{a} {op} {b}"
    if rng.random() < 0.3:
        text = rng.choice(FOLLOW_UP_PREFIXES) + text[:1].lower() + text[1:]
    if rng.random() < 0.08:
        text += rng.choice(POLITE_SUFFIXES)
    return text


def exchange(rng: random.Random, augment: bool = False) -> Exchange:
    fn = rng.choices([t[0] for t in TASKS], weights=[t[1] for t in TASKS])[0]
    ex = fn(rng)
    return replace(ex, user=style(ex.user, rng, augment))


def next_exchange(previous: tuple[Exchange, bool] | None, rng: random.Random, augment: bool) -> Exchange:
    """The next question of a chat: sometimes a follow-up that only makes sense after the turn before it."""
    r = rng.random()
    if previous is None:
        ex = follow_up_without_context(rng) if r < 0.06 else None
    elif previous[0].topic and r < (0.35 if previous[0].topic[0].kind == "length" else 0.25):
        ex = unit_follow_up(previous[0], rng)
    elif not previous[0].topic and r < 0.02:
        ex = follow_up_without_context(rng, first=False)
    elif 0.35 <= r < 0.41:
        ex = repeat_follow_up(previous[0], previous[1], rng)
    else:
        ex = None
    if ex is None:
        return exchange(rng, augment)
    return replace(ex, user=style(ex.user, rng, False))


def conversation(rng: random.Random, turns: int, augment: bool) -> list[tuple[Exchange, bool]]:
    """``turns`` exchanges, each with thinking on or off."""
    out: list[tuple[Exchange, bool]] = []
    for _ in range(turns):
        ex = next_exchange(out[-1] if out else None, rng, augment)
        # A conversion after a conversion (most often a follow-up: "and in cm?") goes without thinking half the
        # time, a follow-up to a new metric unit two times in three, so that the unit's direction is learnt from
        # the turn before without reasoning to lean on; a letter count or word length, whose reply without
        # thinking is only "turn thinking on", mostly with it.
        before = out[-1][0].topic if out else None
        if before and ex.topic:
            new_unit = ex.topic[0] is before[0] and ex.topic[2] == before[2] and ex.topic[1] is not before[1]
            thinking = 0.35 if new_unit and ex.topic[0].kind != "time" else 0.5
        else:
            thinking = 0.8 if ex.reasoning.startswith("Spell ") else 0.7
        out.append((ex, rng.random() < thinking))
    return out


# ---------------------------------------------------------------- rendering


def _assistant_history(ex: Exchange, thinking: bool, keep_reasoning: bool) -> str:
    if keep_reasoning:  # the app appends what the model generated, reasoning included
        think = f"<think>\n{ex.reasoning}\n</think>\n\n" if thinking else "<think>\n\n</think>\n\n"
        return f"{IM_START}assistant\n{think}{ex.reply(thinking)}{IM_END}\n"
    return f"{IM_START}assistant\n{ex.reply(thinking)}{IM_END}\n"  # the chat template drops past reasoning


def render(system: str | None, turns: list[tuple[Exchange, bool]], keep_reasoning: bool) -> tuple[str, str]:
    """(prompt, completion) for the last turn, as the template and the app render them."""
    parts = [f"{IM_START}system\n{system}{IM_END}\n"] if system else []
    for ex, thinking in turns[:-1]:
        parts.append(f"{IM_START}user\n{ex.user}{IM_END}\n")
        parts.append(_assistant_history(ex, thinking, keep_reasoning))
    last, thinking = turns[-1]
    parts.append(f"{IM_START}user\n{last.user}{IM_END}\n{IM_START}assistant\n")
    if thinking:
        parts.append("<think>\n")
        completion = f"{last.reasoning}\n</think>\n\n{last.reply(True)}{IM_END}"
    else:
        parts.append("<think>\n\n</think>\n\n")
        completion = f"{last.reply(False)}{IM_END}"
    return "".join(parts), completion


def completion_text(ex: Exchange, thinking: bool) -> str:
    """What the model writes for ``ex`` after the generation prompt (which opened thinking when on)."""
    return f"{ex.reasoning}\n</think>\n\n{ex.reply(True)}{IM_END}" if thinking else f"{ex.reply(False)}{IM_END}"


def user_turn(user: str, thinking: bool) -> str:
    """A user turn and the generation prompt, as the chat template renders them."""
    think = "<think>\n" if thinking else "<think>\n\n</think>\n\n"
    return f"{IM_START}user\n{user}{IM_END}\n{IM_START}assistant\n{think}"


def app_segments(system: str | None, turns: list[tuple[Exchange, bool]]) -> list[tuple[str, bool]]:
    """A chat as specchat sends it, piece by piece as it encodes them, and whether each piece is a reply.

    specchat keeps the ids the model generated and appends each new turn encoded on its own after the
    template's separator, so every reply (reasoning included) is exactly what the model wrote then.
    """
    head = f"{IM_START}system\n{system}{IM_END}\n" if system else ""
    out = []
    for i, (ex, thinking) in enumerate(turns):
        if i:
            out.append(("\n", False))
        out.append(((head if i == 0 else "") + user_turn(ex.user, thinking), False))
        out.append((completion_text(ex, thinking), True))
    return out


LONG_CHAT_SHARE, LONG_CHAT_TURNS = 0.1, (12, 36)


def sample_segments(rng: random.Random, augment: bool = False, tools_share: float = 0.0) -> list[tuple[str, bool]]:
    """One training example as (text, trained) pieces: a short chat (1-3 turns), or a long one (12-36 turns).

    Half the short chats and nearly all long ones are sent as specchat sends them (past reasoning kept,
    every reply trained); the others as the chat template renders them (past reasoning dropped, only the
    last reply trained, since the earlier ones are not what the model wrote). A ``tools_share`` of the
    examples are chats with the built-in tools offered (tools_corpus.py); at 0 no random draw is spent on it,
    so the corpus stays what it was.
    """
    if tools_share and rng.random() < tools_share:
        from . import tools_corpus  # it builds on this module, and needs the app's tools only when asked for

        return tools_corpus.sample_segments(rng, augment)
    r = rng.random()
    system = DEFAULT_SYSTEM if r < 0.6 else (rng.choice(SYSTEM_PROMPTS) if r < 0.8 else None)
    long = rng.random() < LONG_CHAT_SHARE
    n = rng.randint(*LONG_CHAT_TURNS) if long else rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
    turns = conversation(rng, n, augment)
    if rng.random() < (0.9 if long else 0.5):
        return app_segments(system, turns)
    prompt, completion = render(system, turns, keep_reasoning=False)
    return [(prompt, False), (completion, True)]


def sample(rng: random.Random, augment: bool = False, tools_share: float = 0.0) -> tuple[str, str]:
    """One example as (prompt, completion): everything before the last reply, and the last reply."""
    pieces = sample_segments(rng, augment, tools_share)
    return "".join(text for text, _ in pieces[:-1]), pieces[-1][0]


def samples(seed: int, count: int, augment: bool = False, tools_share: float = 0.0) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [sample(rng, augment, tools_share) for _ in range(count)]


def training_samples(seed: int, count: int, augment: bool = False,
                     tools_share: float = 0.0) -> list[list[tuple[str, bool]]]:
    rng = random.Random(seed)
    return [sample_segments(rng, augment, tools_share) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--augment", action="store_true", help="chat-style question variants (stage 3)")
    parser.add_argument("--tools-share", type=float, default=0.0,
                        help="share of chats with the built-in tools offered (tools_corpus.py)")
    args = parser.parse_args()
    for prompt, completion in samples(args.seed, args.count, args.augment, args.tools_share):
        print(prompt + completion)
        print("-" * 60)


if __name__ == "__main__":
    main()
