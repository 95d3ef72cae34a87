"""Chats with the built-in tools offered, for the retrain that teaches the demo model to call them (issue 48).

With tools offered (``calculator`` and ``clock``, with the names, descriptions and schemas the app sends), a
question the model cannot answer itself (decimals, percentages, division, fractions, powers and roots, numbers
too long for it, a sum with thinking off, today's date or the time) is answered in two steps: the model makes
the call (after a short reasoning with thinking on), the app sends the tool's result, computed here by the app's
own tool code so that its text is what the app would send, and the model answers from it. Every other question
is answered as without tools. A question whose tool is not offered keeps its honest limit.

Chats are the pieces specchat sends (``corpus.app_segments``): the system block is what the chat template
(``chat_template_tools.jinja``) writes for the tools, and a result goes in as the template writes it after the
call (``engines.mlx.prompts.PromptBuilder.tool_result_ids``).

    python -m training.corpus --count 5 --tools-share 1     # print a few samples
    python -m training.tools_corpus --install-template CHECKPOINT     # give a checkpoint the tools template
    python -m training.tools_corpus --install-template TOKENIZER --tool-tokens   # and the result's markers

``--tool-tokens`` makes ``<tool_response>`` and ``</tool_response>`` single tokens, as Qwen 3.5's tokenizer has
them (the demo tokenizer spells each in ten): a step after a call whose result is "12" prefills 17 tokens, not 34.
It grows the vocabulary by two, so it is for the tokenizer a retrain starts from (training/train.py grows the
weights to it).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from webapp.tools import calculator
from webapp.tools.builtin import builtin_tools, run_builtin

from . import corpus
from .corpus import IM_END, IM_START, Exchange

TEMPLATE_FILE = Path(__file__).resolve().parent / "chat_template_tools.jinja"
# The tools as the app offers them (ToolSpec.function()), in the app's order.
TOOL_SPECS = {name: tool.spec().function() for name, tool in builtin_tools().items()}
# Both tools, one switched off in the settings, or tools off: the questions a tool answers asked with no tools
# block, where the reply is the limit with no call (a model taught calls only learns to write one regardless).
OFFERED = [("calculator", "clock"), ("calculator",), ("clock",), ()]
OFFERED_WEIGHTS = [8, 1, 1, 4]
# What Qwen 3.5's template writes after the list of tools (chat_template_tools.jinja writes the same).
TOOLS_INSTRUCTIONS = """

If you choose to call a function ONLY reply in the following format with NO suffix:

<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>
value_1
</parameter>
<parameter=example_parameter_2>
This is the value for the second parameter
that can span
multiple lines
</parameter>
</function>
</tool_call>

