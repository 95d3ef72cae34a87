"""The one seam for mlx-vlm (engines/mlx/qwen35.py, and library.py for the functions it calls): every internal it
reads resolves on the pinned release, and when one does not, or the own loop computes something else, the engine
runs mlx-vlm's own loop and says why instead of failing to load."""

from importlib.metadata import version

import pytest

from engines import Delta, Done, GenerationOptions, Message, Turn, guarded
from engines.mlx import library, qwen35

GREEDY = dict(reasoning_budget=0, max_tokens=24, temperature=0.0)


def test_the_pin_is_the_release_the_seam_was_read_from():
    assert version("mlx-vlm") == qwen35.READ_FROM, (
        f"mlx-vlm {version('mlx-vlm')} is installed, but engines/mlx/qwen35.py reads internals of "
        f"{qwen35.READ_FROM}: re-check each name there and update READ_FROM and the pin in pyproject.toml")


@pytest.mark.parametrize("module, name", library.FUNCTIONS, ids=lambda v: v)
def test_every_function_the_own_loop_calls_resolves(module, name):
    assert callable(library.function(module, name)), f"{module}.{name} is not callable in this mlx-vlm"


def test_every_member_the_own_loop_reads_is_on_a_real_model(tiny_model):
    from mlx_vlm import load
    from mlx_vlm.speculative.drafters import load_drafter

    model, _ = load(str(tiny_model))
    drafter, _ = load_drafter(str(tiny_model), kind="mtp")
    qwen35.check_members(model, drafter)  # raises Unavailable naming each missing member


def test_a_missing_member_is_named():
    class Bare:
        pass

    with pytest.raises(qwen35.Unavailable, match="the language model has no args, model"):
        qwen35.check_members(Bare())
    with pytest.raises(library.Unavailable, match=r"mlx_vlm\.models\.activations\.gone_in_a_later_release is gone"):
        library.function("mlx_vlm.models.activations", "gone_in_a_later_release")


def _loaded(tiny_model):
    from engines.mlx.engine import MlxEngine

    engine = MlxEngine(str(tiny_model))
    engine.load(GenerationOptions())
    return engine


def _reply(engine, conversation, **options):
    turn = Turn(id=conversation, conversation_id=conversation, messages=[Message("user", "count to ten")],
                options=GenerationOptions(**GREEDY, **options))
    events = list(guarded(engine.stream(turn)))
    terminal = [e for e in events if isinstance(e, Done)]
    assert len(terminal) == 1 and events[-1] is terminal[0], events[-3:]
    assert terminal[0].finish_reason in ("stop", "length"), terminal[0]
    return "".join(e.text for e in events if isinstance(e, Delta)), terminal[0].stats


@pytest.mark.parametrize("break_it, reason", [
    (lambda mp: mp.setattr(library, "FUNCTIONS", library.FUNCTIONS + (("mlx_vlm.models.activations", "renamed"),)),
     "mlx_vlm.models.activations.renamed is gone"),
    (lambda mp: mp.setattr(qwen35, "LINEAR_ATTENTION", qwen35.LINEAR_ATTENTION + ("renamed_member",)),
     "linear attention has no renamed_member"),
    (lambda mp: mp.setattr(qwen35, "CHECK_TOLERANCE", -1.0), "the own loop's forward differs from mlx-vlm's"),
], ids=["function", "member", "forward"])
def test_a_broken_internal_falls_back_to_mlx_vlms_loop_and_says_why(tiny_model, monkeypatch, break_it, reason):
    break_it(monkeypatch)
    engine = _loaded(tiny_model)
    try:
        info = engine.info()
        assert info.state == "ready"
        expected = f"own loop unavailable with mlx-vlm {version('mlx-vlm')}: "
        assert info.decode_loop_reason.startswith(expected) and reason in info.decode_loop_reason
        assert "using mlx-vlm's loop" in info.drafter_note
        text, stats = _reply(engine, "fallback", decode_loop="specchat", speculative=True)
        assert text and stats["decode_loop"] == "mlx-vlm"
        assert reason in stats["decode_loop_reason"]
    finally:
        engine.unload()


