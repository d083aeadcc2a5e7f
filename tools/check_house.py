#!/usr/bin/env python3
"""Check txnats/ against the house structure rules; exit 1 listing every violation.

Prints ``path:line: rule: detail`` per violation, then a summary; ``--sizes`` also lists
every file's line count and every function over 60 lines. The rules:

file-size        No file under txnats/ over 800 lines.
function-size    No function over 80 lines (``def`` line to the end of its body) unless
                 the comment block just above the def or its decorators says
                 ``long-function: <reason>``.
import-cycle     No cycle among the imports run at import time: at module level (also
                 in if/try/with/class bodies), not in functions nor under ``if
                 TYPE_CHECKING:``. ``from txnats.a import b`` imports ``txnats.a.b`` if
                 that is a module, else the package ``txnats.a`` (its __init__); relative
                 imports are resolved; the parent packages Python imports implicitly
                 (already in sys.modules) do not count. Each cycle is reported once.
private-access   No ``X._name`` (not a dunder) unless X is ``self``, ``cls``,
                 ``super()`` or a class or function defined at the module's top level,
                 or ``_name`` is in the module's ``HOUSE_PRIVATE_OK = {"_name", ...}``
                 and a member of a typing.Protocol defined in or imported (by name) into
                 the module; a listed name no such Protocol declares is a violation.
                 The standard library's public names that start with an underscore
                 (``os._exit``, ``sys._getframe``) are allowed.
docstring-style  No Google/NumPy sections (``Args:``, ``Returns:``, ``Raises:``...;
                 ``Parameters`` over ``----``) and no epytext: neither a field
                 starting a line (``@param``, ``@return(s)``, ``@raise(s)``, ``@ivar``,
                 ``@type``, ``@rtype``) nor markup anywhere (``L{``, ``C{``, ``I{``).
                 The house style is reST (``:param x:``, ``:raises X:``,
                 ``:returns:``; double backquotes, ``:class:`` and the other roles,
                 ``*emphasis*``). Each marker is reported once per line it is on.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

MAX_FILE_LINES, MAX_FUNCTION_LINES, REPORT_FUNCTION_LINES = 800, 80, 60
MARKER = re.compile(r"\blong-function:\s*\S")
GOOGLE = re.compile(r"\s*(Args|Arguments|Keyword Args|Keyword Arguments|Returns?|Raises|Yields?):")
NUMPY = {"Parameters", "Other Parameters", "Returns", "Yields", "Raises", "Warns"}
EPYTEXT_FIELD = re.compile(r"\s*(@(?:param|returns?|raises?|ivar|type|rtype))\b")
EPYTEXT_MARKUP = re.compile(r"\b[LCI]\{")
PROTOCOL_BASES = {"typing.Protocol", "typing_extensions.Protocol"}
FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
Function = ast.FunctionDef | ast.AsyncFunctionDef
Violation = tuple[str, int, str, str]  # path, line, rule, detail
Graph = dict[str, dict[str, int]]  # module -> {module it imports: line of the first import}


@dataclass
class Module:
    path: str  # relative to the root, with "/"
    name: str  # dotted: txnats.jetstream (its __init__) or txnats.jetstream.kv
    is_package: bool
    lines: list[str]
    tree: ast.Module
    nodes: list[ast.AST]  # every node of the tree, walked once


def load(root: Path) -> tuple[list[Module], list[Violation]]:
    """Parse every txnats/**/*.py under root; a file that does not parse is a violation."""
    modules, bad = [], []
    for file in sorted((root / "txnats").rglob("*.py")):
        rel, text = file.relative_to(root), file.read_text(encoding="utf-8")
        parts = rel.with_suffix("").parts
        is_package = parts[-1] == "__init__"
        try:
            tree = ast.parse(text, filename=str(rel))
        except SyntaxError as e:
            bad.append((rel.as_posix(), e.lineno or 1, "syntax", str(e.msg)))
            continue
        name = ".".join(parts[:-1] if is_package else parts)
        modules.append(Module(rel.as_posix(), name, is_package, text.splitlines(), tree,
                              list(ast.walk(tree))))
    return modules, bad


# -- rules 1 and 2: sizes ------------------------------------------------------------
def functions(node: ast.AST, prefix: str = "") -> Iterator[tuple[str, Function]]:
    """Every function and method under node (nested ones too), with a qualified name."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, (*FUNCTIONS, ast.ClassDef)):
            if not isinstance(child, ast.ClassDef):
                yield prefix + child.name, child
            yield from functions(child, prefix + child.name + ".")
        elif not isinstance(child, ast.expr):  # no def inside an expression
            yield from functions(child, prefix)


def length(func: Function) -> int:
    return (func.end_lineno or func.lineno) - func.lineno + 1


