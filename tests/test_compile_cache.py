"""MLX's run-time compiled GPU kernels are kept in the user's cache folder across starts, unless the user chose
a folder (engines/mlx/compile_cache.py)."""

import os

from engines.mlx.compile_cache import VARIABLE, keep_compiled_kernels
from engines.mlx.loading import load_model


def test_loading_a_model_points_the_kernel_cache_at_the_users_cache_folder(tiny_model, tmp_path, monkeypatch):
    import mlx.core as mx

    monkeypatch.delenv(VARIABLE, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    load_model(str(tiny_model))
    folder = os.environ[VARIABLE]
    assert folder.startswith(str(tmp_path / "specchat" / "mlx-kernels" / f"mlx-{mx.__version__}-"))
    assert " " not in os.path.basename(folder)  # the device's name, made a plain folder name


def test_a_folder_the_user_chose_is_kept(tmp_path, monkeypatch):
    monkeypatch.setenv(VARIABLE, str(tmp_path / "mine"))
    assert keep_compiled_kernels() == str(tmp_path / "mine") == os.environ[VARIABLE]
