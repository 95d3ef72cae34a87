"""The built-in tools: the calculator's exact arithmetic and its refusals, the clock, and calls with bad
arguments (a failed result saying why, never an exception)."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from engines.options import GenerationOptions
from webapp.tools import calculator
from webapp.tools.builtin import builtin_tools, run_builtin
from webapp.tools.calculator import CalculatorError, calculate
from webapp.tools.clock import ClockArguments, read_clock
from webapp.tools.config import McpConfig
from webapp.tools.switches import SwitchStore
from webapp.tools.toolbox import ToolBox


@pytest.mark.parametrize("expression, result", [
    ("0.1 + 0.2", "0.3"),
    ("0.1 * 3", "0.3"),
    ("1.1 - 0.2", "0.9"),
    ("12345678901234567890 * 98765432109876543210", "1219326311370217952237463801111263526900"),
    ("7 // 2", "3"),
    ("10 % 3", "1"),
    ("2^10", "1024"),
    ("2 ** -2", "0.25"),
    ("1.5e-3", "0.0015"),
    ("15% of 80", "12"),
    ("80 * 15%", "12"),
    ("80 + 15%", "92"),
    ("80 - 15%", "68"),
    ("50%", "0.5"),
    ("1/3", "1/3 ≈ 0.33333333333333333333"),
    ("2/3 + 1/6", "5/6 ≈ 0.83333333333333333333"),
    ("(3/4) ** 2", "0.5625"),
    ("sqrt(16/9)", "4/3 ≈ 1.3333333333333333333"),
    ("sqrt(2)", "≈ 1.4142135623730950488"),
    ("2 ** 0.5", "≈ 1.4142135623730950488"),
    ("root(27, 3)", "3"),
    ("cbrt(-8)", "-2"),
    ("8 ** (1/3)", "2"),
    ("root(10, 5)", "≈ 1.5848931924611134852"),
    ("pi", "≈ 3.1415926535897932385"),
    ("round(2/3, 3)", "0.667"),
    ("abs(-0.25) + max(1, 2.5) - floor(-2.5)", "5.75"),
])
def test_the_calculator_is_exact_where_it_can_be(expression, result):
    assert calculate(expression) == result


@pytest.mark.parametrize("expression, words", [
    ("__import__('os')", "'__import__' is not a function here"),
    ("__import__('os').system('echo hi')", "is not a function here"),
    ("(1).real", "'(1).real' is not allowed"),
    ("open('x')", "'open' is not a function here"),
    ("x + 1", "Unknown name 'x'"),
    ("[1, 2]", "is not allowed"),
    ("lambda: 1", "is not allowed"),
    ("'a' * 3", "is not a number"),
    ("2 ** 1000000", "more than 10,000 digits"),
    ("9 ** 9 ** 9 ** 9", "more than 10,000 digits"),
    ("10 ** 5000 * 10 ** 5000 * 10 ** 5000", "more than 10,000 digits"),
    ("1 / 0", "divides by zero"),
    ("sqrt(-1)", "not a real number"),
    ("1 +", "is not an arithmetic expression"),
    ("1" * 1001, "longer than 1000 characters"),
])
def test_the_calculator_refuses_what_is_not_arithmetic_or_too_big(expression, words):
    began = time.perf_counter()
    with pytest.raises(CalculatorError) as info:
        calculate(expression)
    assert words in str(info.value)
    assert time.perf_counter() - began < 1


SATURDAY = dt.datetime(2026, 12, 5, 9, 30, 15, tzinfo=dt.timezone(dt.timedelta(hours=1), "CET"))


def test_the_calculator_parses_again_after_an_interpreter_fault(monkeypatch):
    """CPython 3.11 can raise SystemError building a syntax tree while another thread builds one; the calculator
    parses once more, where the call would otherwise fail for nothing the model did."""
    real_parse, calls = calculator.ast.parse, []

    def parse(source, *args, **kwargs):  # pytest's own reports parse too: only the calculator's first fails
        if source == "6 * 7":
            calls.append(source)
            if len(calls) == 1:
                raise SystemError("AST constructor recursion depth mismatch (before=2, after=4)")
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(calculator.ast, "parse", parse)
    assert calculate("6 * 7") == "42" and len(calls) == 2


def test_the_clock_reads_the_machines_time_zone():
    assert read_clock(ClockArguments(), lambda: SATURDAY) == \
        "Saturday, 2026-12-05 09:30:15, time zone CET (UTC+01:00)"
    assert read_clock(ClockArguments(action="today"), lambda: SATURDAY) == "Saturday, 2026-12-05"
    now = read_clock(ClockArguments())
    assert dt.datetime.now().astimezone().strftime("%Y-%m-%d") in now


def test_the_clock_counts_days_between_dates():
    between = ClockArguments(action="days_between", start="2026-12-05", end="2026-12-25")
    assert read_clock(between, lambda: SATURDAY).startswith("20 days: 2026-12-25 (Friday) is 20 days after")
    back = ClockArguments(action="days_between", start="2027-01-01")
    assert read_clock(back, lambda: SATURDAY).startswith("27 days: 2026-12-05 (Saturday) is 27 days before")
    leap = ClockArguments(action="days_between", start="2028-02-28", end="2028-03-01")
    assert read_clock(leap, lambda: SATURDAY).startswith("2 days")


def test_builtin_tools_show_their_schemas_and_fail_politely():
    tools = builtin_tools(lambda: SATURDAY)
    calculator, clock = tools["calculator"], tools["clock"]
    assert calculator.spec().parameters["required"] == ["expression"]
    assert set(clock.spec().parameters["properties"]) == {"action", "start", "end"}
    assert run_builtin(calculator, {"expression": "0.1 + 0.2"}).text() == "0.3"
    for arguments, words in (({}, "expression: Field required"), ({"expression": 3}, "expression"),
                             ({"expression": "1", "x": 1}, "x: Extra inputs"),
                             ({"action": "yesterday"}, "action")):
        tool = clock if "action" in arguments else calculator
        result = run_builtin(tool, arguments)
        assert not result.ok and words in result.text() and result.text().startswith("Bad arguments")
    refused = run_builtin(calculator, {"expression": "__import__('os')"})
    assert not refused.ok and "not a function here" in refused.text()


def test_the_toolbox_offers_the_builtin_tools_without_any_server(tmp_path):
    box = ToolBox(GenerationOptions, SwitchStore(tmp_path), McpConfig([]), now=lambda: SATURDAY)
    box.start()
    assert [(t.server, t.name) for t in box.available()] == [("builtin", "calculator"), ("builtin", "clock")]
    assert box.call("builtin", "clock", {"action": "today"}).text() == "Saturday, 2026-12-05"
    unknown = box.call("builtin", "weather", {})
    assert not unknown.ok and "calculator, clock" in unknown.text()
    box.close()
