"""Token ids for a turn, built so the next turn extends the previous one exactly.

A conversation's cache is reused only when the new prompt's ids extend the
stored ids (the hybrid Qwen 3.5 cache cannot be trimmed), so a follow-up turn
is appended as tokens rather than re-rendered by the chat template, which
would drop past reasoning and diverge early in the history.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from ..base import Message
from .loading import LoadedModel

THINK_CLOSE = "\n</think>\n\n"


def copy_tokenizer(loaded: LoadedModel) -> LoadedModel:
    """``loaded`` with a processor and tokenizer of its own, for a thread other than the model thread
    (a Hugging Face tokenizer is not safe to share across threads); it shares the weights."""
    processor = copy.deepcopy(loaded.processor)
    return replace(loaded, processor=processor, tokenizer=getattr(processor, "tokenizer", processor))


class PromptBuilder:
    def __init__(self, loaded: LoadedModel):
        self._loaded = loaded
        tok = loaded.tokenizer
        self.eos_text = tok.eos_token or "<|im_end|>"
        self.eos_id = tok.convert_tokens_to_ids(self.eos_text)
        self.think_close_ids = self.encode(THINK_CLOSE)
        # What the template writes between one turn's end token and the next turn.
        sample = self.render([Message("user", "x"), Message("assistant", "y")], generation_prompt=False)
        self.separator_ids = self.encode(sample.rsplit(self.eos_text, 1)[1])

    def encode(self, text: str) -> list[int]:
        return list(self._loaded.tokenizer.encode(text, add_special_tokens=False))

    def render(self, messages: list[Message], *, thinking: bool = False, generation_prompt: bool = True) -> str:
        from mlx_vlm.prompt_utils import apply_chat_template

        payload = []
        for m in messages:
            item = {"role": m.role, "content": m.content}
            if m.reasoning:
                item["reasoning_content"] = m.reasoning
            payload.append(item)
        return apply_chat_template(
            self._loaded.processor,
            self._loaded.config,
            payload,
            add_generation_prompt=generation_prompt,
            enable_thinking=thinking,
        )

    def conversation_ids(self, system_prompt: str, messages: list[Message], thinking: bool) -> list[int]:
        """The whole conversation rendered by the model's own chat template."""
        head = [Message("system", system_prompt)] if system_prompt else []
        return self.encode(self.render(head + list(messages), thinking=thinking))

    def continuation_ids(self, system_prompt: str, messages: list[Message], thinking: bool) -> list[int]:
        """The conversation up to an unfinished reply (the last message), and the reply so far."""
        head = self.conversation_ids(system_prompt, messages[:-1], thinking)
        said = messages[-1]
        text = said.content
        if thinking:  # the template opened the thinking block; the reply's own close follows it
            text = said.reasoning
            if said.content:
                text = said.reasoning.rstrip("\n") + THINK_CLOSE + said.content.lstrip("\n")
        return head + self.encode(text)

    def next_turn_ids(self, previous: list[int], closed: bool, user_text: str, thinking: bool) -> list[int]:
        """``previous`` (the ids the model has seen) extended by a new user turn."""
        turn = self.encode(self.render([Message("user", user_text)], thinking=thinking))
        return previous + ([] if closed else [self.eos_id]) + self.separator_ids + turn

    def system_prefix_ids(self, system_prompt: str) -> list[int]:
        """The system block plus the next turn's start: a prefix of every first turn."""
        ids = self.conversation_ids(system_prompt, [Message("user", "x")], thinking=False)
        user_start = self.encode("<|im_start|>user")
        for at in range(len(ids) - len(user_start) + 1):
            if ids[at : at + len(user_start)] == user_start:
                return ids[: at + len(user_start)]
        return []
