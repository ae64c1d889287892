"""The package's shape: no import cycle between its modules, kernel modules registered by ops/__init__.py
(never by a bottom-of-file import), no empty module, and the module-size budget (DESIGN.md: ~600 lines)."""

from __future__ import annotations

import ast
import pathlib

import pytest

import stdops

ROOT = pathlib.Path(stdops.__file__).parent
BUDGET = 600
#: modules over the budget, each with the size it may not exceed until it is split (none today); a module that
#: drops under the budget must leave this list
OVER_BUDGET: dict[str, int] = {}


def _modules() -> dict[str, pathlib.Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_package(name: str) -> bool:
    return MODULES[name].name == "__init__.py"


def _module_imports(name: str) -> set[str]:
    """The stdops modules ``name`` imports when it is imported (module level, outside TYPE_CHECKING)."""
    tree = ast.parse(MODULES[name].read_text())
    package = name if _is_package(name) else name.rpartition(".")[0]
    found: set[str] = set()

    def add(target: str) -> None:
        while target and target not in MODULES:  # an attribute of a module: the module
            target = target.rpartition(".")[0]
        if target:
            found.add(target)
            parent = target.rpartition(".")[0]
            while parent:  # importing a submodule imports its packages
                found.add(parent)
                parent = parent.rpartition(".")[0]

    def visit(body) -> None:
        for node in body:
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                continue
            if isinstance(node, (ast.If, ast.Try, ast.With)):
                for part in ("body", "orelse", "finalbody", "handlers"):
                    for sub in getattr(node, part, []) or []:
                        visit(sub.body if isinstance(sub, ast.ExceptHandler) else [sub])
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.name.startswith("stdops"):
                        add(a.name)
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                if not mod.startswith("stdops"):
                    continue
                add(mod)
                for a in node.names:
                    if f"{mod}.{a.name}" in MODULES:
                        add(f"{mod}.{a.name}")

    visit(tree.body)
    found.discard(name)
    return found


GRAPH = {m: _module_imports(m) for m in MODULES}


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def strong(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in GRAPH[v]:
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(GRAPH):
        if v not in index:
            strong(v)
    return out


def _cycle_free(graph: dict[str, set[str]]) -> bool:
    global GRAPH
    saved, GRAPH = GRAPH, graph
    try:
        return not _cycles()
    finally:
        GRAPH = saved


def test_no_import_cycle():
    # a package importing its own submodules (stdops.ops -> stdops.ops.conv -> stdops.ops) is how Python
    # packages work; the edge from a submodule back up to its package is not a cycle of ours
    def upward(m: str, t: str) -> bool:
        return m.startswith(t + ".")

    graph = {m: {t for t in ts if not upward(m, t)} for m, ts in GRAPH.items()}
    saved = dict(GRAPH)
    GRAPH.clear()
    GRAPH.update(graph)
    try:
        cycles = _cycles()
    finally:
        GRAPH.clear()
        GRAPH.update(saved)
    assert not cycles, f"import cycles: {cycles}"


def test_the_walk_sees_a_cycle():
    """The check can fail: a made-up pair of modules importing each other is reported."""
    assert _cycle_free({"a": {"b"}, "b": set()})
    assert not _cycle_free({"a": {"b"}, "b": {"a"}})


def test_every_kernel_module_is_listed_in_ops_init():
    listed = {t for t in GRAPH["stdops.ops"] if t.startswith("stdops.ops.")}
    kernel_modules = {
        m
        for m, path in MODULES.items()
        if m.startswith("stdops.ops.") and "@op(" in path.read_text() and not m.split(".")[-1].startswith("_")
    }
    top = {".".join(m.split(".")[:3]) for m in kernel_modules}  # cognitive.* through stdops.ops.cognitive
    assert top <= listed, f"kernel modules not listed in stdops/ops/__init__.py: {sorted(top - listed)}"


def test_no_module_registers_another_at_its_bottom():
    """An import after the first definition of a module (the old way to register a sibling) is refused."""
    offenders = []
    for m, path in MODULES.items():
        tree = ast.parse(path.read_text())
        seen_def = False
        for node in tree.body:
            if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
                seen_def = True
            elif seen_def and isinstance(node, (ast.Import, ast.ImportFrom)):
                offenders.append(f"{m} line {node.lineno}")
    assert not offenders, f"imports after the module's definitions: {offenders}"


def test_no_empty_module():
    empty = []
    for m, path in MODULES.items():
        tree = ast.parse(path.read_text())
        body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
        body = [n for n in body if not (isinstance(n, ast.ImportFrom) and n.module == "__future__")]
        if not body and path.name != "__init__.py":
            empty.append(m)
    assert not empty, f"modules with nothing in them: {empty}"


@pytest.mark.parametrize("name", sorted(MODULES))
def test_module_size_budget(name):
    path = MODULES[name]
    rel = str(path.relative_to(ROOT.parent))
    n = len(path.read_text().splitlines())
    ceiling = OVER_BUDGET.get(rel)
    if ceiling is None:
        assert n <= BUDGET, f"{rel}: {n} lines, over the {BUDGET}-line budget: split it by family"
    else:
        assert n > BUDGET, f"{rel}: {n} lines, within the budget again: take it off OVER_BUDGET"
        assert n <= ceiling, f"{rel}: {n} lines, grew past its ceiling of {ceiling}: split it, do not grow it"


def test_over_budget_list_names_real_modules():
    paths = {str(p.relative_to(ROOT.parent)) for p in MODULES.values()}
    assert set(OVER_BUDGET) <= paths, sorted(set(OVER_BUDGET) - paths)