<IMPORTANT>
Reminder:
- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested within <tool_call></tool_call> XML tags
- Required parameters MUST be specified
- You may provide optional reasoning for your function call in natural language BEFORE the function call, but NOT after
- If there is no function call available, answer the question like normal with your current knowledge and do not tell the user about function calls
</IMPORTANT>"""

# The share of a tools chat's turns that need a tool; the others are the corpus's own questions.
TOOL_TURN_SHARE = 0.6
CLOCK_SHARE = 0.25  # of the turns that need a tool
THINKING_SHARE = 0.6
# Limits a tool answers: with the calculator offered, these questions are asked of it instead.
CALCULATOR_LIMITS = {corpus.WHOLE_ONLY, corpus.PERCENT, corpus.OTHER_MATHS, corpus.TOO_LONG_ADD, corpus.TOO_LONG_MUL}
SUM_ANSWER = re.compile(r"^(-?\d+) ([-+×]) (\d+) = ")

# The calculator's expression for each wording of a percentage question (corpus.PERCENT_QUESTIONS).
PERCENT_EXPRESSIONS = {
    "What is {p}% of {n}?": "{p}% of {n}", "What is {p} percent of {n}?": "{p}% of {n}", "{p}% of {n}": "{p}% of {n}",
    "How much is {p}% of {n}?": "{p}% of {n}", "Calculate {p}% of {n}.": "{p}% of {n}",
    "{p} percent of {n} is?": "{p}% of {n}", "What percentage of {n} is {m}?": "{m} / {n} * 100",
    "{m} is what percent of {n}?": "{m} / {n} * 100", "Increase {n} by {p}%.": "{n} + {p}%",
    "Decrease {n} by {p}%.": "{n} - {p}%", "What is {n} plus {p}%?": "{n} + {p}%",
    "What is {n} minus {p}%?": "{n} - {p}%", "Take {p}% off {n}.": "{n} - {p}%",
    "What is a {p}% tip on {n}?": "{p}% of {n}", "What's {p}% of {n}?": "{p}% of {n}",
    "Give me {p} percent of {n}.": "{p}% of {n}", "{m} out of {n} as a percentage?": "{m} / {n} * 100",
    "What percent is {m} of {n}?": "{m} / {n} * 100", "Express {m}/{n} as a percent.": "{m} / {n} * 100",
    "If I get a {p}% discount on {n}, what do I pay?": "{n} - {p}%", "What is {n} with {p}% added?": "{n} + {p}%",
    "{p}% of {n} = ?": "{p}% of {n}",
}
# The same for corpus.OTHER_MATHS_QUESTIONS; "Is {f} bigger than {g}?" asks for no number and keeps its limit.
OTHER_MATHS_EXPRESSIONS = {
    "What is {a} / {b}?": "{a} / {b}", "What is {a} divided by {b}?": "{a} / {b}", "Divide {a} by {b}.": "{a} / {b}",
    "{a} ÷ {b}": "{a} / {b}", "{a} / {b} = ?": "{a} / {b}", "What's {a}/{b}?": "{a} / {b}",
    "How many times does {b} go into {a}?": "{a} / {b}", "What is half of {a}?": "{a} / 2",
    "What is a third of {a}?": "{a} / 3", "What is a quarter of {a}?": "{a} / 4", "What is {f} + {g}?": "{f} + {g}",
    "What is {f} of {a}?": "{f} * {a}", "Add {f} and {g}.": "{f} + {g}", "Simplify {a}/{b}.": "{a} / {b}",
    "What is {f} minus {g}?": "{f} - {g}", "What is {f} times {b}?": "{f} * {b}", "What is {a} squared?": "{a} ** 2",
    "What is {b} cubed?": "{b} ** 3", "What is the square root of {a}?": "sqrt({a})",
    "What is {b} to the power of {c}?": "{b} ** {c}", "What is {b}^{c}?": "{b} ** {c}", "sqrt({a})": "sqrt({a})",
    "What is {a} mod {b}?": "{a} % {b}", "What is the remainder of {a} divided by {b}?": "{a} % {b}",
    "Split {a} into {b} equal parts.": "{a} / {b}", "Calculate {a} / {b}.": "{a} / {b}",
    "Compute {a} divided by {b}.": "{a} / {b}", "What is {a} over {b}?": "{a} / {b}",
}
# More wordings of roots and powers than the corpus's own (with two each, the first run miscalled a root asked
# another way); none is a held-out wording of training/evaluate.py.
MORE_WORDINGS = {
    "sqrt({a})": ["What's the square root of {a}?", "Square root of {a}?", "Calculate the square root of {a}.",
                  "Work out the square root of {a}.", "Give me the square root of {a}.", "√{a} = ?",
                  "Tell me the square root of {a}.", "What is √{a}?"],
    "{b} ** {c}": ["What is {b} raised to the power {c}?", "Raise {b} to the power of {c}.", "Compute {b}^{c}.",
                   "Work out {b} to the power of {c}.", "What's {b} to the power of {c}?",
                   "Calculate {b} raised to the power {c}."],
}
# Shares of these questions given to roots and powers, the rest drawn as the corpus draws them. A root is written as
# a call, sqrt(N), where every other expression starts with the number: copying N after "sqrt(" is a skill of its
# own, and at 2 of the 28 wordings' share the second run never learnt it (it wrote "sqrt(1" for every root, in
# trained wordings too). With roots at a third, the third run wrote "N ** 2" for "Find N to the power 3.".
CALL_SHARES = {"sqrt({a})": 0.25, "{b} ** {c}": 0.2}
DATE_QUESTIONS = [
    "What is today's date?", "What's the date today?", "What day is it today?", "Which day of the week is it?",
    "What is the date?", "Tell me today's date.", "What weekday is it today?", "What's today's date?",
    "Do you know what day it is?", "What day of the week is it today?", "Can you tell me the date?",
    "What date is it today?", "What's today?", "Which weekday is it?", "What is the date today?",
]
TIME_QUESTIONS = ["What time is it?", "What's the time?", "What time is it now?", "Tell me the time.",
                  "Do you know the time?", "What is the time right now?", "Can you tell me the time?"]
# Time zones a machine may be in: (name, offset in minutes), as the clock writes them.
TIME_ZONES = [("UTC", 0), ("GMT", 0), ("CET", 60), ("CEST", 120), ("EET", 120), ("EST", -300), ("EDT", -240),
              ("CST", -360), ("PST", -480), ("PDT", -420), ("JST", 540), ("IST", 330), ("AEST", 600), ("BRT", -180)]
DATE_THOUGHT = ("The user asks for today's date, and I can't know it myself: the clock tells me. "
                "I will ask it for today.")
TIME_THOUGHT = "The user asks for the time, and I can't know it myself: the clock tells me. I will ask it for now."


@dataclass
class ToolExchange(Exchange):
    """A question a tool answers: ``reasoning`` leads to the call of ``tool`` with ``arguments``, the app sends
    its ``result``, and the model answers ``answer`` (after ``after`` with thinking on). ``limit`` is the reply
    when the tool is not offered."""

    tool: str = ""
    arguments: dict = field(default_factory=dict)
    result: str = ""
    after: str = ""
    limit: Exchange | None = None


def run_tool(name: str, arguments: dict, now: dt.datetime | None = None) -> str:
    """The text the app sends back for a call of a built-in tool (``now``: the clock's time)."""
    tools = builtin_tools(lambda: now) if now else builtin_tools()
    result = run_builtin(tools[name], arguments)
    if not result.ok:
        raise ValueError(f"{name}({arguments}) failed: {result.text()}")
    return result.text()


def calculator_exchange(question: str, expression: str, why: str, limit: Exchange) -> ToolExchange:
    result = run_tool("calculator", {"expression": expression})
    answer = f"{expression} {result}." if result.startswith("≈") else f"{expression} = {result}."
    return ToolExchange(question, f"{why} I will call it with {expression}.", answer, tool="calculator",
                        arguments={"expression": expression}, result=result,
                        after=f"The calculator gave {result}.", limit=limit)


def random_now(rng: random.Random) -> dt.datetime:
    """A moment between 2000 and 2099 in one of TIME_ZONES."""
    name, minutes = rng.choice(TIME_ZONES)
    zone = dt.timezone(dt.timedelta(minutes=minutes), name)
    day = dt.date(2000, 1, 1) + dt.timedelta(days=rng.randrange(36525))
    return dt.datetime(day.year, day.month, day.day, rng.randrange(24), rng.randrange(60), rng.randrange(60),
                       tzinfo=zone)


def clock_exchange(question: str, action: str, now: dt.datetime) -> ToolExchange:
    """The model copies the clock's words: a date is never its own."""
    result = run_tool("clock", {"action": action}, now)
    today = action == "today"
    return ToolExchange(question, DATE_THOUGHT if today else TIME_THOUGHT,
                        f"Today is {result}." if today else f"It is now {result}.", tool="clock",
                        arguments={"action": action}, result=result, after=f"The clock gave {result}.",
                        limit=Exchange(question, corpus.FALLBACK_THOUGHT, corpus.FALLBACK))


def clock_question(rng: random.Random) -> ToolExchange:
    if rng.random() < 0.7:
        return clock_exchange(rng.choice(DATE_QUESTIONS), "today", random_now(rng))
    return clock_exchange(rng.choice(TIME_QUESTIONS), "now", random_now(rng))


def decimal_question(rng: random.Random) -> ToolExchange:
    """A sum, difference or product with a decimal or negative number (corpus.not_whole's questions)."""
    a, b = corpus.operand_texts(rng, corpus.not_whole_number)
    op = rng.choice("+-*")
    templates = {"+": corpus.ADD_QUESTIONS, "-": corpus.SUB_QUESTIONS, "*": corpus.MUL_QUESTIONS}[op]
    limit = corpus.not_whole_exchange([a, b], rng.choice(templates).format(a=a, b=b))
    odd = next(x for x in (a, b) if not x.isdigit())
    why = f"{odd} is {corpus.kind_of(odd)}, so the calculator works this out."
    return calculator_exchange(limit.user, f"{a} {op} {b}", why, limit)


def percent_question(rng: random.Random) -> ToolExchange:
    limit = corpus.percentages(rng)
    template = next(t for t in PERCENT_EXPRESSIONS if re.fullmatch(_pattern(t), limit.user))
    values = re.fullmatch(_pattern(template), limit.user).groupdict()
    why = "The question asks for a percentage, so the calculator works it out."
    return calculator_exchange(limit.user, PERCENT_EXPRESSIONS[template].format(**values), why, limit)


def other_maths_question(rng: random.Random) -> ToolExchange:
    wanted = rng.choices([*CALL_SHARES, None], weights=[*CALL_SHARES.values(), 1 - sum(CALL_SHARES.values())])[0]
    while True:
        limit = corpus.other_maths(rng)
        template = next((t for t in OTHER_MATHS_EXPRESSIONS if re.fullmatch(_pattern(t), limit.user)), None)
        if template and wanted in (None, OTHER_MATHS_EXPRESSIONS[template]):
            values = re.fullmatch(_pattern(template), limit.user).groupdict()
            expression = OTHER_MATHS_EXPRESSIONS[template].format(**values)
            more = MORE_WORDINGS.get(OTHER_MATHS_EXPRESSIONS[template])
            if more and rng.random() < 0.5:
                limit = replace(limit, user=rng.choice(more).format(**values))
            why = "That needs division, fractions, powers or roots, so the calculator works it out."
            return calculator_exchange(limit.user, expression, why, limit)


def too_long_question(rng: random.Random) -> ToolExchange:
    """A sum or product of numbers longer than the model works out itself."""
    if rng.random() < 0.6:
        op = rng.choice("+-")
        a, b = corpus.too_long_operands(rng, corpus.MAX_ADD_DIGITS)
        question = rng.choice(corpus.ADD_QUESTIONS if op == "+" else corpus.SUB_QUESTIONS).format(a=a, b=b)
        longest = max((a, b), key=lambda n: len(str(n)))
        why = (f"{longest} has more than {corpus.MAX_ADD_DIGITS} digits, too long for me, so the calculator works "
               "it out.")
        return calculator_exchange(question, f"{a} {op} {b}", why, corpus.too_long_add_sub(a, op, b, question))
    while True:
        a, b = corpus.number_of_digits(rng, rng.randint(1, 6)), corpus.number_of_digits(rng, rng.randint(1, 6))
        if not corpus.multiplies(a, b):
            break
    question = rng.choice(corpus.MUL_QUESTIONS).format(a=a, b=b)
    why = f"{a} × {b} is {len(str(a))} digits by {len(str(b))}, too long for me, so the calculator works it out."
    return calculator_exchange(question, f"{a} * {b}", why, corpus.too_long_multiply(a, b, question))


def sum_without_thinking(ex: Exchange) -> ToolExchange | None:
    """A sum or product the model works out only with thinking on, asked of the calculator with thinking off."""
    match = SUM_ANSWER.match(ex.answer)
    if ex.answer_off != corpus.THINK_FOR_SUMS or not match:
        return None
    a, op, b = match.groups()
    made = calculator_exchange(ex.user, f"{a} {'*' if op == '×' else op} {b}", "", ex)
    return replace(made, answer=f"{a} {op} {b} = {made.result}.")


CALCULATOR_QUESTIONS = [(decimal_question, 5), (percent_question, 3), (other_maths_question, 4),
                        (too_long_question, 2)]


def tool_question(rng: random.Random) -> ToolExchange:
    if rng.random() < CLOCK_SHARE:
        return clock_question(rng)
    fn = rng.choices([f for f, _ in CALCULATOR_QUESTIONS], weights=[w for _, w in CALCULATOR_QUESTIONS])[0]
    return fn(rng)


def _pattern(template: str) -> str:
    """A regular expression that reads a question's numbers (whole, or fractions such as 3/7) back."""
    return re.sub(r"\\\{([a-z])\\\}", r"(?P<\1>[\\d/]+)", re.escape(template))


def needs_tool(ex: Exchange, offered: tuple[str, ...]) -> bool:
    """Whether a question of the corpus's own is one a tool offered answers (its reply would be a limit)."""
    if "calculator" in offered and ex.reply(True) in CALCULATOR_LIMITS:
        return True
    return "clock" in offered and "time is it" in ex.user.lower()


def tool_conversation(rng: random.Random, turns: int, augment: bool,
                      offered: tuple[str, ...]) -> list[tuple[Exchange, bool]]:
    out: list[tuple[Exchange, bool]] = []
    for _ in range(turns):
        thinking = rng.random() < THINKING_SHARE
        if rng.random() < TOOL_TURN_SHARE:
            ex = tool_question(rng)
            ex = ex if ex.tool in offered else ex.limit
            ex = replace(ex, user=corpus.style(ex.user, rng, augment))
        else:
            while needs_tool(ex := corpus.next_exchange(out[-1] if out else None, rng, augment), offered):
                pass
            if not thinking and "calculator" in offered:
                ex = sum_without_thinking(ex) or ex
        out.append((ex, thinking))
    return out


def tools_system(system: str | None, tools: list[dict]) -> str:
    """The system block chat_template_tools.jinja writes for ``tools`` (mlx-vlm sorts the schemas' keys)."""
    listed = "".join("\n" + json.dumps(tool, ensure_ascii=False, sort_keys=True) for tool in tools)
    text = f"# Tools\n\nYou have access to the following functions:\n\n<tools>{listed}\n</tools>{TOOLS_INSTRUCTIONS}"
    if system:
        text += "\n\n" + system
    return f"{IM_START}system\n{text}{IM_END}\n"


def call_markup(tool: str, arguments: dict) -> str:
    parameters = "".join(f"<parameter={name}>\n{value}\n</parameter>\n" for name, value in arguments.items())
    return f"<tool_call>\n<function={tool}>\n{parameters}</function>\n</tool_call>"


def call_text(ex: ToolExchange, thinking: bool) -> str:
    """What the model writes for the call, after the generation prompt."""
    call = call_markup(ex.tool, ex.arguments) + IM_END
    return f"{ex.reasoning}\n</think>\n\n{call}" if thinking else call


def result_turn(result: str, thinking: bool) -> str:
    """A result and the next generation prompt, as the template writes them after the call."""
    think = "<think>\n" if thinking else "<think>\n\n</think>\n\n"
    return f"{IM_START}user\n<tool_response>\n{result}\n</tool_response>{IM_END}\n{IM_START}assistant\n{think}"


def answer_text(ex: ToolExchange, thinking: bool) -> str:
    return f"{ex.after}\n</think>\n\n{ex.answer}{IM_END}" if thinking else f"{ex.answer}{IM_END}"


def app_segments(system: str | None, offered: tuple[str, ...],
                 turns: list[tuple[Exchange, bool]]) -> list[tuple[str, bool]]:
    """A tools chat as specchat sends it, piece by piece, and whether each piece is the model's (trained); with
    none ``offered``, the chat as the template writes it without tools."""
    if not offered:
        return corpus.app_segments(system, turns)
    head = tools_system(system, [TOOL_SPECS[name] for name in offered])
    out = []
    for i, (ex, thinking) in enumerate(turns):
        if i:
            out.append(("\n", False))
        out.append(((head if i == 0 else "") + corpus.user_turn(ex.user, thinking), False))
        if isinstance(ex, ToolExchange):
            out += [(call_text(ex, thinking), True), ("\n", False), (result_turn(ex.result, thinking), False),
                    (answer_text(ex, thinking), True)]
        else:
            out.append((corpus.completion_text(ex, thinking), True))
    return out


def sample_segments(rng: random.Random, augment: bool) -> list[tuple[str, bool]]:
    """One tools chat of 1-3 turns, with the system prompts the corpus uses."""
    r = rng.random()
    system = corpus.DEFAULT_SYSTEM if r < 0.6 else (rng.choice(corpus.SYSTEM_PROMPTS) if r < 0.8 else None)
    offered = rng.choices(OFFERED, weights=OFFERED_WEIGHTS)[0]
    turns = tool_conversation(rng, rng.choices([1, 2, 3], weights=[5, 3, 2])[0], augment, offered)
    return app_segments(system, offered, turns)


def install_template(folder: Path) -> None:
    """Make chat_template_tools.jinja the template of the checkpoint (or tokenizer folder) ``folder``: both
    chat_template.jinja and tokenizer_config.json's copy, as demo_model.checkpoint_files writes them."""
    template = TEMPLATE_FILE.read_text()
    (folder / "chat_template.jinja").write_text(template)
    config_file = folder / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["chat_template"] = template
    config_file.write_text(json.dumps(config, indent=2))


TOOL_TOKENS = ("<tool_response>", "</tool_response>")


def install_tool_tokens(folder: Path) -> int:
    """Add TOOL_TOKENS to ``folder``'s tokenizer.json (ordinary added tokens, as Qwen 3.5 has them: decoded as
    text); returns the vocabulary size."""
    from tokenizers import AddedToken, Tokenizer

    path = folder / "tokenizer.json"
    tok = Tokenizer.from_file(str(path))
    missing = [token for token in TOOL_TOKENS if tok.token_to_id(token) is None]
    if missing:
        tok.add_tokens([AddedToken(token, normalized=False, special=False) for token in missing])
        tok.save(str(path))
    return tok.get_vocab_size()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--install-template", metavar="FOLDER", type=Path, required=True,
                        help="write chat_template_tools.jinja into this checkpoint or tokenizer folder")
    parser.add_argument("--tool-tokens", action="store_true",
                        help="also make <tool_response> and </tool_response> single tokens (a tokenizer to train "
                             "from: the vocabulary grows by two)")
    args = parser.parse_args()
    install_template(args.install_template)
    if args.tool_tokens:
        print(f"vocabulary: {install_tool_tokens(args.install_template)} tokens")


if __name__ == "__main__":
    main()
