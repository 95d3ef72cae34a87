"""Deterministic synthetic dialogues the demo model is trained on.

Every answer is a fixed function of its question (only the questions vary), so a
small model can learn the language exactly and its MTP head can predict it.
Conversations are rendered exactly as the chat template (and the app, which
keeps past reasoning in its token history) shows them to the model.

    python -m demo_model.corpus --count 5 --seed 1     # print a few samples
"""

from __future__ import annotations

import argparse
import random
import re
from dataclasses import dataclass

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
UNITS = [
    # (big unit, small unit, factor, most of the big unit asked about)
    (("kilometer", "kilometers"), ("meter", "meters"), 1000, 99),
    (("meter", "meters"), ("centimeter", "centimeters"), 100, 99),
    (("centimeter", "centimeters"), ("millimeter", "millimeters"), 10, 99),
    (("kilogram", "kilograms"), ("gram", "grams"), 1000, 99),
    (("liter", "liters"), ("milliliter", "milliliters"), 1000, 99),
    (("hour", "hours"), ("minute", "minutes"), 60, 12),
    (("minute", "minutes"), ("second", "seconds"), 60, 12),
    (("day", "days"), ("hour", "hours"), 24, 10),
    (("week", "weeks"), ("day", "days"), 7, 12),
]
CAPABILITIES = (
    "I can add, subtract and multiply step by step, convert units, count letters in a word, "
    "compare numbers, work out weekdays, and explain how specchat works."
)
FALLBACK = (
    "I'm sorry, I can't help with that. I am a small demo model, and I only know arithmetic, unit "
    "conversions, counting letters, comparing numbers, weekdays and specchat itself. Try asking me "
    "one of those!"
)
FALLBACK_THOUGHT = "This question is outside what I know. I will say so politely and say what I can do."


@dataclass
class Exchange:
    user: str
    reasoning: str
    answer: str


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
    return Exchange(question, "\n".join(lines), f"{a} + {b} = {a + b}.")


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
    return Exchange(question, "\n".join(lines), f"{a} - {b} = {a - b}.")


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
    return Exchange(question, "\n".join(lines), f"{a} × {b} = {a * b}.")


ADD_QUESTIONS = [
    "What is {a} + {b}?", "What is {a} plus {b}?", "Compute {a} + {b}.", "Calculate {a} + {b}.",
    "{a} + {b} = ?", "How much is {a} plus {b}?", "Add {a} and {b}.", "What's {a}+{b}?",
    "Can you add {a} and {b}?", "What is the sum of {a} and {b}?",
]
SUB_QUESTIONS = [
    "What is {a} - {b}?", "What is {a} minus {b}?", "Compute {a} - {b}.", "Calculate {a} - {b}.",
    "{a} - {b} = ?", "How much is {a} minus {b}?", "Subtract {b} from {a}.", "What's {a}-{b}?",
    "What is {a} take away {b}?",
]
MUL_QUESTIONS = [
    "What is {a} × {b}?", "What is {a} times {b}?", "Compute {a} * {b}.", "Calculate {a} x {b}.",
    "{a} * {b} = ?", "Multiply {a} by {b}.", "What's {a}*{b}?", "What is the product of {a} and {b}?",
]


def _number(rng: random.Random, digits: int) -> int:
    return rng.randint(10 ** (digits - 1) if digits > 1 else 0, 10**digits - 1)


def _operands(rng: random.Random) -> tuple[int, int]:
    sizes = rng.choices([1, 2, 3, 4], weights=[1, 4, 4, 1], k=2)
    return _number(rng, sizes[0]), _number(rng, sizes[1])


def arithmetic_question(op: str, a: int, b: int, rng: random.Random) -> Exchange:
    if op == "+":
        return add_exchange(a, b, rng.choice(ADD_QUESTIONS).format(a=a, b=b))
    return sub_exchange(a, b, rng.choice(SUB_QUESTIONS).format(a=a, b=b))


def add_sub(rng: random.Random) -> Exchange:
    while True:
        op = rng.choice("+-")
        a, b = _operands(rng)
        if not is_held_out(a, op, b):
            return arithmetic_question(op, a, b, rng)


def held_out_arithmetic(count: int, seed: int = 1234) -> list[tuple[Exchange, int]]:
    """``count`` held-out 2-3 digit add/subtract exchanges and their numeric answers."""
    rng = random.Random(seed)
    out: list[tuple[Exchange, int]] = []
    seen = set()
    while len(out) < count:
        op = rng.choice("+-")
        a, b = _number(rng, rng.choice([2, 3])), _number(rng, rng.choice([2, 3]))
        if is_held_out(a, op, b) and (a, op, b) not in seen:
            seen.add((a, op, b))
            out.append((arithmetic_question(op, a, b, rng), a + b if op == "+" else a - b))
    return out


