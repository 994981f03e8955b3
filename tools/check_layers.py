"""Checks the code's shape: no include or import circles, the C layers calling only down,
no source file over the line limit, a comment at the top of every file saying its job. ``python tools/check_layers.py`` prints what it finds
and exits 1 if anything is wrong; tests/python/test_layers.py runs it.

C: a file depends on a module when it includes that module's header. A module is a header
with the .c files that include it first (their own header, by convention: gemm/pack.c and
gemm/gemm.c both implement gemm.h), its ISA variants (name.avx2.c) and its internal header
(name_impl.h, name_internal.h); circles are looked for among modules and among folders. The layers, lowest first, are listed in LAYERS: a folder may include
its own layer and those below it, never one above (so the kernels never see the op table,
and the core IR never calls up into it).

Python: ``torchair`` modules import each other; circles among them are reported
(imports inside functions count too: they are circles all the same, only deferred).
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
MAX_LINES = 700

# Lowest first. A folder may include headers of its own layer or any layer below.
LAYERS: list[tuple[str, ...]] = [
    ("air",),  # include/air: the public header
    ("core",),
    ("runtime/pool",),  # the thread pool that kernels split work over
    ("kernels",),
    ("ops",),
    ("passes", "plan"),
    ("runtime", "format"),
    ("python",),
]

_INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def _layer_of(rel: str) -> int | None:
    """Layer index of a path relative to src/ (or include/), most specific prefix first."""
    best, best_len = None, -1
    for i, names in enumerate(LAYERS):
        for n in names:
            if (rel == n or rel.startswith(n + "/") or rel.startswith(n + ".")) and len(n) > best_len:
                best, best_len = i, len(n)
    return best


def _c_files() -> list[Path]:
    out = []
    for top in ("src", "include"):
        out += sorted((REPO / top).rglob("*.[ch]"))
    return out


_ISA_SUFFIX = re.compile(r"\.(avx2|avx512|amx)$")
_PART_SUFFIX = re.compile(r"_(impl|internal)$")


def _module(rel: str) -> str:
    """A module is a .c and its .h; a module's ISA variants (name.avx2.c) and its internal
    header (name_impl.h, name_internal.h: what its own files share) belong to it."""
    base = rel[:-2] if rel.endswith((".c", ".h")) else rel
    return _PART_SUFFIX.sub("", _ISA_SUFFIX.sub("", base))


def _resolve(inc: str, src: Path) -> str | None:
    """The include's path relative to src/ (or 'air/...' for the public header)."""
    for base in (REPO / "src", REPO / "include", src.parent):
        p = (base / inc).resolve()
        if p.is_file():
            try:
                return str(p.relative_to(REPO / "src"))
            except ValueError:
                return str(p.relative_to(REPO / "include"))
    return None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one node (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    nodes = sorted(set(graph) | {d for ds in graph.values() for d in ds})
    for root in nodes:
        if root in index:
            continue
        work = [(root, iter(sorted(graph.get(root, ()))))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    comp.append(x)
                    if x == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def check_c() -> list[str]:
    problems: list[str] = []
    modules: dict[str, set[str]] = defaultdict(set)
    folders: dict[str, set[str]] = defaultdict(set)
    for f in _c_files():
        rel_top = f.relative_to(REPO)
        rel = str(f.relative_to(REPO / rel_top.parts[0]))
        includes = _INCLUDE.findall(f.read_text(errors="replace"))
        me = _module(rel)
        if rel.endswith(".c") and includes:
            # A .c file implements the interface it includes first (its own header, by the
            # project's convention): gemm/pack.c is part of module gemm, as gemm/gemm.c is.
            first = _resolve(includes[0], f)
            if first is not None and Path(first).parent == Path(rel).parent:
                me = _module(first)
        my_layer = _layer_of(rel)
        for inc in includes:
            target = _resolve(inc, f)
            if target is None:
                continue
            dep = _module(target)
            if dep != me:
                modules[me].add(dep)
            fa, fb = str(Path(rel).parent), str(Path(target).parent)
            if fa != fb and not fb.startswith(fa + "/") and not fa.startswith(fb + "/"):
                folders[fa].add(fb)
            their_layer = _layer_of(target)
            if my_layer is not None and their_layer is not None and their_layer > my_layer:
                problems.append(f"layer: {rel_top} includes {inc} (a layer above it)")
    for comp in _cycles(modules):
        problems.append("include circle among modules: " + " <-> ".join(comp))
    for comp in _cycles(folders):
        problems.append("include circle among folders: " + " <-> ".join(comp))
    return problems


def check_python() -> list[str]:
    pkg = REPO / "python" / "torchair"
    graph: dict[str, set[str]] = defaultdict(set)
    for f in sorted(pkg.rglob("*.py")):
        rel = f.relative_to(pkg.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        me = ".".join(parts)
        package = me if f.name == "__init__.py" else ".".join(parts[:-1])
        tree = ast.parse(f.read_text(), str(f))
        for node in ast.walk(tree):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - (node.level - 1)]
                    mod = ".".join(base + ([node.module] if node.module else []))
                else:
                    mod = node.module or ""
                names = [mod] + [f"{mod}.{a.name}" for a in node.names]
            for n in names:
                if n.startswith("torchair"):
                    target = n
                    # importing a name from a module depends on the module, not the name
                    while target and not _is_module(pkg.parent, target):
                        target = target.rpartition(".")[0]
                    if target and target != me and target != "torchair":
                        graph[me].add(target)
    return ["import circle: " + " <-> ".join(c) for c in _cycles(graph)]


def _is_module(root: Path, dotted: str) -> bool:
    p = root.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def check_sizes() -> list[str]:
    out = []
    for top in ("src", "python", "include", "tools"):
        for f in sorted((REPO / top).rglob("*")):
            if f.suffix in (".c", ".h", ".py") and f.is_file():
                n = sum(1 for _ in f.open(errors="replace"))
                if n > MAX_LINES:
                    out.append(f"size: {f.relative_to(REPO)} has {n} lines (limit {MAX_LINES})")
    return out


def check_top_comments() -> list[str]:
    """Every C file opens with ``/* <its name> - <its job> */``; every Python module of the
    package with a docstring."""
    out = []
    for f in sorted(list((REPO / "src").rglob("*.[ch]")) + list((REPO / "include").rglob("*.h"))):
        first = f.read_text(errors="replace").split("\n", 1)[0]
        if not first.startswith(f"/* {f.name} - "):
            out.append(f"top comment: {f.relative_to(REPO)} does not open with '/* {f.name} - <its job>'")
    for f in sorted((REPO / "python" / "torchair").rglob("*.py")):
        tree = ast.parse(f.read_text(), str(f))
        if ast.get_docstring(tree) is None and f.stat().st_size > 0:
            out.append(f"top comment: {f.relative_to(REPO)} has no module docstring")
    return out


def main() -> int:
    problems = check_c() + check_python() + check_sizes() + check_top_comments()
    for p in problems:
        print(p)
    if not problems:
        print("layers ok: no include or import circle, no upward include, no file over", MAX_LINES, "lines")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
