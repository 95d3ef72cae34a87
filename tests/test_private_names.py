"""No test reaches a private name of specchat or of mlx-vlm, except the seam's own tests: a test that does would
pin how a module is built inside, not what it does, and break on every rework that keeps the behaviour.

A private name is one that starts with an underscore (not a dunder): imported (``from webapp.x import _y``, or from a
module whose path has a private part) or read off an imported module (``module._y``). The seam's tests check
mlx-vlm's internals by name on purpose (docs/architecture.md, "Dependency seams and pins").
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OURS = ("webapp", "engines", "demo_model", "training", "benchmarks")
CHECKED = (*OURS, "mlx_vlm")
SEAM_TESTS = {"test_seam.py", "test_seam_parts.py", "test_dependency_internals.py"}


def _private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def _is_module(dotted: str) -> bool:
    root = dotted.split(".")[0]
    if root in OURS:
        path = ROOT.joinpath(*dotted.split("."))
        return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()
    try:
        return importlib.util.find_spec(dotted) is not None
    except (ImportError, ValueError):
        return False


def _absolute(node: ast.ImportFrom, package: str | None) -> str | None:
    """The module a ``from ... import`` names; a relative one only where the importing package is known."""
    if not node.level:
        return node.module
    if package is None:
        return None
    parts = package.split(".")
    parts = parts[:len(parts) - node.level + 1]
    return ".".join([*parts, node.module] if node.module else parts)


def private_names(source: str, package: str | None = None) -> list[tuple[int, str]]:
    """(line, what) for each private name of a checked package that ``source`` (a module of ``package``, for its
    relative imports) imports or reads off a module."""
    tree = ast.parse(source)
    found, modules = [], {}
    for node in ast.walk(tree):
        module = _absolute(node, package) if isinstance(node, ast.ImportFrom) else None
        if module and module.split(".")[0] in CHECKED:
            if any(_private(part) for part in module.split(".")):
                found.append((node.lineno, module))
            for alias in node.names:
                dotted = f"{module}.{alias.name}"
                if _private(alias.name):
                    found.append((node.lineno, dotted))
                elif _is_module(dotted):
                    modules[alias.asname or alias.name] = dotted
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] in CHECKED:
                    if any(_private(part) for part in alias.name.split(".")):
                        found.append((node.lineno, alias.name))
                    top = alias.name.split(".")[0]  # `import a.b` binds a; `import a.b as c` binds c to a.b
                    modules[alias.asname or top] = alias.name if alias.asname else top
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and _private(node.attr) and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            found.append((node.lineno, f"{modules[node.value.id]}.{node.attr}"))
    return sorted(found)


def test_no_test_reaches_a_private_name_of_specchat_or_mlx_vlm():
    reached = [f"{path.relative_to(ROOT)}:{line}: {what}" for path in sorted((ROOT / "tests").rglob("*.py"))
               if path.name not in SEAM_TESTS for line, what in private_names(path.read_text())]
    assert not reached, "private names reached from tests (test what the module does, through its public names):\n" \
        + "\n".join(reached)


def test_the_lab_and_the_benchmarks_reach_no_other_modules_private_name():
    """The evaluation and the tools corpus build on the corpus through its public names, and each benchmark on the
    others': a helper kept private can then change without breaking a caller elsewhere."""
    reached = [f"{path.relative_to(ROOT)}:{line}: {what}" for folder in ("training", "benchmarks")
               for path in sorted((ROOT / folder).rglob("*.py"))
               for line, what in private_names(path.read_text(), ".".join(path.parent.relative_to(ROOT).parts))]
    assert not reached, "private names reached across modules (make the name public):\n" + "\n".join(reached)


def test_the_check_finds_each_way_of_reaching_one():
    source = '''
from webapp.tools.mcp_client import _leaf, McpServers
from engines.mlx import _hidden_module
from mlx_vlm.tools import _infer_tool_parser_from_processor
from webapp.tools import mcp_client
import engines.mlx.library as library
import mlx_vlm
mcp_client._Connection
library._cache
mlx_vlm._private
McpServers._connections
mcp_client.__name__
'''
    assert private_names("from . import corpus\nfrom .corpus import _style\ncorpus._kind_of", "training") == [
        (2, "training.corpus._style"), (3, "training.corpus._kind_of")]
    assert private_names(source) == [
        (2, "webapp.tools.mcp_client._leaf"), (3, "engines.mlx._hidden_module"),
        (4, "mlx_vlm.tools._infer_tool_parser_from_processor"), (8, "webapp.tools.mcp_client._Connection"),
        (9, "engines.mlx.library._cache"), (10, "mlx_vlm._private")]
