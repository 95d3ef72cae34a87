"""What a tool is and what a call gives back, the same for built-in tools and MCP servers' tools."""

from __future__ import annotations

from dataclasses import dataclass

# The server name the built-in tools are listed under.
BUILTIN = "builtin"
# The shapes below are built with dict(...): a dict literal with a "type" key reads as a websocket frame to the
# docs test (tests/test_docs.py), and these are not frames.


@dataclass(frozen=True)
class ToolSpec:
    """A tool as a model is told about it; ``parameters`` is its arguments' JSON schema."""

    server: str
    name: str
    description: str
    parameters: dict

    def function(self) -> dict:
        """The OpenAI function-tool shape, as chat templates and OpenAI-compatible servers take it."""
        return dict(type="function",
                    function={"name": self.name, "description": self.description, "parameters": self.parameters})


@dataclass(frozen=True)
class ToolResult:
    """A call's outcome: ``content`` is a list of parts, ``{"type": "text", "text"}`` or
    ``{"type": "image", "data": BASE64, "mime_type"}``; ``ok`` is false when the call failed, and then the
    text says why, for the model to read."""

    ok: bool
    content: list[dict]
    ms: float

    def text(self) -> str:
        return "\n".join(part["text"] for part in self.content if part["type"] == "text")


def text_part(text: str) -> dict:
    return dict(type="text", text=text)


def image_part(data: str, mime_type: str) -> dict:
    return dict(type="image", data=data, mime_type=mime_type)


def empty_schema() -> dict:
    """The arguments' schema of a tool that takes none."""
    return dict(type="object", properties={})


def cut(content: list[dict], limit: int) -> list[dict]:
    """``content`` with its text held to ``limit`` characters in all; the cut says so, for the model."""
    total = sum(len(part["text"]) for part in content if part["type"] == "text")
    if total <= limit:
        return content
    kept, left = [], limit
    for part in content:
        if part["type"] != "text":
            kept.append(part)
        elif left > 0:
            kept.append(text_part(part["text"][:left]))
            left -= len(kept[-1]["text"])
    kept.append(text_part(f"[The result was {total:,} characters long: only its first {limit:,} are shown "
                          f"(tool_result_chars).]"))
    return kept