def has_marker(lines: list[str], func: Function) -> bool:
    """Whether the comment block right above the def or its decorators gives a reason."""
    for start in {func.lineno, *(d.lineno for d in func.decorator_list)}:
        block, i = [], start - 2  # the 0-based index of the line above
        while i >= 0 and lines[i].lstrip().startswith("#"):
            block.insert(0, lines[i].strip().lstrip("#").strip())
            i -= 1
        if MARKER.search(" ".join(block)):
            return True
    return False


def check_sizes(mod: Module) -> Iterator[Violation]:
    if len(mod.lines) > MAX_FILE_LINES:
        yield mod.path, 1, "file-size", f"{len(mod.lines)} lines (limit {MAX_FILE_LINES})"
    for name, func in functions(mod.tree):
        if length(func) > MAX_FUNCTION_LINES and not has_marker(mod.lines, func):
            yield (mod.path, func.lineno, "function-size", f"{name} is {length(func)} lines "
                   f"(limit {MAX_FUNCTION_LINES}, or '# long-function: <reason>' above it)")


# -- rule 3: import cycles -----------------------------------------------------------
def runtime_imports(nodes: Iterable[ast.AST]) -> Iterator[ast.Import | ast.ImportFrom]:
    """The import statements that run when the module is imported."""
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and ast.unparse(node.test).split(".")[-1] == "TYPE_CHECKING":
            yield from runtime_imports(node.orelse)
        elif not isinstance(node, (*FUNCTIONS, ast.Lambda)):
            yield from runtime_imports(ast.iter_child_nodes(node))


def from_base(mod: Module, node: ast.ImportFrom) -> str:
    """The absolute name of the module a ``from ... import`` reads from."""
    if node.level == 0:
        return node.module or ""
    package = mod.name.split(".")[: None if mod.is_package else -1]
    package = package[: len(package) - node.level + 1]
    return ".".join(package + ([node.module] if node.module else []))


def import_graph(modules: list[Module]) -> Graph:
    known = {m.name for m in modules}
    graph: Graph = {m.name: {} for m in modules}
    for mod in modules:
        for node in runtime_imports(mod.tree.body):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:  # the submodule if there is one by that name, else the module itself
                base = from_base(mod, node)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base
                           for a in node.names]
            for target in set(targets) & known:
                graph[mod.name].setdefault(target, node.lineno)
    return graph


def shortest_cycle(graph: Graph, start: str) -> list[str]:
    """The shortest chain of imports from start back to start (breadth first), or []."""
    parent: dict[str, str] = {}
    queue = deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(graph[v]):
            if w == start:
                path = [v]
                while path[-1] != start:
                    path.append(parent[path[-1]])
                return path[::-1]
            if w not in parent:
                parent[w] = v
                queue.append(w)
    return []


def check_cycles(modules: list[Module]) -> Iterator[Violation]:
    graph, paths, seen = import_graph(modules), {m.name: m.path for m in modules}, set()
    for start in sorted(graph):
        cycle = shortest_cycle(graph, start)
        if cycle:
            first = cycle.index(min(cycle))  # one rotation per cycle: each is reported once
            chain = (*cycle[first:], *cycle[:first], cycle[first])
            if chain not in seen:
                seen.add(chain)
                yield (paths[chain[0]], graph[chain[0]][chain[1]], "import-cycle",
                       " -> ".join(chain))


# -- rule 4: private attributes ------------------------------------------------------
#: Documented public names of the standard library that start with an underscore.
STDLIB_PUBLIC = frozenset({"os._exit", "sys._getframe"})


def protocols(mod: Module) -> dict[str, set[str]]:
    """The typing.Protocol classes at the top level of mod, each with its member names."""
    protocol = PROTOCOL_BASES | {
        a.asname or a.name for node in mod.nodes if isinstance(node, ast.ImportFrom)
        and node.module in ("typing", "typing_extensions") for a in node.names
        if a.name == "Protocol"}  # the names Protocol goes by here (twisted's is another)
    found: dict[str, set[str]] = {}
    for cls in (node for node in mod.tree.body if isinstance(node, ast.ClassDef)):
        bases = {ast.unparse(b.value if isinstance(b, ast.Subscript) else b) for b in cls.bases}
        if bases & protocol:
            members = set().union(*(found.get(b, ()) for b in bases))  # Protocols above
            for stmt in cls.body:
                if isinstance(stmt, FUNCTIONS):
                    members.add(stmt.name)
                elif isinstance(stmt, ast.AnnAssign | ast.Assign):
                    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                    members |= {t.id for t in targets if isinstance(t, ast.Name)}
            found[cls.name] = members
    return found


def house_private_ok(mod: Module) -> tuple[int, set[str]]:
    """The line and names of the module's HOUSE_PRIVATE_OK, if it has one."""
    for node in mod.tree.body:
        if isinstance(node, ast.Assign | ast.AnnAssign) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(getattr(t, "id", None) == "HOUSE_PRIVATE_OK" for t in targets):
                return node.lineno, {c.value for c in ast.walk(node.value)
                                     if isinstance(c, ast.Constant) and isinstance(c.value, str)}
    return 0, set()


