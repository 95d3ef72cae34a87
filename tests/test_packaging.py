"""specchat as users install it: the sdist and the wheel that ``python -m build`` makes carry the page (scripts,
styles, vendored libraries, templates) and the demo model, and the installed ``specchat`` serves them."""

import shutil
import subprocess
import sys
import sysconfig
import tarfile
import zipfile
from pathlib import Path

import pytest
import requests

from tests.support.harness import ServerProcess
from webapp import ROOT

pytestmark = pytest.mark.slow


def page_files() -> set[str]:
    return {str(p.relative_to(ROOT)) for folder in ("static", "templates") for p in (ROOT / folder).rglob("*")
            if p.is_file()}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, Path]:
    """(sdist, wheel): the wheel built from the sdist, as ``python -m build`` does."""
    out = tmp_path_factory.mktemp("dist")
    done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return next(out.glob("specchat-*.tar.gz")), next(out.glob("specchat-*.whl"))


def test_the_sdist_and_the_wheel_carry_the_page_and_the_demo_model(built):
    sdist, wheel = built
    with tarfile.open(sdist) as archive:
        in_sdist = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    with zipfile.ZipFile(wheel) as archive:
        in_wheel = set(archive.namelist())
    expected = page_files()
    assert expected and "templates/chat.html" in expected and "static/js/main.js" in expected
    assert expected <= in_sdist
    assert {"webapp/" + name for name in expected} <= in_wheel
    model = {p.name for p in (ROOT / "demo_model" / "specchat-demo").iterdir()}
    assert {"demo_model/specchat-demo/" + name for name in model} <= in_wheel
    assert "demo_model/specchat-demo/model.safetensors" in in_wheel
    # The training lab is not part of what runs: neither archive carries it.
    assert not [name for name in in_wheel | in_sdist if name.startswith("training/") or "corpus.py" in name]
    assert "engines/mlx/cuda/skinny.py" in in_wheel


def test_a_wheel_built_in_a_working_tree_carries_nothing_an_older_build_left(tmp_path):
    """``pip install .``, ``pipx install .`` and ``uv tool install .`` build the wheel in the working tree, where
    a build folder from an older layout may still hold modules that have moved out (here the lab's corpus)."""
    tree = tmp_path / "tree"
    for folder in ("webapp", "engines", "demo_model", "static", "templates"):
        shutil.copytree(ROOT / folder, tree / folder, ignore=shutil.ignore_patterns("__pycache__"))
    for name in ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md"):
        shutil.copy(ROOT / name, tree / name)
    stale = tree / "build" / "lib" / "demo_model" / "corpus.py"
    stale.parent.mkdir(parents=True)
    stale.write_text("LEFT_BY_AN_OLDER_BUILD = True\n")
    out = tmp_path / "dist"
    done = subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
                           str(tree)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    with zipfile.ZipFile(next(out.glob("specchat-*.whl"))) as wheel:
        names = set(wheel.namelist())
    assert "webapp/templates/chat.html" in names and "demo_model/__init__.py" in names
    assert "demo_model/corpus.py" not in names


def test_the_installed_wheel_serves_the_page_on_the_demo_model(built, tmp_path):
    _, wheel = built
    fresh = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(fresh)], check=True, timeout=120)
    python = fresh / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index",
                    str(wheel)], check=True, timeout=300)
    # specchat's dependencies come from the test environment's site-packages; specchat itself only from the wheel.
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                          capture_output=True, text=True, check=True).stdout.strip()
    Path(site, "dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    where = subprocess.run([str(python), "-c", "import webapp; print(webapp.__file__)"], cwd=tmp_path,
                           capture_output=True, text=True, check=True).stdout.strip()
    assert where.startswith(site), where
    server = ServerProcess([], tmp_path / "data", command=[str(fresh / "bin" / "specchat")], cwd=tmp_path)
    try:
        engine = server.wait_ready()
        assert engine["model"].endswith("specchat-demo") and engine["model"].startswith(site)
        page = requests.get(server.url + "/", timeout=10)
        assert page.status_code == 200 and "<title>specchat</title>" in page.text
        script = next(part.split('"')[0] for part in page.text.split('src="')[1:] if ".js" in part.split('"')[0])
        served = requests.get(server.url + script, timeout=10)
        assert served.status_code == 200 and "javascript" in served.headers["Content-Type"]
        assert served.content == (ROOT / script.split("?")[0].lstrip("/")).read_bytes()
    finally:
        server.stop()