def multiply(rng: random.Random) -> Exchange:
    if rng.random() < 0.6:
        a, b = _number(rng, rng.choice([1, 2, 3])), rng.randint(2, 9)
    else:
        a, b = _number(rng, 2), _number(rng, 2)
    if rng.random() < 0.3:
        a, b = b, a
        if b >= 10 and a < 10:
            a, b = b, a  # keep the single digit as the multiplier
    return mul_exchange(a, b, rng.choice(MUL_QUESTIONS).format(a=a, b=b))


# ---------------------------------------------------------------- other skills


def _times_lines(n: int, factor: int) -> str:
    return f"{n} × {factor} = {n * factor}."


def units(rng: random.Random) -> Exchange:
    (big1, bigs), (small1, smalls), factor, most = rng.choice(UNITS)
    n = rng.randint(1, most)
    big = big1 if n == 1 else bigs
    if rng.random() < 0.6:
        q = rng.choice([
            "How many {smalls} are in {n} {big}?", "Convert {n} {big} to {smalls}.",
            "{n} {big} is how many {smalls}?", "How many {smalls} is {n} {big}?",
        ]).format(n=n, big=big, smalls=smalls)
        reasoning = f"1 {big1} is {factor} {smalls}, so multiply by {factor}.\n{_times_lines(n, factor)}"
        answer = f"{n} {big} is {n * factor} {smalls}."
    else:
        m = n * factor
        q = rng.choice([
            "How many {bigs} are in {m} {smalls}?", "Convert {m} {smalls} to {bigs}.",
            "{m} {smalls} is how many {bigs}?",
        ]).format(m=m, bigs=bigs, smalls=smalls)
        reasoning = f"1 {big1} is {factor} {smalls}, so divide by {factor}.\n{m} / {factor} = {n}."
        answer = f"{m} {smalls} is {n} {big}."
    return Exchange(q, reasoning, answer)


def count_letters(rng: random.Random) -> Exchange:
    word = rng.choice(WORDS)
    letter = rng.choice(word) if rng.random() < 0.75 else rng.choice("abcdefghijklmnopqrstuvwxyz")
    q = rng.choice([
        "How many {c}'s are in {w}?", "How many times does the letter {c} appear in {w}?",
        "Count the letter {c} in the word {w}.", "How many {c}s are there in \"{w}\"?",
        "How many letters {c} does {w} have?",
    ]).format(c=letter, w=word)
    n = word.count(letter)
    kept = " ".join([letter] * n) if n else "none"
    reasoning = f"Spell {word}: {' '.join(word)}.\nKeep the {letter}'s: {kept}.\nThat is {n}."
    if n == 0:
        answer = f"There are no {letter}'s in {word}."
    elif n == 1:
        answer = f"There is 1 {letter} in {word}."
    else:
        answer = f"There are {n} {letter}'s in {word}."
    return Exchange(q, reasoning, answer)


def compare(rng: random.Random) -> Exchange:
    a, b = _operands(rng)
    if rng.random() < 0.05:
        b = a
    larger = rng.random() < 0.6
    word = "larger" if larger else "smaller"
    q = rng.choice([
        "Which is {w}, {a} or {b}?", "Which number is {w}: {a} or {b}?", "What is {w}, {a} or {b}?",
        "Which is {w}: {a} or {b}?",
    ]).format(w=word, a=a, b=b)
    sa, sb = str(a), str(b)
    lines = []
    if a == b:
        lines.append(f"{a} and {b} are the same number.")
        answer = f"They are equal: both are {a}."
    else:
        if len(sa) != len(sb):
            lines.append(f"{a} has {len(sa)} digits and {b} has {len(sb)} digits, so {max(a, b)} is larger.")
        else:
            lines.append(f"Both have {len(sa)} digits. Compare from the left.")
            for i, (x, y) in enumerate(zip(sa, sb)):
                col = COLUMNS[len(sa) - 1 - i]
                if x == y:
                    lines.append(f"{col}: {x} and {y} are equal.")
                else:
                    lines.append(f"{col}: {x} and {y}, {max(x, y)} is larger, so {max(a, b)} is larger.")
                    break
        pick = max(a, b) if larger else min(a, b)
        lines.append(f"So {pick} is {word}.")
        answer = f"{pick} is {word}."
    return Exchange(q, "\n".join(lines), answer)


