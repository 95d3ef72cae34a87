import pytest

from engines.options import GenerationOptions
from webapp.errors import ClientError
from webapp.settings import SettingsStore


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