def test_building_the_own_loop_leaves_mlx_vlms_loop_as_it_was(tiny_model, monkeypatch):
    """mlx-vlm's loop on a model the own loop was built on gives what it gives on a model it never touched."""
    engine = _loaded(tiny_model)
    try:
        assert engine.info().decode_loop_reason is None
        built = [_reply(engine, f"built-{s}", decode_loop="mlx-vlm", speculative=s)[0] for s in (False, True)]
    finally:
        engine.unload()
    monkeypatch.setattr(qwen35, "CHECK_TOLERANCE", -1.0)  # the own loop is never built on this one
    engine = _loaded(tiny_model)
    try:
        assert engine.info().decode_loop_reason is not None
        untouched = [_reply(engine, f"plain-{s}", decode_loop="mlx-vlm", speculative=s)[0] for s in (False, True)]
    finally:
        engine.unload()
    assert built == untouched


def _imports_mlx_vlm(path) -> bool:
    """An import statement of mlx-vlm, or (the seam's library) its modules resolved by name."""
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "mlx_vlm" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mlx_vlm":
            return True
        if isinstance(node, ast.ImportFrom) and node.module == "importlib" and any(a.name == "import_module"
                                                                                   for a in node.names):
            return "mlx_vlm." in path.read_text()
    return False


def test_every_module_that_imports_mlx_vlm_is_named_in_the_docs_with_why():
    """docs/architecture.md's "Who imports mlx-vlm" names every module outside tests that imports it, and no other."""
    import re

    from webapp import ROOT

    docs = (ROOT / "docs" / "architecture.md").read_text()
    table = docs.split("### Who imports mlx-vlm", 1)[1].split("\n\n", 2)[2].split("\n\n", 1)[0]
    documented = set(re.findall(r"^\| `([^`]+\.py)` \|", table, flags=re.MULTILINE))
    found = {str(path.relative_to(ROOT)) for folder in ("webapp", "engines", "demo_model", "training", "benchmarks")
             for path in (ROOT / folder).rglob("*.py") if _imports_mlx_vlm(path)}
    assert documented == found, (f"importing mlx-vlm, not in docs/architecture.md: {sorted(found - documented)}; "
                                 f"in its table, importing none: {sorted(documented - found)}")


def _mlx_vlm_names(path) -> set[tuple[str, str]]:
    """(module below mlx_vlm, name) for each name the module imports from mlx-vlm; for ``import mlx_vlm`` each
    attribute it reads off the package."""
    import ast

    tree = ast.parse(path.read_text())
    names, bare = set(), False
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "mlx_vlm":
            module = node.module.removeprefix("mlx_vlm").lstrip(".")
            names.update((module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import) and any(a.name == "mlx_vlm" for a in node.names):
            bare = True
    if bare:
        names.update(("", node.attr) for node in ast.walk(tree) if isinstance(node, ast.Attribute)
                     and isinstance(node.value, ast.Name) and node.value.id == "mlx_vlm")
    return names


def test_every_name_imported_from_mlx_vlm_is_in_its_modules_row():
    """Each row of "Who imports mlx-vlm" names what its module imports: the name, its module (below ``mlx_vlm``)
    or both as ``module.name``. The seam's library resolves its functions by name and lists them in FUNCTIONS."""
    import re

    from webapp import ROOT

    docs = (ROOT / "docs" / "architecture.md").read_text()
    table = docs.split("### Who imports mlx-vlm", 1)[1].split("\n\n", 2)[2].split("\n\n", 1)[0]
    rows = dict(re.findall(r"^\| `([^`]+\.py)` \| (.*?) \|", table, flags=re.MULTILINE))
    missing = []
    for module, cell in rows.items():
        named = set(re.findall(r"`([^`]+)`", cell))
        for below, name in _mlx_vlm_names(ROOT / module):
            if not named & {name, below, f"{below}.{name}"}:
                missing.append(f"{module}: {'.'.join(filter(None, ('mlx_vlm', below, name)))}")
    assert not missing, f"imported from mlx-vlm, not named in docs/architecture.md's row: {missing}"