def weekday(rng: random.Random) -> Exchange:
    start = rng.randrange(7)
    n = rng.randint(1, 30)
    forward = rng.random() < 0.6
    day = DAYS[start]
    if forward:
        q = rng.choice([
            "What day is it {n} days after {d}?", "If today is {d}, what day will it be in {n} days?",
            "Today is {d}. What day is it {n} days from now?",
        ]).format(n=n, d=day)
    else:
        q = rng.choice([
            "What day was it {n} days before {d}?", "If today is {d}, what day was it {n} days ago?",
        ]).format(n=n, d=day)
    lines = ["A week has 7 days, so only the remainder after taking away weeks counts."]
    r = n
    if r < 7:
        lines.append(f"{n} is less than 7.")
    while r >= 7:
        lines.append(f"{r} - 7 = {r - 7}.")
        r -= 7
    lines.append(f"The remainder is {r}.")
    step = 1 if forward else -1
    if r == 0:
        end = day
        lines.append(f"So it is {day} again.")
    else:
        seq = [DAYS[(start + step * k) % 7] for k in range(1, r + 1)]
        end = seq[-1]
        way = "forward" if forward else "back"
        lines.append(f"Count {r} {'day' if r == 1 else 'days'} {way} from {day}: {', '.join(seq)}.")
        lines.append(f"So it is {end}.")
    if forward:
        answer = f"{n} {'day' if n == 1 else 'days'} after {day} it is {end}."
    else:
        answer = f"{n} {'day' if n == 1 else 'days'} before {day} it was {end}."
    return Exchange(q, "\n".join(lines), answer)


