"""The house's rules, read off the source: theory never imports experiments or plots, experiments never import plots,
and no two top-level parts of the package import each other (directly or round a longer cycle).

Every import counts, module level or inside a function (a lazy import is still a dependency), relative ones
resolved; the package root's __init__ (which re-exports the public names) is not a part.
"""

from __future__ import annotations

import ast
from functools import lru_cache
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
ROOT = "attnphase"
FORBIDDEN = {("theory", "experiments"), ("experiments", "plots"), ("theory", "plots")}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of every attnphase module or package the file imports."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            out.add(target)
            # `from attnphase import theory` imports the subpackage
            out.update(f"{target}.{a.name}" for a in node.names)
    return {m for m in out if m == ROOT or m.startswith(ROOT + ".")}


def _part(module: str) -> str | None:
    """The top-level part of attnphase a module belongs to (a subpackage or a top-level module)."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def _existing_part(module: str, parts: set[str]) -> str | None:
    p = _part(module)
    return p if p in parts else None


@lru_cache(maxsize=1)
def _graph() -> tuple[dict[str, set[str]], dict[tuple[str, str], list[str]]]:
    files = sorted((SRC / ROOT).rglob("*.py"))
    parts = {_part(_module_name(f)) for f in files} - {None}
    edges: dict[str, set[str]] = {p: set() for p in parts}
    where: dict[tuple[str, str], list[str]] = {}
    for f in files:
        src = _part(_module_name(f))
        if src is None:
            continue  # the package root re-exports; it is not a part
        for m in _imports(f):
            dst = _existing_part(m, parts)
            if dst is not None and dst != src:
                edges[src].add(dst)
                where.setdefault((src, dst), []).append(f"{_module_name(f)} -> {m}")
    return edges, where


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one part (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
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

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_walk_sees_the_package():
    edges, where = _graph()
    assert {"theory", "experiments", "plots", "cli", "setting", "problem"} <= set(edges)
    # a dependency every reader knows is there: the CLI runs the theory
    assert "theory" in edges["cli"] and where[("cli", "theory")]


@pytest.mark.parametrize("src,dst", sorted(FORBIDDEN))
def test_forbidden_imports(src, dst):
    _, where = _graph()
    assert not where.get((src, dst)), f"{src} must not import {dst}: " + "; ".join(where[(src, dst)])


def test_no_import_cycle_between_parts():
    edges, where = _graph()
    cycles = _cycles(edges)
    detail = ["; ".join(f"{a} -> {b}: {where[(a, b)][0]}" for a in c for b in c if (a, b) in where) for c in cycles]
    assert not cycles, f"import cycles between parts of attnphase: {cycles} ({' | '.join(detail)})"


def test_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
