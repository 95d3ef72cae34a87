"""The Hugging Face layout fixture: mlx-vlm's own conversion of it gives back the parameters it was made from."""

import json

import pytest

from demo_model.hf_layout import build_hf_checkpoint, convert, mlx_parameters, mtp_shards


def load_all(folder):
    import mlx.core as mx

    weights = {}
    for file in sorted(folder.glob("*.safetensors")):
        weights |= mx.load(str(file))
    return weights


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_float_conversion_gives_back_the_parameters(tmp_path, dtype):
    import mlx.core as mx

    hf = build_hf_checkpoint(tmp_path / "hf", dtype=dtype)
    config = json.loads((hf / "config.json").read_text())
    assert config["text_config"]["model_type"] == "qwen3_5_text"
    index = json.loads((hf / "model.safetensors.index.json").read_text())["weight_map"]
    assert any(k.startswith("model.language_model.") for k in index)
    assert any(k.startswith("model.visual.") for k in index)
    assert mtp_shards(hf) == ["model-00003-of-00003.safetensors"]
    hf_weights = load_all(hf)
    assert hf_weights["model.language_model.layers.0.linear_attn.conv1d.weight"].shape[1] == 1

    out = convert(hf, tmp_path / "float", bits=None, mtp=True)
    body, head = load_all(out), load_all(tmp_path / "float-mtp")
    assert not any(k.startswith("mtp.") for k in body)
    _, expected = mlx_parameters(hf)
    for key, value in expected.items():
        got = head[key.removeprefix("mtp.")] if key.startswith("mtp.") else body[key]
        assert got.dtype == getattr(mx, dtype), key
        assert got.shape == value.shape, key
        # Norms go through minus 1 and plus 1 in 16 bits, which rounds them once more.
        want = value.astype(getattr(mx, dtype)).astype(mx.float32)
        assert mx.allclose(got.astype(mx.float32), want, atol=1e-2).item(), key


@pytest.mark.parametrize("vision", [True, False])
def test_quantized_conversion_loads_in_mlx_vlm(tmp_path, vision):
    from mlx_vlm import load

    hf = build_hf_checkpoint(tmp_path / "hf", vision=vision)
    out = convert(hf, tmp_path / "q4", bits=4, group_size=64)
    config = json.loads((out / "config.json").read_text())
    assert config["quantization"] == {"group_size": 64, "bits": 4, "mode": "affine"}
    assert not (tmp_path / "q4-mtp").exists()
    model = load(str(out))[0]
    assert model.language_model.model.embed_tokens.bits == 4
    assert (getattr(model, "vision_tower", None) is not None) == vision
