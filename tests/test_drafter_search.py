"""A drafter for a checkpoint converted without its MTP head: found beside it, built from the original
checkpoint in the hub cache or from its head's shard alone, or a message that says how to get one."""

import json
import os
import shutil
import subprocess
import sys

import pytest

from demo_model.hf_layout import add_to_hub_cache, build_hf_checkpoint, convert, mtp_shards
from engines.mlx.drafter_search import DrafterSearch, NoDrafter, find_drafter
from engines.mlx.verify_cost import slower_note
from tests.support.fake_hub import FakeHub
from tests.support.hub_cache import HF_BASE
from webapp import ROOT


def tensors(folder):
    import mlx.core as mx

    return mx.load(str(folder / "model.safetensors"))


def drafts(path, drafter_path):
    """Rounds of a short greedy draft-and-verify with the drafter at ``drafter_path`` (through the engine's
    own loading and decoder)."""
    from engines import Message
    from engines.mlx.decoding import Decoder, Sampling
    from engines.mlx.loading import load_drafter, load_model
    from engines.mlx.prompts import PromptBuilder

    loaded = load_model(str(path))
    load_drafter(loaded, str(drafter_path))
    assert loaded.drafter_kind == "mtp"
    decoder = Decoder(loaded.model, loaded.drafter)
    ids = PromptBuilder(loaded).conversation_ids("", [Message("user", "hello")], False)
    state = decoder.new_state()
    first = decoder.feed(state, ids, 0, Sampling())
    rounds = [step.accepted for step in decoder.decode(state, first, max_tokens=16, block=3, sampling=Sampling(),
                                                       stop_ids=set(), cancelled=lambda: False)
              if step.accepted is not None]
    return rounds


def test_a_conversion_beside_its_mtp_folder_gets_that_drafter(converted, tmp_path):
    from engines.mlx.loading import load_drafter, load_model

    _, split = converted
    loaded = load_model(str(split))
    load_drafter(loaded, None, DrafterSearch(data_dir=tmp_path / "data"))
    assert loaded.drafter_kind == "mtp"
    assert loaded.drafter_name == f"{split}-mtp (mtp)"
    assert loaded.drafter_note is None
    assert not (tmp_path / "data").exists()  # nothing built
    assert drafts(split, split.parent / "Tiny-4bit-split-mtp")


@pytest.mark.parametrize("where", ["hub cache", "models folder"])
def test_a_hub_model_gets_its_mtp_folder_from_the_hub_cache_or_the_models_folder(converted, tmp_path, monkeypatch,
                                                                                 where):
    _, split = converted
    cache = tmp_path / "hub"
    snapshot = add_to_hub_cache(split, cache, "tinyorg/Tiny-4bit")
    if where == "hub cache":
        drafter = add_to_hub_cache(split.parent / "Tiny-4bit-split-mtp", cache, "tinyorg/Tiny-4bit-mtp")
    else:
        drafter = tmp_path / "models" / "tinyorg" / "Tiny-4bit-mtp"
        shutil.copytree(split.parent / "Tiny-4bit-split-mtp", drafter)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    found = find_drafter(snapshot, DrafterSearch(models_dir=tmp_path / "models"))
    assert (found.path, found.how) == (drafter, f"Tiny-4bit-mtp, in the {where}" if where == "models folder"
                                       else f"{drafter.name}, in the hub cache")


def test_a_mixed_conversion_gets_a_head_at_its_base_bits(hf_base, tmp_path, monkeypatch):
    _, cache = hf_base
    mixed = convert(HF_BASE, tmp_path / "Tiny-mixed_4_6", bits=None, quant_predicate="mixed_4_6", hub_cache=cache)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    found = find_drafter(mixed, DrafterSearch(data_dir=tmp_path / "data"))
    assert found.path.name == "tinyorg--Tiny-Qwen3.5-mtp-4bit-g64"
    config = json.loads((found.path / "config.json").read_text())
    assert config["quantization"] == {"group_size": 64, "bits": 4, "mode": "affine"}


