"""The package's shape: one direction of flow between the pipeline's stages, no import circles.

Stages, in order: ontology, query, rewrite, mapping, analysis, execution (plus the shared ``model``
types and ``errors``).  A stage never imports a later one at module level; no module imports itself
through others (a circle makes the import order decide what exists)."""

from __future__ import annotations

import ast
from pathlib import Path

OBDA = Path(__file__).resolve().parents[1] / "obda"
STAGES = ("ontology", "query", "rewrite", "mapping", "analysis", "execution")


def _modules() -> dict[str, set[str]]:
    files = {}
    for p in OBDA.rglob("*.py"):
        parts = p.relative_to(OBDA.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        files[name] = p
    graph = {}
    for name, p in files.items():
        deps = set()
        for node in ast.parse(p.read_text(encoding="utf-8")).body:  # module level only (not lazy imports)
            if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("obda"):
                subs = [f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in files]
                deps.update(subs)
                if len(subs) < len(node.names):
                    deps.add(node.module)
            elif isinstance(node, ast.Import):
                deps.update(a.name for a in node.names if a.name.startswith("obda"))
        graph[name] = {d for d in deps if d in files and d != name}
    return graph


def _reach(graph, start: str) -> set[str]:
    seen, todo = set(), [start]
    while todo:
        for d in graph.get(todo.pop(), ()):
            if d not in seen:
                seen.add(d)
                todo.append(d)
    return seen


def test_no_module_imports_itself_through_others():
    graph = _modules()
    circles = sorted(m for m in graph if m in _reach(graph, m))
    assert not circles, f"import circles through: {circles}"


def test_a_stage_never_imports_a_later_one():
    graph = _modules()
    bad = []
    for m, deps in graph.items():
        parts = m.split(".")
        if len(parts) < 2 or parts[1] not in STAGES:
            continue
        for d in deps:
            dp = d.split(".")
            if len(dp) > 1 and dp[1] in STAGES and STAGES.index(dp[1]) > STAGES.index(parts[1]):
                bad.append(f"{m} -> {d}")
    assert not bad, bad


def test_the_executor_imports_only_the_analysis_types():
    """The analysis hands the executor one ExecutionPlan: ``obda.execution`` imports classes from
    ``obda.analysis`` (the plan's types), never a function that parses or analyses."""
    found = []
    for p in (OBDA / "execution").rglob("*.py"):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):  # lazy imports too
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("obda.analysis"):
                found += [f"{p.name}: {node.module}.{a.name}" for a in node.names if not a.name[:1].isupper()]
            elif isinstance(node, ast.ImportFrom) and node.module == "obda" and any(a.name == "analysis" for a in node.names):
                found.append(f"{p.name}: obda.analysis")
    assert not found, found