def check_private(mod: Module, all_protocols: dict[str, dict[str, set[str]]]
                  ) -> Iterator[Violation]:
    declared = set().union(*all_protocols[mod.name].values())
    for node in mod.nodes:  # members of the Protocols imported (by name) too
        if isinstance(node, ast.ImportFrom):
            imported = all_protocols.get(from_base(mod, node), {})
            declared = declared.union(*(imported.get(a.name, ()) for a in node.names))
    line, listed = house_private_ok(mod)
    for name in sorted(listed - declared):
        yield (mod.path, line, "private-access", f"HOUSE_PRIVATE_OK lists {name}, which no "
               "typing.Protocol defined in or imported into this module declares")
    own = {n.name for n in mod.tree.body if isinstance(n, (*FUNCTIONS, ast.ClassDef))}
    for node in mod.nodes:
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        x, attr = node.value, node.attr
        if ((attr.startswith("__") and attr.endswith("__")) or attr in listed & declared
                or getattr(x, "id", None) in {"self", "cls", *own}
                or ast.unparse(node) in STDLIB_PUBLIC
                or (isinstance(x, ast.Call) and getattr(x.func, "id", None) == "super")):
            continue
        yield mod.path, node.lineno, "private-access", f"{ast.unparse(x)[-40:]}.{attr}"


# -- rule 5: docstrings --------------------------------------------------------------
def check_docstrings(mod: Module) -> Iterator[Violation]:
    for node in mod.nodes:
        doc = isinstance(node, (*FUNCTIONS, ast.ClassDef, ast.Module)) and ast.get_docstring(
            node, clean=False)  # as written, so that its lines are the file's
        lines = [*doc.splitlines(), ""] if doc else []
        for i, text in enumerate(lines[:-1]):
            line = node.body[0].lineno + i
            numpy = text.strip() in NUMPY and re.fullmatch(r"\s*-{3,}\s*", lines[i + 1])
            if GOOGLE.match(text) or numpy:
                yield (mod.path, line, "docstring-style", f"{text.strip()!r} "
                       "section (the house style is reST: :param x:, :raises X:, :returns:)")
            field = EPYTEXT_FIELD.match(text)
            if field:
                yield (mod.path, line, "docstring-style", f"{field.group(1)!r} epytext field "
                       "(the house style is reST: :param x:, :raises X:, :returns:)")
            for markup in dict.fromkeys(m.group() for m in EPYTEXT_MARKUP.finditer(text)):
                yield (mod.path, line, "docstring-style", f"{markup + '...}'!r} epytext markup "
                       "(the house style is reST: ``literal``, :class:`Name`, *emphasis*)")


# -- driver --------------------------------------------------------------------------
def check(root: Path) -> tuple[list[Module], list[Violation]]:
    """The modules under root/txnats, and every violation sorted by path and line."""
    modules, found = load(root)
    all_protocols = {m.name: protocols(m) for m in modules}
    found += check_cycles(modules)
    for mod in modules:
        found += [*check_sizes(mod), *check_private(mod, all_protocols),
                  *check_docstrings(mod)]
    return modules, sorted(found)


def print_sizes(modules: list[Module]) -> None:
    print(f"\nfiles by size ({len(modules)}):")
    for mod in sorted(modules, key=lambda m: (-len(m.lines), m.path)):
        print(f"  {len(mod.lines):5d}  {mod.path}")
    long = sorted((-length(f), mod.path, f.lineno, name, has_marker(mod.lines, f))
                  for mod in modules for name, f in functions(mod.tree)
                  if length(f) > REPORT_FUNCTION_LINES)
    print(f"\nfunctions over {REPORT_FUNCTION_LINES} lines ({len(long)}):")
    for size, path, line, name, marked in long:
        print(f"  {-size:5d}  {path}:{line} {name}{'  (long-function)' if marked else ''}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--root", type=Path, default=Path(__file__).resolve().parent.parent,
                        help="the repository root, holding txnats/ (default: %(default)s)")
    parser.add_argument("--sizes", action="store_true", help="also list the file sizes "
                        f"and every function over {REPORT_FUNCTION_LINES} lines")
    args = parser.parse_args(argv)
    if not (args.root / "txnats").is_dir():
        parser.error(f"no txnats/ directory under {args.root}")
    modules, found = check(args.root)
    for path, line, rule, detail in found:
        print(f"{path}:{line}: {rule}: {detail}")
    if args.sizes:
        print_sizes(modules)
    counts = Counter(rule for _, _, rule, _ in found)
    by_rule = "".join(f", {rule} {n}" for rule, n in sorted(counts.items()))
    print(f"check_house: {len(modules)} files, {len(found)} violations{by_rule}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