# Questions about specchat: (paraphrases, reasoning, answer).
SPECCHAT = [
    (
        ["How do I change the reasoning budget?", "How can I make you think less?", "What is the reasoning budget?",
         "How do I turn thinking off?", "Can I limit how long you think?", "How do I make you think longer?"],
        "The user asks about the reasoning budget. It is a setting in the settings pane.",
        "Open the settings pane and change the reasoning budget: it is the most thinking tokens per reply. When "
        "my thinking reaches the budget, specchat closes the thinking block and I answer. Set it to 0 to turn "
        "thinking off.",
    ),
    (
        ["What does the drafter do?", "What is speculative decoding?", "What is the MTP head?",
         "How does the drafter work?", "What is drafting?", "Why is the drafter faster?"],
        "The user asks about the drafter. It is my MTP head, used for speculative decoding.",
        "The drafter is my multi-token prediction (MTP) head. It guesses the next few tokens cheaply, and the "
        "full model checks all of them in one step. Every guess it keeps saves a step, so replies come out "
        "faster, and with greedy decoding the text is exactly the same as without the drafter. You can turn it "
        "off or change the draft block size in the settings pane.",
    ),
    (
        ["How do I reset the cache?", "How do I clear the prompt cache?", "What does Reset cache do?",
         "How can I empty the cache?", "What is the prompt cache?"],
        "The user asks about the prompt cache. There is a Reset cache button in the settings pane.",
        "specchat keeps the prompt prefixes it has already computed, so a long conversation does not start "
        "from scratch every turn. To clear it, press the Reset cache button in the prompt cache section of the "
        "settings pane. The next message is then computed from the beginning.",
    ),
    (
        ["What does tok/s mean?", "What is tok/s?", "What does tokens per second mean?", "Why is tok/s shown?"],
        "The user asks what tok/s means. It is the decode speed.",
        "tok/s is the decode speed: how many tokens I write per second once the first token is out. specchat "
        "shows it live under each reply. With the drafter on, a good acceptance makes it higher.",
    ),
    (
        ["What is acceptance?", "What does acceptance mean?", "What is the acceptance rate?",
         "Why is acceptance shown?"],
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
        ["What is specchat?", "What app is this?", "Tell me about specchat."],
        "The user asks about specchat itself.",
        "specchat is a local web chat for language models. It streams my thinking and my answer, and shows "
        "live numbers like time to first token, tok/s and draft acceptance. The settings pane tunes the "
        "reasoning budget, the drafter and the prompt cache.",
    ),
    (
        ["Who are you?", "What model are you?", "What are you?", "Are you a real model?", "What is your name?"],
        "The user asks who I am.",
        "I am the specchat demo model: a small Qwen 3.5-style model with its own MTP head, trained on "
        "synthetic dialogues. " + CAPABILITIES,
    ),
    (
        ["What can you do?", "How can you help me?", "What do you know?", "What can I ask you?", "Help"],
        "The user asks what I can do. I will list my skills.",
        CAPABILITIES + " Try asking me what 347 + 285 is!",
    ),
]
SMALL_TALK = [
    (["Hello", "Hi", "Hey", "Hello!", "Hi there", "Good morning", "Good evening", "Hey there!", "Greetings"],
     "The user greets me. I will greet them back and offer help.",
     "Hello! How can I help you today?"),
    (["How are you?", "How are you doing?", "How is it going?", "Are you ok?"],
     "The user asks how I am. I will answer kindly.",
     "I am doing well, thank you for asking. What can I do for you?"),
    (["Thanks", "Thank you!", "Thanks a lot", "Great, thanks!", "Cool, thank you"],
     "The user thanks me.",
     "You are welcome! Is there anything else I can help with?"),
    (["Bye", "Goodbye", "See you later", "Bye!", "Good night"],
     "The user says goodbye.",
     "Goodbye! Have a nice day."),
    (["Tell me a joke", "Do you know a joke?", "Make me laugh"],
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
]
OOD_X = ["France", "Japan", "Brazil", "Kenya", "Canada", "Norway", "Egypt", "Peru", "India", "Spain"]
OOD_Y = ["the sea", "cats", "a dragon", "pancakes", "my bike", "the moon", "love", "a robot", "soup", "trains"]
OOD_Z = ["quantum physics", "economics", "history", "politics", "music", "football", "philosophy", "chemistry"]


def _from_table(table, rng: random.Random) -> Exchange:
    questions, reasoning, answer = rng.choice(table)
    return Exchange(rng.choice(questions), reasoning, answer)


def specchat_question(rng: random.Random) -> Exchange:
    return _from_table(SPECCHAT, rng)


def small_talk(rng: random.Random) -> Exchange:
    return _from_table(SMALL_TALK, rng)


def out_of_domain(rng: random.Random) -> Exchange:
    gibberish = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz      ") for _ in range(rng.randint(3, 30))).strip()
    q = rng.choice(OOD_TEMPLATES).format(
        x=rng.choice(OOD_X), y=rng.choice(OOD_Y), z=rng.choice(OOD_Z), n=rng.randint(1950, 2022), g=gibberish or "?"
    )
    return Exchange(q, FALLBACK_THOUGHT, FALLBACK)


TASKS = [
    (add_sub, 36), (multiply, 10), (units, 8), (count_letters, 8), (compare, 8), (weekday, 8),
    (specchat_question, 8), (small_talk, 7), (out_of_domain, 7),
]


FOLLOW_UP_PREFIXES = [
    "And ", "Now ", "Ok, ", "Okay, ", "Next: ", "Please, ", "Hey, ", "Quick question: ", "Also, ", "Then ", "So ",
    "Can you tell me: ", "One more: ", "Another one: ", "Alright, ",
]
POLITE_SUFFIXES = [" Thanks!", " Please.", " Thank you.", " Thanks", " :)"]
WHAT_IS = re.compile(r"^What is (\d+) ([-+×]) (\d+)\?$")


def _style(text: str, rng: random.Random, augment: bool) -> str:
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
    if rng.random() < 0.2:
        text = rng.choice(FOLLOW_UP_PREFIXES) + text[:1].lower() + text[1:]
    if rng.random() < 0.08:
        text += rng.choice(POLITE_SUFFIXES)
    return text


def exchange(rng: random.Random, augment: bool = False) -> Exchange:
    fn = rng.choices([t[0] for t in TASKS], weights=[t[1] for t in TASKS])[0]
    ex = fn(rng)
    return Exchange(_style(ex.user, rng, augment), ex.reasoning, ex.answer)


# ---------------------------------------------------------------- rendering


def _assistant_history(ex: Exchange, thinking: bool, keep_reasoning: bool) -> str:
    if keep_reasoning:  # the app appends what the model generated, reasoning included
        think = f"<think>\n{ex.reasoning}\n</think>\n\n" if thinking else "<think>\n\n</think>\n\n"
        return f"{IM_START}assistant\n{think}{ex.answer}{IM_END}\n"
    return f"{IM_START}assistant\n{ex.answer}{IM_END}\n"  # the chat template drops past reasoning


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
        completion = f"{last.reasoning}\n</think>\n\n{last.answer}{IM_END}"
    else:
        parts.append("<think>\n\n</think>\n\n")
        completion = f"{last.answer}{IM_END}"
    return "".join(parts), completion


def sample(rng: random.Random, augment: bool = False) -> tuple[str, str]:
    """One training example: a 1-3 turn conversation; the last reply is the target."""
    r = rng.random()
    system = DEFAULT_SYSTEM if r < 0.6 else (rng.choice(SYSTEM_PROMPTS) if r < 0.8 else None)
    n = rng.choices([1, 2, 3], weights=[6, 3, 1])[0]
    turns = [(exchange(rng, augment), rng.random() < 0.75) for _ in range(n)]
    return render(system, turns, keep_reasoning=rng.random() < 0.5)


def samples(seed: int, count: int, augment: bool = False) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    return [sample(rng, augment) for _ in range(count)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--augment", action="store_true", help="chat-style question variants (stage 3)")
    args = parser.parse_args()
    for prompt, completion in samples(args.seed, args.count, args.augment):
        print(prompt + completion)
        print("-" * 60)


if __name__ == "__main__":
    main()
