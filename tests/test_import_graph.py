"""No import circle among the modules of ``engines/`` and ``webapp/``.

Every import counts, wherever it stands: at module level, under ``if TYPE_CHECKING:`` and inside a function.
A deferred import only postpones the circle to the first call; the two modules still cannot be read, changed or
tested one without the other. ``from package import name`` is an edge to ``package.name`` when that is a module,
else to the package itself; importing ``a.b.c`` is not counted as importing ``a`` and ``a.b`` as well (a package's
``__init__`` runs first, but that is Python's doing, not a dependency the importing module chose).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("engines", "webapp")


def modules(root: Path, packages: tuple[str, ...]) -> dict[str, Path]:
    """Dotted module name → file, for every module of ``packages`` (a package is its ``__init__``)."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def imported(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The modules of ``known`` that the module ``name`` (at ``path``) imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[:len(base) - node.level + 1]
                source = ".".join(base + ([node.module] if node.module else []))
            else:
                source = node.module
            for alias in node.names:
                child = f"{source}.{alias.name}"
                targets.add(child if child in known else source)
    edges = set()
    for target in targets:
        while target and target not in known:  # `import a.b.name`: the deepest module named
            target = target.rpartition(".")[0]
        if target and target != name:
            edges.add(target)
    return edges


def import_graph(root: Path, packages: tuple[str, ...]) -> dict[str, set[str]]:
    known = modules(root, packages)
    return {name: imported(name, path, known) for name, path in known.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted, largest first."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(start: str) -> None:
        # Iterative, so a deep graph cannot hit the recursion limit.
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            for target in edges:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found, key=lambda component: (-len(component), component))


def loop_in(component: list[str], graph: dict[str, set[str]]) -> list[str]:
    """One closed path through the component's first module, to show how the circle runs."""
    members, start = set(component), component[0]
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for target in sorted(graph[node] & members):
            if target == start:
                return paths[node] + [start]
            if target not in paths:
                paths[target] = paths[node] + [target]
                queue.append(target)
    raise AssertionError(f"{component} is not a strongly connected component")


def describe(found: list[list[str]], graph: dict[str, set[str]]) -> str:
    return "\n".join(f"circle of {len(component)}: {' → '.join(loop_in(component, graph))}\n"
                     f"  members: {', '.join(component)}" for component in found)


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle(package):
    graph = import_graph(ROOT, PACKAGES)
    found = [component for component in circles(graph) if component[0].split(".")[0] == package]
    assert not found, "import circles:\n" + describe(found, graph)


def rooms(graph: dict[str, set[str]], package: str) -> dict[str, set[str]]:
    """``package``'s graph with each of its sub-packages drawn as one node (its modules' imports together); its
    own modules stay nodes of their own."""
    def room(name: str) -> str:
        return ".".join(name.split(".")[:2])

    drawn: dict[str, set[str]] = {}
    for name, targets in graph.items():
        if name.split(".")[0] == package:
            drawn.setdefault(room(name), set()).update(
                room(t) for t in targets if t.split(".")[0] == package and room(t) != room(name))
    return drawn


def test_no_circle_between_the_rooms_of_webapp():
    """webapp's sub-packages stand in layers (web over hosting over measurement over conversations): a module
    that reaches up a layer makes a circle here even where no two modules import each other."""
    graph = rooms(import_graph(ROOT, PACKAGES), "webapp")
    found = circles(graph)
    assert not found, "import circles between sub-packages:\n" + describe(found, graph)


def write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def test_a_circle_through_a_function_level_or_type_checking_import_is_found(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/a.py": "from .sub import b\n",
        "pkg/sub/__init__.py": "",
        "pkg/sub/b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..c import Thing\n",
        "pkg/c.py": "def f():\n    import pkg.a\n",
        "pkg/d.py": "from pkg import a\n",  # into the circle, not part of it
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert circles(graph) == [["pkg.a", "pkg.c", "pkg.sub.b"]]
    assert describe(circles(graph), graph).startswith("circle of 3: pkg.a → pkg.sub.b → pkg.c → pkg.a")


def test_modules_that_import_one_way_make_no_circle(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "from .a import x\n",
        "pkg/a.py": "from . import b\nfrom .b import y\n",
        "pkg/b.py": "import os\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert graph == {"pkg": {"pkg.a"}, "pkg.a": {"pkg.b"}, "pkg.b": set()}
    assert circles(graph) == []


def test_sub_packages_that_reach_up_a_layer_make_a_circle(tmp_path):
    write(tmp_path, {
        "pkg/__init__.py": "",
        "pkg/low/__init__.py": "",
        "pkg/low/a.py": "from ..high.c import x\n",
        "pkg/low/b.py": "",
        "pkg/high/__init__.py": "",
        "pkg/high/c.py": "from ..low.b import y\n",
    })
    graph = import_graph(tmp_path, ("pkg",))
    assert circles(graph) == []
    assert circles(rooms(graph, "pkg")) == [["pkg.high", "pkg.low"]]