def test_a_drafter_folder_that_does_not_fit_is_not_used(converted, tmp_path):
    _, split = converted
    model = tmp_path / "Other-4bit"
    shutil.copytree(split, model)
    beside = tmp_path / "Other-4bit-mtp"
    shutil.copytree(split.parent / "Tiny-4bit-split-mtp", beside)
    config = json.loads((beside / "config.json").read_text())
    config["text_config"]["hidden_size"] = 64
    (beside / "config.json").write_text(json.dumps(config))
    with pytest.raises(NoDrafter) as caught:
        find_drafter(model, DrafterSearch(data_dir=tmp_path / "data"))
    assert f"{beside} does not fit this model (hidden size 64, not 128)" in caught.value.message


def test_the_original_in_the_hub_cache_gives_a_drafter_offline_quantized_like_the_body(
        converted, hf_base, tmp_path, monkeypatch):
    import mlx.core as mx

    headless, split = converted
    _, cache = hf_base
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    found = find_drafter(headless, DrafterSearch(data_dir=tmp_path / "data"))
    assert found.path == tmp_path / "data" / "drafters" / "tinyorg--Tiny-Qwen3.5-mtp-4bit-g64"
    assert found.how == f"built from {HF_BASE} from the hub cache"
    config = json.loads((found.path / "config.json").read_text())
    assert config["quantization"] == {"group_size": 64, "bits": 4, "mode": "affine"}
    assert config["model_type"] == "qwen3_5_mtp" and config["base_model"] == HF_BASE
    # Quantized as `convert --mtp` quantizes the head for a 4-bit body: the same tensors, bit for bit.
    built, reference = tensors(found.path), tensors(split.parent / "Tiny-4bit-split-mtp")
    assert sorted(built) == sorted(reference)
    for key, value in reference.items():
        assert built[key].dtype == value.dtype and mx.array_equal(built[key], value).item(), key
    assert drafts(headless, found.path)
    again = find_drafter(headless, DrafterSearch(data_dir=tmp_path / "data"))
    assert (again.path, again.how) == (found.path, "tinyorg--Tiny-Qwen3.5-mtp-4bit-g64, built before")


