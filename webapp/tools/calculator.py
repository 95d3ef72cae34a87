"""The ``calculator`` tool: exact arithmetic on integers, decimals and fractions, percentages, powers and roots.

The expression is parsed with ``ast`` and only arithmetic nodes are walked: no name, attribute or call reaches
Python. Numbers are ``Fraction``s read from their source text, so 0.1 + 0.2 is exactly 0.3; a root or power
that is not rational is computed with ``decimal`` and said to be rounded. Sizes are bounded, so no expression
can make the walk run for long.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from decimal import Context, Decimal
from fractions import Fraction

MAX_EXPRESSION = 1000  # characters
MAX_NODES = 300
MAX_BITS = 33_300  # about 10,000 decimal digits in a numerator or denominator
MAX_ROOT = 1000  # the highest nth root
SHOWN_DIGITS = 20  # significant digits of a result that is not exact
WORK_DIGITS = 60  # digits decimal works with before rounding to SHOWN_DIGITS

FUNCTIONS = ("sqrt", "cbrt", "root", "abs", "round", "floor", "ceil", "min", "max")
CONSTANTS = ("pi", "e")

DESCRIPTION = (
    "Exact arithmetic: + - * / // % ** (or ^), parentheses, decimals and fractions (1/3 stays exact), "
    "percentages ('15% of 80', '80 * 15%', '80 + 15%' adds 15% of 80), sqrt(x), cbrt(x), root(x, n), "
    "abs, round(x, digits), floor, ceil, min, max, pi, e. Results that are not exact (irrational roots, pi) "
    f"are given to {SHOWN_DIGITS} significant digits."
)


class CalculatorError(ValueError):
    """An expression the calculator refuses, with a message saying what to send instead."""


@dataclass(frozen=True)
class Number:
    value: Fraction
    exact: bool = True


# "15% of 80" → percent(15) * (80); "15%" not followed by an operand → percent(15); "10 % 3" stays modulo.
_NUMBER = r"(\d[\d_]*(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)"
_PERCENT_OF = re.compile(_NUMBER + r"\s*%\s*of\b", re.I)
_PERCENT = re.compile(_NUMBER + r"\s*%(?!\s*[\w(.])")


def _rewrite(expression: str) -> str:
    text = expression.replace("×", "*").replace("÷", "/").replace("−", "-").replace("^", "**")
    text = _PERCENT_OF.sub(r"percent(\1) *", text)
    return _PERCENT.sub(r"percent(\1)", text)


def evaluate(expression: str) -> Number:
    """The value of ``expression``; raises CalculatorError."""
    if not expression.strip():
        raise CalculatorError("The expression is empty: send one, e.g. '(1 + 2) * 3'.")
    if len(expression) > MAX_EXPRESSION:
        raise CalculatorError(f"The expression is longer than {MAX_EXPRESSION} characters: split it up.")
    source = _rewrite(expression)
    try:
        tree = _parse(source)
    except SyntaxError:
        raise CalculatorError(f"{expression!r} is not an arithmetic expression: use numbers, + - * / ** %, "
                              f"parentheses and {', '.join(FUNCTIONS)}.") from None
    if sum(1 for _ in ast.walk(tree)) > MAX_NODES:
        raise CalculatorError(f"The expression has more than {MAX_NODES} parts: split it up.")
    return _Walker(source).visit(tree.body)


def _parse(source: str) -> ast.Expression:
    try:
        return ast.parse(source, mode="eval")
    except SystemError:  # CPython 3.11 can fail a tree that another thread builds at the same time (cpython#106905)
        return ast.parse(source, mode="eval")


def format_number(number: Number) -> str:
    """An exact result in full (a repeating one as its fraction too), any other rounded, marked ≈."""
    value = number.value
    if not number.exact:
        return "≈ " + _decimal_text(value, SHOWN_DIGITS)
    if value.denominator == 1:
        return str(value.numerator)
    if _terminates(value.denominator):
        return _exact_decimal(value)
    return f"{value.numerator}/{value.denominator} ≈ {_decimal_text(value, SHOWN_DIGITS)}"


def calculate(expression: str) -> str:
    return format_number(evaluate(expression))


# --- the walk ---------------------------------------------------------------------------------------------

class _Walker:
    def __init__(self, source: str):
        self.source = source

    def visit(self, node: ast.AST) -> Number:
        method = getattr(self, f"visit_{type(node).__name__}", None)
        if method is None:
            raise CalculatorError(f"{self._text(node)!r} is not allowed: only numbers, arithmetic and "
                                  f"{', '.join(FUNCTIONS)} are.")
        return method(node)

    def _text(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.source, node) or type(node).__name__

    def visit_Constant(self, node: ast.Constant) -> Number:
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise CalculatorError(f"{self._text(node)!r} is not a number.")
        text = self._text(node).replace("_", "")
        if len(text) > 1000:
            raise CalculatorError("A number has more than 1000 digits: use a power, e.g. 10**999.")
        return _checked(Number(Fraction(text)))  # from the text: 0.1 is exactly one tenth

    def visit_Name(self, node: ast.Name) -> Number:
        if node.id == "pi":
            return Number(Fraction(_pi()), exact=False)
        if node.id == "e":
            return Number(Fraction(_context().exp(Decimal(1))), exact=False)
        raise CalculatorError(f"Unknown name {node.id!r}: the constants are {', '.join(CONSTANTS)}.")

    def visit_UnaryOp(self, node: ast.UnaryOp) -> Number:
        operand = self.visit(node.operand)
        if isinstance(node.op, ast.USub):
            return Number(-operand.value, operand.exact)
        if isinstance(node.op, ast.UAdd):
            return operand
        raise CalculatorError(f"{self._text(node)!r}: only + and - may stand before a number.")

    def visit_BinOp(self, node: ast.BinOp) -> Number:
        left = self.visit(node.left)
        right = self.visit(node.right)
        exact = left.exact and right.exact
        a, b = left.value, right.value
        op = node.op
        if isinstance(op, (ast.Add, ast.Sub)) and _is_percent(node.right):
            b = a * b  # 80 + 15% is 80 plus 15% of 80
        if isinstance(op, ast.Add):
            return _checked(Number(a + b, exact))
        if isinstance(op, ast.Sub):
            return _checked(Number(a - b, exact))
        if isinstance(op, ast.Mult):
            return _checked(Number(a * b, exact))
        if isinstance(op, (ast.Div, ast.FloorDiv, ast.Mod)):
            if b == 0:
                raise CalculatorError(f"{self._text(node)!r} divides by zero.")
            if isinstance(op, ast.Div):
                return _checked(Number(a / b, exact))
            if isinstance(op, ast.FloorDiv):
                return _checked(Number(Fraction(a // b), exact))
            return _checked(Number(a % b, exact))
        if isinstance(op, ast.Pow):
            return _power(left, right)
        raise CalculatorError(f"{self._text(node)!r}: the operators are + - * / // % ** (or ^).")

    def visit_Call(self, node: ast.Call) -> Number:
        name = node.func.id if isinstance(node.func, ast.Name) else None
        if name not in FUNCTIONS and name != "percent" or node.keywords:
            raise CalculatorError(f"{self._text(node.func)!r} is not a function here: the functions are "
                                  f"{', '.join(FUNCTIONS)}.")
        args = [self.visit(arg) for arg in node.args]
        return _call(name, args)


def _is_percent(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "percent"


def _arity(name: str, args: list[Number], counts: tuple[int, ...]) -> None:
    if len(args) not in counts:
        wanted = " or ".join(str(c) for c in counts)
        raise CalculatorError(f"{name}() takes {wanted} argument{'s' if counts[-1] > 1 else ''}, not {len(args)}.")


def _call(name: str, args: list[Number]) -> Number:
    if name == "percent":
        return Number(args[0].value / 100, args[0].exact)
    if name in ("min", "max"):
        if not args:
            raise CalculatorError(f"{name}() needs at least one number.")
        chosen = (min if name == "min" else max)(args, key=lambda n: n.value)
        return Number(chosen.value, all(a.exact for a in args))
    if name == "root":
        _arity(name, args, (2,))
        n = args[1].value
        if n.denominator != 1 or not 1 <= n <= MAX_ROOT:
            raise CalculatorError(f"root(x, n) takes a whole n from 1 to {MAX_ROOT}.")
        return _root(args[0], int(n))
    if name == "round":
        _arity(name, args, (1, 2))
        digits = args[1].value if len(args) == 2 else Fraction(0)
        if digits.denominator != 1 or abs(digits) > 1000:
            raise CalculatorError("round(x, digits) takes whole digits from -1000 to 1000.")
        return Number(round(args[0].value, int(digits)), args[0].exact)
    _arity(name, args, (1,))
    (x,) = args
    if name == "sqrt":
        return _root(x, 2)
    if name == "cbrt":
        return _root(x, 3)
    if name == "abs":
        return Number(abs(x.value), x.exact)
    if name == "floor":
        return Number(Fraction(math.floor(x.value)), x.exact)
    return Number(Fraction(math.ceil(x.value)), x.exact)  # ceil


def _checked(number: Number) -> Number:
    value = number.value
    if value.numerator.bit_length() > MAX_BITS or value.denominator.bit_length() > MAX_BITS:
        raise CalculatorError("The result would have more than 10,000 digits: the calculator stops there.")
    return number


def _power(base: Number, exponent: Number) -> Number:
    a, b = base.value, exponent.value
    exact = base.exact and exponent.exact
    if b.denominator == 1:
        if a == 0 and b < 0:
            raise CalculatorError("0 to a negative power divides by zero.")
        if a in (0, 1) or b == 0:
            return Number(a ** int(b), exact)
        if a == -1:
            return Number(Fraction(-1 if b.numerator % 2 else 1), exact)
        if not base.exact:  # a rounded base (pi) to a whole power: rounded as well, so decimal does it
            magnitude = _inexact_power(abs(a), b)
            return Number(-magnitude.value if a < 0 and b.numerator % 2 else magnitude.value, exact=False)
        size = max(a.numerator.bit_length(), a.denominator.bit_length(), 2) * abs(b.numerator)
        if size > MAX_BITS:
            raise CalculatorError("The power would have more than 10,000 digits: the calculator stops there.")
        return _checked(Number(a ** int(b), exact))
    # A fractional exponent p/q: the qth root of the pth power.
    if b.denominator > MAX_ROOT:
        return _inexact_power(a, b)
    powered = _power(base, Number(Fraction(b.numerator), exponent.exact))
    return _root(powered, b.denominator) if exponent.exact else _inexact_power(a, b)


def _root(x: Number, n: int) -> Number:
    value = x.value
    if value < 0:
        if n % 2 == 0:
            raise CalculatorError(f"An even root of a negative number ({_decimal_text(value, SHOWN_DIGITS)}) is "
                                  "not a real number.")
        root = _root(Number(-value, x.exact), n)
        return Number(-root.value, root.exact)
    if x.exact:
        num, den = _integer_root(value.numerator, n), _integer_root(value.denominator, n)
        if num is not None and den is not None:
            return Number(Fraction(num, den))
    if value == 0:
        return Number(Fraction(0), x.exact)
    context = _context()
    result = context.power(Decimal(value.numerator) / Decimal(value.denominator), Decimal(1) / Decimal(n)) \
        if n != 2 else context.sqrt(context.divide(Decimal(value.numerator), Decimal(value.denominator)))
    return Number(Fraction(result), exact=False)


def _inexact_power(a: Fraction, b: Fraction) -> Number:
    if a < 0:
        raise CalculatorError("A negative number to a non-whole power is not a real number here.")
    if a == 0:
        return Number(Fraction(0), exact=False)
    context = _context()
    base = context.divide(Decimal(a.numerator), Decimal(a.denominator))
    exponent = context.divide(Decimal(b.numerator), Decimal(b.denominator))
    if abs(exponent * context.log10(base)) > 10_000:
        raise CalculatorError("The power would have more than 10,000 digits: the calculator stops there.")
    return _checked(Number(Fraction(context.power(base, exponent)), exact=False))


def _integer_root(k: int, n: int) -> int | None:
    """The whole nth root of ``k`` when it has one."""
    if k < 2:
        return k
    guess = 1 << -(-k.bit_length() // n)  # at or above the root
    while True:  # Newton's method on integers, from above: strictly falls until it reaches floor(root)
        better = ((n - 1) * guess + k // guess ** (n - 1)) // n
        if better >= guess:
            break
        guess = better
    return guess if guess ** n == k else None


def _context() -> Context:
    return Context(prec=WORK_DIGITS)


def _pi() -> Decimal:
    # 60 digits of pi; decimal has no pi of its own.
    return Decimal("3.14159265358979323846264338327950288419716939937510582097494")


def _terminates(denominator: int) -> bool:
    for factor in (2, 5):
        while denominator % factor == 0:
            denominator //= factor
    return denominator == 1


def _exact_decimal(value: Fraction) -> str:
    digits = len(str(value.numerator)) + value.denominator.bit_length() + 2  # enough for the finite expansion
    quotient = Context(prec=digits).divide(Decimal(value.numerator), Decimal(value.denominator))
    return _plain(quotient)


def _decimal_text(value: Fraction, significant: int) -> str:
    quotient = Context(prec=significant).divide(Decimal(value.numerator), Decimal(value.denominator))
    return _plain(quotient)


def _plain(number: Decimal) -> str:
    """Without an exponent or trailing zeros (1E+3 → 1000, 0.50 → 0.5)."""
    text = format(number.normalize(), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text
