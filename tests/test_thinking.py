import pytest

from engines.events import Answer, Thinking
from engines.thinking import ThinkSplitter


def run(chunks, thinking=False):
    splitter = ThinkSplitter(thinking=thinking)
    events = [e for c in chunks for e in splitter.feed(c)] + splitter.flush()
    return "".join(e.text for e in events if isinstance(e, Thinking)), "".join(
        e.text for e in events if isinstance(e, Answer)
    )


def test_prompt_opened_thinking_then_answer():
    assert run(["I should", " add.", "</think>", "\n\n42"], thinking=True) == ("I should add.", "42")


@pytest.mark.parametrize("cut", range(1, len("abc</think>def")))
def test_close_tag_split_at_every_position(cut):
    text = "abc</think>def"
    assert run([text[:cut], text[cut:]], thinking=True) == ("abc", "def")


@pytest.mark.parametrize("cut", range(1, len("hi<think>hmm</think>ok")))
def test_inline_tags_split_anywhere(cut):
    text = "hi<think>hmm</think>ok"
    assert run([text[:cut], text[cut:]]) == ("hmm", "hiok")


def test_one_character_chunks():
    assert run(list("<think>a<b</think>c>d")) == ("a<b", "c>d")


def test_lookalike_text_is_released_at_the_end():
    assert run(["answer </thi"], thinking=False) == ("", "answer </thi")
    assert run(["thinking </thi"], thinking=True) == ("thinking </thi", "")


def test_no_empty_events():
    splitter = ThinkSplitter(thinking=True)
    assert splitter.feed("</think>") == []
    assert splitter.feed("") == []


@pytest.mark.parametrize("chunks", [["</think>\n\nHi"], ["</think>", "\n", "\n", "Hi"], ["</thi", "nk>\n", "\nHi\n\nthere"]])
def test_the_line_breaks_after_thinking_are_not_the_answer(chunks):
    assert run(["hmm", *chunks], thinking=True) == ("hmm", "Hi" + "\n\nthere" * ("there" in chunks[-1]))


def test_an_answer_after_a_separate_reasoning_field_starts_at_its_text():
    splitter = ThinkSplitter()
    splitter.after_thinking()
    events = splitter.feed("\n\n") + splitter.feed("\nOK\n\n")
    assert [e.text for e in events] == ["OK\n\n"]


def test_line_breaks_of_an_answer_without_thinking_are_kept():
    assert run(["\nfirst", "\n\nsecond"]) == ("", "\nfirst\n\nsecond")