def test_a_base_model_named_in_config_json_alone_is_found_too(converted, hf_base, tmp_path, monkeypatch):
    """Some conversions carry no model card: ``base_model`` in config.json names the original."""
    headless, _ = converted
    copy = tmp_path / "Tiny-4bit-no-card"
    shutil.copytree(headless, copy)
    (copy / "README.md").unlink()
    config = json.loads((copy / "config.json").read_text())
    assert "base_model" not in config
    monkeypatch.setenv("HF_HUB_CACHE", str(hf_base[1]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(NoDrafter):  # nothing names the original
        find_drafter(copy, DrafterSearch(data_dir=tmp_path / "data"))
    (copy / "config.json").write_text(json.dumps({**config, "base_model": HF_BASE}))
    found = find_drafter(copy, DrafterSearch(data_dir=tmp_path / "data"))
    assert found.how == f"built from {HF_BASE} from the hub cache"


@pytest.mark.parametrize("bits, group_size", [(5, 64), (8, 32)])
def test_a_built_head_is_what_convert_mtp_writes_at_the_bodys_bits(hf_base, tmp_path, monkeypatch, bits,
                                                                     group_size):
    import mlx.core as mx

    hf, cache = hf_base
    body = convert(HF_BASE, tmp_path / "body", bits=bits, group_size=group_size, hub_cache=cache)
    convert(hf, tmp_path / "split", bits=bits, group_size=group_size, mtp=True)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    found = find_drafter(body, DrafterSearch(data_dir=tmp_path / "data"))
    assert found.path.name == f"tinyorg--Tiny-Qwen3.5-mtp-{bits}bit-g{group_size}"
    built, reference = tensors(found.path), tensors(tmp_path / "split-mtp")
    assert sorted(built) == sorted(reference)
    assert all(built[k].dtype == v.dtype and mx.array_equal(built[k], v).item() for k, v in reference.items())
    assert json.loads((found.path / "config.json").read_text())["quantization"]["bits"] == bits


def test_a_float16_body_gets_a_float16_drafter(tmp_path, monkeypatch):
    import mlx.core as mx

    hf = build_hf_checkpoint(tmp_path / "F16", dtype="float16", vision=False)
    cache = tmp_path / "hub"
    add_to_hub_cache(hf, cache, "tinyorg/F16")
    body = convert("tinyorg/F16", tmp_path / "F16-mlx", bits=None, hub_cache=cache)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    found = find_drafter(body, DrafterSearch(data_dir=tmp_path / "data"))
    assert found.path.name == "tinyorg--F16-mtp-float16"
    config = json.loads((found.path / "config.json").read_text())
    assert "quantization" not in config and config["text_config"]["dtype"] == "float16"
    weights = tensors(found.path)
    assert {v.dtype for v in weights.values()} == {mx.float16}
    assert not any(k.endswith(".scales") for k in weights)


def test_nothing_found_says_how_to_get_a_drafter(converted, hf_base, tmp_path, monkeypatch):
    from engines import GenerationOptions
    from engines.mlx import MlxEngine

    headless, _ = converted
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    engine = MlxEngine(str(headless), drafters=DrafterSearch(data_dir=tmp_path / "data"))
    engine.load(GenerationOptions())
    try:
        info = engine.info()
        assert info.state == "ready" and info.drafter is None
        assert info.drafter_note.startswith("This conversion dropped its MTP head")
        assert f"Its base model {HF_BASE} is not in the hub cache" in info.drafter_note
        assert f"`specchat drafter --for {headless} --allow-downloads`" in info.drafter_note
        assert f"--drafter {headless}-mtp" in info.drafter_note
        assert info.to_dict()["drafter_note"] == info.drafter_note
    finally:
        engine.unload()


def test_a_conversion_that_names_no_base_asks_for_one(converted, tmp_path, monkeypatch):
    _, split = converted
    model = tmp_path / "Anonymous-4bit"
    shutil.copytree(split, model)  # no -mtp beside the copy, no base_model in its card
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub"))
    with pytest.raises(NoDrafter) as caught:
        find_drafter(model, DrafterSearch(data_dir=tmp_path / "data"))
    message = caught.value.message
    assert "does not say which checkpoint it was converted from" in message
    assert f"`specchat drafter --for {model} --from ORG/NAME`" in message


def run_drafter_command(*args, env=None):
    return subprocess.run([sys.executable, "-m", "webapp", "drafter", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, **(env or {})))


def test_specchat_drafter_fetches_only_the_mtp_shard(converted, hf_base, tmp_path):
    headless, _ = converted
    hf, _ = hf_base
    empty = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    with FakeHub({HF_BASE: hf}) as hub:
        env = empty | {"HF_ENDPOINT": hub.url}
        refused = run_drafter_command("--for", str(headless), "--data-dir", str(tmp_path / "data"), env=env)
        assert refused.returncode == 1, refused.stderr
        assert "--allow-downloads" in refused.stderr and hub.requested == []
        done = run_drafter_command("--for", str(headless), "--data-dir", str(tmp_path / "data"),
                                   "--allow-downloads", env=env)
    assert done.returncode == 0, done.stderr
    shard = mtp_shards(hf)
    assert hub.files(HF_BASE) == {"config.json", "model.safetensors.index.json", *shard}
    body_shards = {p.name for p in hf.glob("*.safetensors")} - set(shard)
    assert body_shards and not body_shards & hub.files(HF_BASE)
    folder = tmp_path / "data" / "drafters" / "tinyorg--Tiny-Qwen3.5-mtp-4bit-g64"
    assert done.stdout.splitlines() == [
        f"specchat drafter: {folder} (built from {HF_BASE} with only its MTP shard downloaded)",
        f"Use it: specchat --model {headless} --drafter {folder} (specchat also finds it by itself, with this "
        "data folder)",
    ]
    assert json.loads((folder / "config.json").read_text())["quantization"]["bits"] == 4


def test_specchat_drafter_from_a_named_base_in_the_hub_cache(converted, hf_base, tmp_path):
    _, split = converted
    _, cache = hf_base
    model = tmp_path / "models" / "Renamed-4bit"
    shutil.copytree(split, model)
    env = {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1"}
    done = run_drafter_command("--for", str(model), "--from", HF_BASE, "--data-dir", str(tmp_path / "data"), env=env)
    assert done.returncode == 0, done.stderr
    folder = tmp_path / "data" / "drafters" / "tinyorg--Tiny-Qwen3.5-mtp-4bit-g64"
    assert done.stdout.splitlines()[-1] == (
        f"Use it: specchat --model {model} --drafter {folder} (--drafter-from {HF_BASE} in place of --drafter "
        "finds it too)")
    bad = run_drafter_command("--for", str(model), "--from", "not a hub id", env=env)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "ORG/NAME" in bad.stderr


def test_specchat_drafter_on_a_model_with_its_own_head(tiny_model, tmp_path):
    done = run_drafter_command("--for", str(tiny_model), "--data-dir", str(tmp_path / "data"))
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"specchat drafter: {tiny_model} carries its own MTP head: specchat drafts with it as it is.\n"
    assert not (tmp_path / "data").exists()


def test_the_server_drafts_with_the_head_of_the_base_drafter_from_names(converted, hf_base, start_server, tmp_path,
                                                                        monkeypatch):
    _, split = converted
    _, cache = hf_base
    model = tmp_path / "Anonymous-4bit"
    shutil.copytree(split, model)  # names no base model, has no -mtp beside
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    server = start_server("--model", str(model), "--drafter-from", HF_BASE, data_dir=tmp_path / "data")
    engine = server.wait_ready()
    folder = tmp_path / "data" / "drafters" / "tinyorg--Tiny-Qwen3.5-mtp-4bit-g64"
    assert engine["drafter"] == f"{folder} (mtp)"
    # nothing says the drafter is missing; on a CPU the note may say what a quantized verify costs here
    assert engine["drafter_note"] == slower_note(engine["quantized_verify_ratio"])
    assert (folder / "config.json").is_file()
    assert any(f"built from {HF_BASE} from the hub cache" in line for line in server.lines)
    # While it builds, the engine's state says so (the header shows it).
    assert any(f"loading: building a drafter from the MTP head of {HF_BASE}" in line for line in server.lines)


def test_the_server_fetches_only_the_head_with_allow_downloads_and_says_how_without(converted, hf_base, start_server,
                                                                                   tmp_path, monkeypatch):
    headless, _ = converted
    hf, _ = hf_base
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))  # the original is not there
    with FakeHub({HF_BASE: hf}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)
        offline = start_server("--model", str(headless), data_dir=tmp_path / "data")
        engine = offline.wait_ready()
        offline.stop()
        assert engine["drafter"] is None and hub.requested == []
        assert engine["drafter_note"].startswith("This conversion dropped its MTP head, so specchat cannot draft")
        assert f"Its base model {HF_BASE} is not in the hub cache" in engine["drafter_note"]
        assert "start specchat with --allow-downloads" in engine["drafter_note"]
        online = start_server("--model", str(headless), "--allow-downloads", data_dir=tmp_path / "data")
        engine = online.wait_ready()
    folder = tmp_path / "data" / "drafters" / "tinyorg--Tiny-Qwen3.5-mtp-4bit-g64"
    assert engine["drafter"] == f"{folder} (mtp)"
    assert hub.files(HF_BASE) == {"config.json", "model.safetensors.index.json", *mtp_shards(hf)}


def test_the_picker_lists_the_drafter_each_headless_model_would_get(converted, hf_base, tmp_path, monkeypatch):
    from webapp.web.models import listed_models

    headless, split = converted
    hf, cache = hf_base
    models_dir = tmp_path / "models"
    models_dir.mkdir()
    for folder in (split, split.parent / "Tiny-4bit-split-mtp", headless):
        (models_dir / folder.name).symlink_to(folder)
    shutil.copytree(split, models_dir / "Anonymous-4bit")
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    found = {m["name"]: m for m in listed_models(models_dir)}
    assert found["Tiny-4bit-split"]["mtp"] is False
    assert found["Tiny-4bit-split"]["drafter"] == str(models_dir / "Tiny-4bit-split-mtp")
    assert found["Tiny-4bit"]["drafter"] == HF_BASE  # its base's head is in the hub cache
    assert found["Anonymous-4bit"]["drafter"] is None
    assert found["Tiny-4bit-split-mtp"]["drafter"] is None  # a drafter folder is no model to find one for
    assert found[HF_BASE]["mtp"] is True and found[HF_BASE]["drafter"] is None
