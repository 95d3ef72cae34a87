import subprocess
import sys

import pytest

from engines.errors import ModelNotFound
from engines.mlx.loading import check_model_dir, has_bundled_mtp, normalise_rope_parameters


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


def test_bundled_mtp_head_is_detected(tiny_model, tmp_path):
    assert has_bundled_mtp(tiny_model)
    split = tmp_path / "drafter"
    subprocess.run([sys.executable, "-m", "mlx_vlm.split_mtp", "--model", str(tiny_model), "--output", str(split)],
                   check=True, capture_output=True, timeout=120)
    assert not has_bundled_mtp(split)
