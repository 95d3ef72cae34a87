"""Tool calls in the model's own markup: whether the checkpoint's chat template shows tools, and the calls read
from a reply's tokens as they stream.

The format (Qwen 3.5's ``<tool_call>\\n<function=NAME>\\n<parameter=P>\\nVALUE\\n</parameter>\\n</function>\\n
</tool_call>``, among others) is the one mlx-vlm's registry finds for the template, and each call's body is read
by mlx-vlm's parser for it, which types the values by the tool's schema. The calls are found by token, not by
text: the markers are single tokens in the tokenizers that use them, so a call's tokens never reach the reply's
text (a streaming detokenizer may release text late, which would show part of a call first), and the verify rounds
whose tokens are markup are known exactly (``tool_acceptance``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass

from ..base import Message
from ..events import ToolCall
from ..tool_calls import ERROR_TEXT_LIMIT, read_arguments
from .library import tool_parser_name

# A tool the template is asked to render, to see whether it renders tools at all.
PROBE = {"type": "function", "function": {
    "name": "specchat_probe", "description": "Checks that the chat template shows tools.",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}}
NO_TOOLS = ("This model cannot call tools: {why}. Load a checkpoint whose chat template renders tools (Qwen 3.5's "
            "does), or turn tools off in the settings.")


@dataclass(frozen=True)
class ToolMarkup:
    """A model's tool-call format: its parser (an mlx-vlm module) and the ids of its start and end markers."""

    parser: object
    start: int
    end: int
    decode: Callable[[list[int]], str]


def tool_markup(loaded, prompts) -> tuple[ToolMarkup | None, str | None]:
    """The model's tool-call format, or (None, why it cannot call tools)."""
    try:
        from mlx_vlm.tools import load_tool_module
    except ImportError as exc:  # its package imports its server's (fastapi): an install without it still chats
        return None, NO_TOOLS.format(why=f"mlx-vlm's tool parsers could not be imported ({exc}); reinstall "
                                         "mlx-vlm with its dependencies")
    try:
        offered = prompts.render([Message("user", "x")], tools=(PROBE,))
    except Exception as exc:  # a template that fails on tools must not stop the model loading
        return None, NO_TOOLS.format(why=f"its chat template failed to render a tool ({type(exc).__name__}: {exc})")
    if PROBE["function"]["name"] not in offered:
        return None, NO_TOOLS.format(why="its chat template does not render tools")
    name = tool_parser_name(loaded.processor)
    if name is None:
        return None, NO_TOOLS.format(why="mlx-vlm knows no tool-call format for its chat template")
    parser = load_tool_module(name)
    ids = [prompts.encode(marker) for marker in (parser.tool_call_start, parser.tool_call_end)]
    if any(len(marker) != 1 for marker in ids):
        return None, NO_TOOLS.format(why=f"its tool-call markers ({parser.tool_call_start!r}, "
                                         f"{parser.tool_call_end!r}) are not single tokens of its tokenizer")
    return ToolMarkup(parser, ids[0][0], ids[1][0], lambda body: loaded.tokenizer.decode(body)), None


class CallReader:
    """One reply's calls, from its tokens: ``read`` takes each token of a call's markup (``is_markup``) and gives
    the call once its end marker comes."""

    def __init__(self, markup: ToolMarkup, tools: tuple[dict, ...]):
        self.markup = markup
        self.tools = list(tools)
        self.inside = False
        self.made = 0
        self._body: list[int] = []

    def is_markup(self, token: int) -> bool:
        return self.inside or token == self.markup.start

    def read(self, token: int) -> ToolCall | None:
        if not self.inside:
            self.inside = True
            return None
        if token != self.markup.end:
            self._body.append(token)
            return None
        body, self._body, self.inside = self._body, [], False
        return self._call(self.markup.decode(body).strip())

    def cut_off(self) -> ToolCall:
        """The call still open when the model ended its reply."""
        body, self._body, self.inside = self.markup.decode(self._body).strip(), [], False
        self.made += 1
        return ToolCall(_call_id(), "", {}, f"The call ended before {self.markup.parser.tool_call_end}: "
                        f"{body[:ERROR_TEXT_LIMIT]!r}. Write the whole call, then end it.")

    def _call(self, body: str) -> ToolCall:
        self.made += 1
        call = _call_id()
        try:
            parsed = self.markup.parser.parse_tool_call(body, self.tools)
        except Exception as exc:  # the parser reads the model's free text: any failure is a malformed call
            return ToolCall(call, "", {}, f"The call could not be read ({type(exc).__name__}: {exc}): "
                            f"{body[:ERROR_TEXT_LIMIT]!r}. Write it in the format the system prompt shows.")
        if isinstance(parsed, list):  # a format that may hold several calls in one block: one is read here
            parsed = parsed[0] if len(parsed) == 1 else {"name": "", "arguments": {}}
        name = str(parsed.get("name") or "").strip()
        arguments = parsed.get("arguments")
        if not name:
            return ToolCall(call, "", {}, f"The call named no function: {body[:ERROR_TEXT_LIMIT]!r}. "
                            "Make one call per block, naming one of the tools offered.")
        if isinstance(arguments, str):
            return read_arguments(call, name, arguments)
        if not isinstance(arguments, dict):
            return ToolCall(call, name, {}, f"The arguments were not named: {body[:ERROR_TEXT_LIMIT]!r}. "
                            "Give each argument by its name.")
        return ToolCall(call, name, arguments)


def _call_id() -> str:
    return f"call_{uuid.uuid4().hex[:24]}"
