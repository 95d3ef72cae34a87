"""The settings' labels and limits are written once, in engines/options.py, and served as its JSON schema: the
route gives exactly the model's schema, and every setting in it carries its own label and description."""

from engines.fake import FakeEngine
from engines.options import GenerationOptions
from webapp import create_app


def served_schema() -> dict:
    response = create_app(FakeEngine()).test_client().get("/api/settings/schema")
    assert response.status_code == 200
    body = response.get_json()
    assert body["ok"] is True
    return body["schema"]


def test_the_route_serves_the_settings_models_schema():
    assert served_schema() == GenerationOptions.model_json_schema()


def test_the_schema_covers_every_setting_with_its_default():
    properties = served_schema()["properties"]
    defaults = GenerationOptions().model_dump()
    assert set(properties) == set(defaults)
    for key, value in defaults.items():
        assert properties[key]["default"] == value, key


def test_every_setting_has_a_label_of_its_own_and_a_description():
    for key, prop in served_schema()["properties"].items():
        # without a title of its own pydantic titles the key ("Top P"); the pane shows the one written for it
        assert GenerationOptions.model_fields[key].title == prop["title"], key
        assert prop["description"].endswith("."), key


def test_numeric_settings_have_both_bounds_in_the_schema():
    for key, prop in served_schema()["properties"].items():
        for branch in prop.get("anyOf", [prop]):  # a number that also takes a word ("auto") is a union
            if branch.get("type") in ("integer", "number"):
                assert "maximum" in branch and ("minimum" in branch or "exclusiveMinimum" in branch), key


def test_the_draft_block_takes_2_to_16_or_auto_and_is_auto_by_default():
    block = served_schema()["properties"]["draft_block_size"]
    assert block["default"] == "auto"
    assert {"type": "integer", "minimum": 2, "maximum": 16} in block["anyOf"]
    assert {"const": "auto", "type": "string"} in block["anyOf"]
    assert GenerationOptions().updated({"draft_block_size": 5}).draft_block_size == 5
