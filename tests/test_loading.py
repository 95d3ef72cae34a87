import subprocess
import sys

import pytest

from engines.errors import ModelNotFound
from engines.mlx.loading import DRAFTER, check_model_dir, has_bundled_mtp, normalise_rope_parameters


def test_rope_partial_factor_is_derived_from_factor():
    config = {"text_config": {"rope_parameters": {"type": "default", "factor": 4, "rope_theta": 1e6}}}
    assert normalise_rope_parameters(config)["text_config"]["rope_parameters"]["partial_rotary_factor"] == 0.25


def test_rope_left_alone_when_complete_or_absent():
    complete = {"text_config": {"rope_parameters": {"partial_rotary_factor": 0.5, "factor": 4}}}
    assert normalise_rope_parameters(complete)["text_config"]["rope_parameters"]["partial_rotary_factor"] == 0.5
    assert normalise_rope_parameters({"model_type": "x"}) == {"model_type": "x"}


def test_model_dir_checks(tmp_path, tiny_model):
    check_model_dir(str(tiny_model))
    check_model_dir("some-org/some-model")  # a hub id is resolved at load time
    with pytest.raises(ModelNotFound, match="does not exist"):
        check_model_dir(str(tmp_path / "missing"))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelNotFound, match="no \\*.safetensors"):
        check_model_dir(str(tmp_path))


def test_drafter_folder_errors_name_drafter(tmp_path):
    with pytest.raises(ModelNotFound, match="^Drafter path .* Pass --drafter a drafter folder"):
        check_model_dir(str(tmp_path / "missing"), DRAFTER)
    with pytest.raises(ModelNotFound, match="not a drafter folder .* Pass --drafter a folder with config.json"):
        check_model_dir(str(tmp_path), DRAFTER)
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelNotFound, match="Pass --drafter a complete drafter folder"):
        check_model_dir(str(tmp_path), DRAFTER)


def test_bundled_mtp_head_is_detected(tiny_model, tmp_path):
    assert has_bundled_mtp(tiny_model)
    split = tmp_path / "drafter"
    subprocess.run([sys.executable, "-m", "mlx_vlm.split_mtp", "--model", str(tiny_model), "--output", str(split)],
                   check=True, capture_output=True, timeout=120)
    assert not has_bundled_mtp(split)


def test_checkpoint_with_only_a_rope_factor_loads_and_drafts(tiny_model, tmp_path):
    """mlx-vlm reads config.json itself: the derived partial_rotary_factor must reach it."""
    import json

    from engines.mlx.loading import load_drafter, load_model

    copy = tmp_path / "factor-only"
    copy.mkdir()
    for file in tiny_model.iterdir():
        (copy / file.name).symlink_to(file)
    config = json.loads((tiny_model / "config.json").read_text())
    rope = config["text_config"]["rope_parameters"]
    rope["factor"] = 1 / rope.pop("partial_rotary_factor")
    (copy / "config.json").unlink()
    (copy / "config.json").write_text(json.dumps(config))

    loaded = load_model(str(copy))
    load_drafter(loaded, None)
    assert loaded.drafter_kind == "mtp"
    assert loaded.config["text_config"]["rope_parameters"]["partial_rotary_factor"] == 0.25
    assert "partial_rotary_factor" not in json.loads((copy / "config.json").read_text())["text_config"]["rope_parameters"]
    assert not any(p.name.startswith("specchat-model-") for p in tmp_path.iterdir())


def test_the_drafter_kind_is_logged_without_a_flag_specchat_lacks(tiny_model, caplog):
    """mlx-vlm names its own --draft-kind flag when it detects a drafter's kind: specchat's load says what it
    found instead, and leaves mlx-vlm's other logging alone."""
    import logging

    from mlx_vlm.speculative.drafters import resolve_drafter_kind

    from engines.mlx.loading import MLX_DRAFTERS_LOGGER, load_drafter, load_model

    loaded = load_model(str(tiny_model))
    with caplog.at_level(logging.INFO, logger=MLX_DRAFTERS_LOGGER):
        load_drafter(loaded, None)
        ours = [r.getMessage() for r in caplog.records if r.name == MLX_DRAFTERS_LOGGER]
        caplog.clear()
        resolve_drafter_kind(tiny_model)  # outside specchat's load: mlx-vlm's own words
        theirs = [r.getMessage() for r in caplog.records if r.name == MLX_DRAFTERS_LOGGER]
    assert len(ours) == 1 and ours[0].startswith("drafter kind 'mtp' detected for ") and "--draft" not in ours[0]
    assert len(theirs) == 1 and "--draft-kind" in theirs[0]
