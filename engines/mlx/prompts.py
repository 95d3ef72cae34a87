"""Token ids for a turn, built so the next turn extends the previous one exactly.

A conversation's cache is reused only when the new prompt's ids extend the
stored ids (the hybrid Qwen 3.5 cache cannot be trimmed), so a follow-up turn
is appended as tokens rather than re-rendered by the chat template, which
would drop past reasoning and diverge early in the history.
"""

from __future__ import annotations

import copy
from dataclasses import replace

from ..base import Image, Message
from ..events import ToolCall
from ..tool_calls import images_after_tools, openai_tool_calls
from .images import ImageProcessing, expand_placeholders, prompt_images
from .loading import LoadedModel

THINK_CLOSE = "\n</think>\n\n"


def copy_tokenizer(loaded: LoadedModel) -> LoadedModel:
    """``loaded`` with a processor and tokenizer of its own, for a thread other than the model thread
    (a Hugging Face tokenizer is not safe to share across threads); it shares the weights."""
    processor = copy.deepcopy(loaded.processor)
    return replace(loaded, processor=processor, tokenizer=getattr(processor, "tokenizer", processor))


class PromptBuilder:
    def __init__(self, loaded: LoadedModel, vision: bool = False):
        """``vision``: the model can see, so messages' images are rendered (else they are left out, and a
        turn that has any is refused before its prompt is built)."""
        self._loaded = loaded
        self.vision = vision
        tok = loaded.tokenizer
        self.eos_text = tok.eos_token or "<|im_end|>"
        self.eos_id = tok.convert_tokens_to_ids(self.eos_text)
        self.think_close_ids = self.encode(THINK_CLOSE)
        self.tool_images_inline = False  # set below, once the template is probed
        # What the template writes between one turn's end token and the next turn.
        sample = self.render([Message("user", "x"), Message("assistant", "y")], generation_prompt=False)
        self.separator_text = sample.rsplit(self.eos_text, 1)[1]
        self.separator_ids = self.encode(self.separator_text)
        self.images = ImageProcessing(loaded.processor)
        self.image_token = loaded.config.get("image_token_id")
        # Qwen 3.5's template writes a tool's images inside its <tool_response>; where one writes only the text,
        # the images go in a user message after the results instead, so the model sees them either way.
        self.tool_images_inline = vision and self._renders_tool_images()

    def encode(self, text: str) -> list[int]:
        return list(self._loaded.tokenizer.encode(text, add_special_tokens=False))

    def render(self, messages: list[Message], *, thinking: bool = False, generation_prompt: bool = True,
               tools: tuple[dict, ...] = ()) -> str:
        """``messages`` as the model's chat template writes them, with ``tools`` (OpenAI function schemas) offered."""
        if self.vision and not self.tool_images_inline:
            messages = images_after_tools(messages)
        return self._render(messages, thinking, generation_prompt, tools)

    def _render(self, messages: list[Message], thinking: bool, generation_prompt: bool,
                tools: tuple[dict, ...]) -> str:
        from mlx_vlm.prompt_utils import apply_chat_template

        payload = []
        for m in messages:
            item = {"role": m.role, "content": m.content}
            if m.images and self.vision:  # the image parts first, as Qwen3-VL's prompts put them
                item["content"] = [*({"type": "image"} for _ in m.images), {"type": "text", "text": m.content}]
            if m.reasoning:
                item["reasoning_content"] = m.reasoning
            if m.tool_calls:
                item["tool_calls"] = openai_tool_calls(m.tool_calls)
            if m.role == "tool":
                item["tool_call_id"] = m.tool_call_id
            payload.append(item)
        extra = {"tools": list(tools)} if tools else {}
        return apply_chat_template(
            self._loaded.processor,
            self._loaded.config,
            payload,
            add_generation_prompt=generation_prompt,
            enable_thinking=thinking,
            num_images=len(self.images_of(messages)),
            **extra,
        )

    def _renders_tool_images(self) -> bool:
        """The chat template writes an image placeholder for an image in a tool message."""
        probe = Image("probe", "probe", "image/png", 1, 1)
        messages = [Message("user", "x"), Message("assistant", "", tool_calls=(ToolCall("probe", "probe"),)),
                    Message("tool", "y", images=(probe,), tool_call_id="probe")]
        try:
            text = self._render(messages, False, True, ())
        except Exception:  # a template that cannot write tool messages at all: nothing renders inline
            return False
        return self.encode(text).count(self.image_token) == 1

    def images_of(self, messages: list[Message]) -> tuple[Image, ...]:
        """The images the prompt for ``messages`` holds, in order (none when the model cannot see)."""
        return prompt_images(messages) if self.vision else ()

    def encode_with_images(self, text: str, messages: list[Message]) -> list[int]:
        """``text`` (``messages`` rendered) as ids, each image's placeholder repeated for its tokens."""
        ids = self.encode(text)
        images = self.images_of(messages)
        if not images:
            return ids
        return expand_placeholders(ids, self.image_token, [self.images.token_count(image) for image in images])

    def conversation_ids(self, system_prompt: str, messages: list[Message], thinking: bool,
                         tools: tuple[dict, ...] = ()) -> list[int]:
        """The whole conversation rendered by the model's own chat template."""
        head = [Message("system", system_prompt)] if system_prompt else []
        text = self.render(head + list(messages), thinking=thinking, tools=tools)
        return self.encode_with_images(text, list(messages))

    def continuation_ids(self, system_prompt: str, messages: list[Message], thinking: bool,
                         tools: tuple[dict, ...] = ()) -> list[int]:
        """The conversation up to an unfinished reply (the last message), and the reply so far."""
        head = self.conversation_ids(system_prompt, messages[:-1], thinking, tools)
        said = messages[-1]
        text = said.content
        if thinking:  # the template opened the thinking block; the reply's own close follows it
            text = said.reasoning
            if said.content:
                text = said.reasoning.rstrip("\n") + THINK_CLOSE + said.content.lstrip("\n")
        return head + self.encode(text)

    def next_turn_ids(self, previous: list[int], closed: bool, user_text: str, thinking: bool,
                      images: tuple[Image, ...] = ()) -> list[int]:
        """``previous`` (the ids the model has seen) extended by a new user turn and its ``images``."""
        message = Message("user", user_text, images=images)
        turn = self.encode_with_images(self.render([message], thinking=thinking), [message])
        return previous + ([] if closed else [self.eos_id]) + self.separator_ids + turn

    def tool_result_ids(self, previous: list[int], closed: bool, system_prompt: str, messages: list[Message],
                        results: int, thinking: bool, tools: tuple[dict, ...]) -> list[int] | None:
        """``previous`` (the ids the model has seen, its calls included) extended by the last ``results`` messages
        (tool results) and the next generation prompt, as the template writes them after the calls: the text a
        render of the whole conversation adds to a render that ends with the calls. None when the template
        writes the calls differently once results follow them (then the conversation is rendered afresh)."""
        head = [Message("system", system_prompt)] if system_prompt else []
        said = self.render(head + messages[:-results], thinking=thinking, generation_prompt=False, tools=tools)
        whole = self.render(head + messages, thinking=thinking, tools=tools)
        if not (whole.startswith(said) and said.endswith(self.eos_text + self.separator_text)):
            return None
        added = self.encode_with_images(whole[len(said):], messages[-results:])
        return previous + ([] if closed else [self.eos_id]) + self.separator_ids + added

    def system_prefix_ids(self, system_prompt: str) -> list[int]:
        """The system block plus the next turn's start: a prefix of every first turn."""
        ids = self.conversation_ids(system_prompt, [Message("user", "x")], thinking=False)
        user_start = self.encode("<|im_start|>user")
        for at in range(len(ids) - len(user_start) + 1):
            if ids[at : at + len(user_start)] == user_start:
                return ids[: at + len(user_start)]
        return []
