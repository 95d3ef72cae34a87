import json

import pytest

from webapp.errors import ClientError
from webapp.web import protocol


def test_chat_frame_parses_with_extra_fields():
    frame = protocol.parse(json.dumps({"type": "chat", "id": "a1", "text": "hi", "client": "x"}))
    assert isinstance(frame, protocol.ChatFrame)
    assert (frame.id, frame.text) == ("a1", "hi")


@pytest.mark.parametrize(
    "raw, code",
    [
        ("{not json", "bad_json"),
        ("[1, 2]", "bad_frame"),
        ("{}", "bad_type"),
        ('{"type": "dance"}', "bad_type"),
        ('{"type": "chat", "id": 5, "text": "hi"}', "bad_frame"),
        ('{"type": "chat", "id": "a", "text": ""}', "bad_frame"),
        ('{"type": "chat", "id": "a"}', "bad_frame"),
        ('{"type": "stop"}', "bad_frame"),
        ('{"type": "settings", "values": [1]}', "bad_frame"),
        (b"\x00\x01", "bad_frame"),
        ('{"type": "chat", "id": "a", "text": "' + "x" * (1 << 20) + '"}', "too_large"),
        # Counted in bytes: 400k three-byte characters are 1.2 MB.
        ('{"type": "chat", "id": "a", "text": "' + "€" * 400_000 + '"}', "too_large"),
    ],
)
def test_bad_frames_raise_client_errors(raw, code):
    with pytest.raises(ClientError) as info:
        protocol.parse(raw)
    assert info.value.code == code
    assert info.value.message


def test_unknown_type_error_lists_known_types():
    with pytest.raises(ClientError) as info:
        protocol.parse('{"type": "dance"}')
    assert "chat" in info.value.message and "'dance'" in info.value.message
