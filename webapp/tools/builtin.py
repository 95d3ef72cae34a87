"""The tools that need nothing: ``calculator`` and ``clock``, listed under the server ``builtin``.

Each takes its arguments as a pydantic model, whose JSON schema is what the model is shown; a call with bad
arguments is a failed result saying which, never an exception.
"""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ..errors import describe_validation
from . import calculator, clock
from .results import BUILTIN, ToolResult, ToolSpec, text_part


class CalculatorArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")

    expression: str = Field(description="The arithmetic to work out, e.g. '0.1 + 0.2', '15% of 80', "
                                        "'sqrt(2)', '(3/4) ** 2'.")


@dataclass(frozen=True)
class BuiltinTool:
    name: str
    description: str
    arguments: type[BaseModel]
    run: Callable[[BaseModel], str]

    def spec(self) -> ToolSpec:
        schema = self.arguments.model_json_schema()
        schema.pop("title", None)
        return ToolSpec(BUILTIN, self.name, self.description, schema)


def builtin_tools(now: Callable[[], dt.datetime] = clock.local_now) -> dict[str, BuiltinTool]:
    tools = [
        BuiltinTool("calculator", calculator.DESCRIPTION, CalculatorArguments,
                    lambda args: calculator.calculate(args.expression)),
        BuiltinTool("clock", clock.DESCRIPTION, clock.ClockArguments, lambda args: clock.read_clock(args, now)),
    ]
    return {tool.name: tool for tool in tools}


def run_builtin(tool: BuiltinTool, arguments: dict) -> ToolResult:
    started = time.perf_counter()
    try:
        parsed = tool.arguments.model_validate(arguments)
    except ValidationError as exc:
        return _result(False, f"Bad arguments for {tool.name}: {describe_validation(exc)}.", started)
    try:
        return _result(True, tool.run(parsed), started)
    except calculator.CalculatorError as exc:
        return _result(False, str(exc), started)


def _result(ok: bool, text: str, started: float) -> ToolResult:
    return ToolResult(ok, [text_part(text)], (time.perf_counter() - started) * 1000)
