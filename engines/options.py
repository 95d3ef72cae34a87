"""The settings every engine reads, validated into one typed object."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator


class GenerationOptions(BaseModel):
    """Live-tunable settings; each applies from the next message on."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)

    reasoning_budget: int = Field(
        512, ge=0, le=65536, description="Most thinking tokens per reply; 0 turns thinking off.",
        title="Thinking budget",
    )
    speculative: bool = Field(
        True, description="Draft tokens with the drafter and verify them.", title="Use the drafter"
    )
    draft_block_size: Annotated[int, Field(ge=2, le=16)] | Literal["auto"] = Field(
        "auto", description="Tokens per draft round, anchor included (2 drafts one token); \"auto\" picks it "
        "from the live acceptance and this machine's round costs, and turns drafting off where it does not pay.",
        title="Draft block size",
    )
    temperature: float = Field(0.0, ge=0.0, le=2.0, description="0 is greedy.", title="Temperature")
    top_p: float = Field(1.0, gt=0.0, le=1.0, description="Nucleus sampling mass.", title="Top-p")
    max_tokens: int = Field(
        1024, ge=1, le=65536, description="Most answer tokens per reply (thinking not counted).",
        title="Max tokens",
    )
    system_prompt: str = Field(
        "You are a helpful assistant.", max_length=32768, description="Sent before every conversation.",
        title="System prompt",
    )
    prefix_cache: bool = Field(
        True, description="Reuse computed prompt prefixes across requests.", title="Prefix cache"
    )
    prefix_cache_entries: int = Field(
        4, ge=1, le=64, description="Whole-prompt snapshots kept by the prefix cache.",
        title="Prefix cache entries",
    )
    prefill_step_size: int = Field(
        2048, ge=0, le=65536, description="Prompt tokens per prefill chunk; 0 sends the prompt at once.",
        title="Prefill step size",
    )

    decode_loop: Literal["specchat", "mlx-vlm"] = Field(
        "specchat",
        description="MLX engine: specchat's own compiled draft/verify loop, or mlx-vlm's (for comparison).",
        title="Decode loop",
    )

    tools: bool = Field(
        True, description="Offer the model the tools switched on in the Tools section.", title="Tools"
    )
    max_tool_steps: int = Field(8, ge=1, le=64, description="Most tool calls in one reply.", title="Most tool calls")
    tool_timeout_s: int = Field(
        60, ge=1, le=3600, description="A tool call running longer is cancelled and reported to the model as failed.",
        title="Tool timeout",
    )
    tool_result_chars: int = Field(
        20000, ge=1000, le=1000000, description="A longer tool result is cut, with a note saying so.",
        title="Tool result length",
    )

    @field_validator("draft_block_size", mode="wrap")
    @classmethod
    def _block(cls, value, handler):
        """One sentence for a bad block, where the union would give one per branch."""
        try:
            return handler(value)
        except ValidationError:
            raise ValueError('use a whole number from 2 to 16, or "auto" to let the engine pick it') from None

    def updated(self, values: dict) -> "GenerationOptions":
        """A validated copy with ``values`` applied (raises pydantic.ValidationError)."""
        return type(self).model_validate({**self.model_dump(), **values})
