"""Writing a checkpoint replaces only a checkpoint made here: a mistyped output folder is left alone."""

import pytest

from demo_model.checkpoint_files import MADE_FILES, fresh_folder
from demo_model.tiny import build_tiny_checkpoint


def test_a_folder_that_is_not_a_checkpoint_is_refused_and_kept(tmp_path):
    (tmp_path / "notes.txt").write_text("mine")
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=r"not a checkpoint made here \(it holds notes.txt\)"):
        build_tiny_checkpoint(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "notes.txt"]
    (tmp_path / "notes.txt").unlink()
    (tmp_path / "data").mkdir()
    with pytest.raises(ValueError, match="it holds data"):
        fresh_folder(tmp_path)


def test_a_rig_that_sees_is_replaced_too(tmp_path):
    from demo_model.rig import build_rig

    shape = {"hidden": 64, "layers": 4, "intermediate": 128, "vocab": 1024}
    out = build_rig(tmp_path / "rig", vision=True, **shape)
    assert {p.name for p in out.iterdir()} == MADE_FILES
    assert build_rig(out, **shape) == out and not (out / "preprocessor_config.json").exists()


def test_a_checkpoint_made_here_is_replaced_keeping_what_is_asked(tmp_path):
    out = build_tiny_checkpoint(tmp_path / "tiny")
    assert {p.name for p in out.iterdir()} == MADE_FILES - {"preprocessor_config.json"}  # only a rig that sees
    (out / "examples.json").write_text("[]")
    fresh_folder(out, keep=("examples.json",))
    assert [p.name for p in out.iterdir()] == ["examples.json"]
    with pytest.raises(ValueError, match="it holds examples.json"):
        fresh_folder(out)  # not kept unless asked
    assert fresh_folder(tmp_path / "new" / "folder").is_dir()
    with pytest.raises(ValueError, match="is a file"):
        fresh_folder(out / "examples.json")
