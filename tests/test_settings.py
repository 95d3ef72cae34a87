import orjson
import pytest
import requests

from engines.options import GenerationOptions
from tests.support.wsclient import WsClient
from webapp.errors import ClientError
from webapp.hosting.settings import SettingsStore


def test_partial_update_persists_across_instances(tmp_path):
    store = SettingsStore(tmp_path)
    store.update({"reasoning_budget": 0, "system_prompt": "Be brief."})
    again = SettingsStore(tmp_path)
    assert again.current.reasoning_budget == 0
    assert again.current.system_prompt == "Be brief."
    assert again.current.max_tokens == GenerationOptions().max_tokens


@pytest.mark.parametrize(
    "values, field",
    [
        ({"reasoning_budget": -1}, "reasoning_budget"),
        ({"reasoning_budget": "5"}, "reasoning_budget"),
        ({"reasoning_budget": 1.5}, "reasoning_budget"),
        ({"speculative": 1}, "speculative"),
        ({"draft_block_size": 1}, "draft_block_size"),
        ({"draft_block_size": "Auto"}, "draft_block_size"),
        ({"draft_block_size": "4"}, "draft_block_size"),
        ({"temperature": 3}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"system_prompt": 7}, "system_prompt"),
        ({"warp_speed": True}, "warp_speed"),
    ],
)
def test_bad_values_change_nothing(tmp_path, values, field):
    store = SettingsStore(tmp_path)
    store.update({"max_tokens": 77})
    with pytest.raises(ClientError) as info:
        store.update({"reasoning_budget": 3, **values})
    assert field in info.value.message
    assert store.current.max_tokens == 77 and store.current.reasoning_budget == GenerationOptions().reasoning_budget
    assert SettingsStore(tmp_path).current == store.current


def test_integer_temperature_is_a_float():
    assert GenerationOptions().updated({"temperature": 1}).temperature == 1.0


def test_corrupt_file_falls_back_to_defaults(tmp_path):
    (tmp_path / "settings.json").write_text("{oops")
    assert SettingsStore(tmp_path).current == GenerationOptions()


def bad_copies(folder):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("settings.json.bad-"))


@pytest.mark.parametrize("content", [b"[1, 2]", b"null", b'"hello"', b"{oops", b"7"])
def test_a_file_that_is_no_settings_object_is_set_aside(tmp_path, caplog, content):
    (tmp_path / "settings.json").write_bytes(content)
    with caplog.at_level("WARNING", logger="webapp.hosting.settings"):
        store = SettingsStore(tmp_path)
    assert store.current == GenerationOptions()
    [bad] = bad_copies(tmp_path)
    assert (tmp_path / bad).read_bytes() == content
    assert len(caplog.records) == 1 and bad in caplog.records[0].getMessage()


def test_one_bad_value_keeps_the_others(tmp_path, caplog):
    saved = {"reasoning_budget": 7, "max_tokens": -5, "system_prompt": "Be brief.", "temperature": "hot",
             "gone_setting": 1}
    (tmp_path / "settings.json").write_bytes(orjson.dumps(saved))
    with caplog.at_level("WARNING", logger="webapp.hosting.settings"):
        store = SettingsStore(tmp_path)
    defaults = GenerationOptions()
    assert (store.current.reasoning_budget, store.current.system_prompt) == (7, "Be brief.")
    assert (store.current.max_tokens, store.current.temperature) == (defaults.max_tokens, defaults.temperature)
    [bad] = bad_copies(tmp_path)
    assert orjson.loads((tmp_path / bad).read_bytes()) == saved
    [line] = [r.getMessage() for r in caplog.records]
    assert "max_tokens" in line and "temperature" in line and "reasoning_budget" not in line
    # What was kept is saved: the next start reads it without complaint.
    assert SettingsStore(tmp_path).current == store.current and len(bad_copies(tmp_path)) == 1


def test_unknown_keys_alone_are_not_a_bad_file(tmp_path):
    (tmp_path / "settings.json").write_bytes(orjson.dumps({"reasoning_budget": 9, "gone_setting": 1}))
    assert SettingsStore(tmp_path).current.reasoning_budget == 9 and bad_copies(tmp_path) == []


def unwritable(folder):
    """A write that fails even for root: the temporary file's name is taken by a folder."""
    (folder / "settings.tmp").mkdir(parents=True)


def test_a_failed_write_changes_nothing(tmp_path):
    store = SettingsStore(tmp_path)
    store.update({"max_tokens": 77})
    unwritable(tmp_path)
    with pytest.raises(ClientError) as info:
        store.update({"max_tokens": 99})
    assert info.value.code == "settings_not_saved" and "could not be saved" in info.value.message
    assert store.current.max_tokens == 77 and SettingsStore(tmp_path).current.max_tokens == 77


def test_a_failed_write_answers_rest_with_json_and_ws_with_an_error_frame(fake_server, tmp_path):
    data = tmp_path / "data"
    with WsClient(fake_server.ws_url) as ws, WsClient(fake_server.ws_url) as other:
        unwritable(data)
        reply = requests.post(fake_server.url + "/api/settings", json={"max_tokens": 99}, timeout=10)
        assert reply.status_code == 500 and reply.headers["Content-Type"].startswith("application/json")
        assert reply.json()["error"]["code"] == "settings_not_saved"
        ws.send({"type": "settings", "values": {"max_tokens": 98}})
        error, seen = ws.until("error", timeout=10)
        assert error["code"] == "settings_not_saved" and not any(f["type"] == "settings" for f in seen)
        # The socket stays open and nothing changed, for this tab or any other.
        assert ws.chat("m1")[0]["finish_reason"] == "stop"
        other.send({"type": "chat", "id": "o1", "text": "hi"})
        _, frames = other.until("done", id="o1")
        assert not any(f["type"] == "settings" for f in frames)
    assert requests.get(fake_server.url + "/api/settings", timeout=10).json()["values"]["max_tokens"] == \
        GenerationOptions().max_tokens
