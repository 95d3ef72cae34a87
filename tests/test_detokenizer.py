"""Streamed text: each token's text out on its own token (mlx-vlm's waits for the next word), the same text in the
end, and a character split across tokens held until it is whole."""

import pytest

pytest.importorskip("mlx_vlm")

from mlx_vlm.tokenizer_utils import make_streaming_detokenizer  # noqa: E402

from demo_model import DEFAULT_MODEL  # noqa: E402
from engines.mlx.detokenizer import EagerBPEDetokenizer, streaming_detokenizer  # noqa: E402
from engines.mlx.loading import load_model  # noqa: E402

TEXTS = ["Hello there, naïve café — 東京 🙂 ok.", " a leading space",
         "<think>\nThe calculator gave 12.\n</think>\n\n= 12."]


@pytest.fixture(scope="module")
def demo():
    return load_model(str(DEFAULT_MODEL))


def stream(detokenizer, ids) -> list[str]:
    segments = []
    for token in ids:
        detokenizer.add_token(token)
        segments.append(detokenizer.last_segment)
    detokenizer.finalize()
    return segments + [detokenizer.last_segment]


@pytest.mark.parametrize("text", TEXTS)
def test_the_streamed_text_is_the_decoded_text_and_the_librarys(demo, text):
    ids = demo.tokenizer.encode(text, add_special_tokens=False)
    ours = stream(streaming_detokenizer(demo.processor), ids)
    assert isinstance(streaming_detokenizer(demo.processor), EagerBPEDetokenizer)
    assert "".join(ours) == demo.tokenizer.decode(ids) == "".join(stream(make_streaming_detokenizer(demo.processor),
                                                                          ids))
    assert not any("\ufffd" in s for s in ours)


def test_each_tokens_text_goes_out_with_it_where_the_library_waits_for_the_next_word(demo):
    ids = demo.tokenizer.encode("The calculator gave 12.", add_special_tokens=False)
    ours = stream(streaming_detokenizer(demo.processor), ids)
    library = stream(make_streaming_detokenizer(demo.processor), ids)
    assert ours[0] == demo.tokenizer.decode(ids[:1])  # the first token's text, at once
    assert library[0] == ""
    assert all(ours[i] == demo.tokenizer.decode(ids[: i + 1])[len("".join(ours[:i])):] for i in range(len(ids)))


def test_a_character_split_across_tokens_waits_until_it_is_whole(demo):
    ids = demo.tokenizer.encode("🙂", add_special_tokens=False)
    assert len(ids) > 1  # the demo vocabulary spells the emoji's four bytes in pieces
    ours = stream(streaming_detokenizer(demo.processor), ids)
    assert ours[: len(ids) - 1] == [""] * (len(ids) - 1) and ours[len(ids) - 1] == "🙂"


def test_a_half_character_at_the_end_is_dropped_and_a_leading_space_trimmed_where_asked(demo):
    library = make_streaming_detokenizer(demo.processor)
    trimmed = EagerBPEDetokenizer(library.tokenmap, trim_space=True)
    assert "".join(stream(trimmed, demo.tokenizer.encode(" two words", add_special_tokens=False))) == "two words"
    half = demo.tokenizer.encode("ok 🙂", add_special_tokens=False)[:-1]
    assert "".join(stream(streaming_detokenizer(demo.processor), half)) == "ok "


def test_an_entry_outside_the_byte_alphabet_streams_as_the_text_it_is():
    # An added token is kept as plain text in a byte-level vocabulary; "→" is no byte's stand-in.
    detokenizer = EagerBPEDetokenizer(["<tool>", "→", "\u0120ok"], trim_space=False)
    assert "".join(stream(detokenizer, [0, 1, 2])) == "<tool>→ ok"
