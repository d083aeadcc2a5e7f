#!/usr/bin/env python3
"""Check txnats/ against the project's structure rules; exit 1 listing every violation.

Prints ``path:line: rule: detail`` per violation, then a summary; ``--sizes`` also lists
every file's line count and every function over 60 lines. The rules:

file-size        No file under txnats/ over 800 lines.
function-size    No function over 80 lines (``def`` line to the end of its body) unless
                 the comment block just above the def or its decorators says
                 ``long-function: <reason>``. No function is exempt.
import-cycle     No cycle among the imports run at import time: at module level (also
                 in if/try/with/class bodies), not in functions nor under ``if
                 TYPE_CHECKING:``. ``from txnats.a import b`` imports ``txnats.a.b`` if
                 that is a module, else the package ``txnats.a`` (its __init__); relative
                 imports are resolved; the parent packages Python imports implicitly
                 (already in sys.modules) do not count. Each cycle is reported once.
private-access   A reach is ``X._name`` (``_name`` not a dunder) where X is not ``self``,
                 ``cls``, ``super()`` nor a class or function defined at the module's top
                 level; the standard library's public names that start with an
                 underscore (``os._exit``, ``sys._getframe``) are not reaches. A reach
                 needs a comment saying why, ``# private-reach: <reason>``, on the
                 reach's own line or in the comment block right above the statement it
                 is in (the reason may go on over the block's next lines); one without is
                 a violation. A ``private-reach:`` comment that no reach is on or under
                 is a violation too (left over). At most 10 commented reaches in all of
                 txnats/: over that, one violation gives the count and lists them.
docstring-style  No Google/NumPy sections (``Args:``, ``Returns:``, ``Raises:``...;
                 ``Parameters`` over ``----``) and no epytext: neither a field
                 starting a line (``@param``, ``@return(s)``, ``@raise(s)``, ``@ivar``,
                 ``@type``, ``@rtype``) nor markup anywhere (``L{``, ``C{``, ``I{``).
                 The project's style is reST (``:param x:``, ``:raises X:``,
                 ``:returns:``; double backquotes, ``:class:`` and the other roles,
                 ``*emphasis*``). Each marker is reported once per line it is on.
"""

from __future__ import annotations

import argparse
import ast
import io
import re
import sys
import tokenize
from collections import Counter, deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MAX_FILE_LINES, MAX_FUNCTION_LINES, REPORT_FUNCTION_LINES = 800, 80, 60
MAX_REACHES = 10
MARKER = re.compile(r"\blong-function:\s*\S")
REACH_MARK = re.compile(r"\bprivate-reach:")
REACH_REASON = re.compile(r"\bprivate-reach:\s*\S")
GOOGLE = re.compile(r"\s*(Args|Arguments|Keyword Args|Keyword Arguments|Returns?|Raises|Yields?):")
NUMPY = {"Parameters", "Other Parameters", "Returns", "Yields", "Raises", "Warns"}
EPYTEXT_FIELD = re.compile(r"\s*(@(?:param|returns?|raises?|ivar|type|rtype))\b")
EPYTEXT_MARKUP = re.compile(r"\b[LCI]\{")
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
    tokens: list[tokenize.TokenInfo] = field(default_factory=list)
    comments: dict[int, str] = field(default_factory=dict)  # line: text after the "#"


def load(root: Path) -> tuple[list[Module], list[Violation]]:
    """Parse every txnats/**/*.py under root; a file that does not parse is a violation."""
    modules, bad = [], []
    for file in sorted((root / "txnats").rglob("*.py")):
        rel, text = file.relative_to(root), file.read_text(encoding="utf-8")
        parts = rel.with_suffix("").parts
        is_package = parts[-1] == "__init__"
        try:
            tree = ast.parse(text, filename=str(rel))
            tokens = list(tokenize.generate_tokens(io.StringIO(text).readline))
        except (SyntaxError, tokenize.TokenError) as e:
            line = getattr(e, "lineno", None) or 1
            bad.append((rel.as_posix(), line, "syntax", str(getattr(e, "msg", e))))
            continue
        name = ".".join(parts[:-1] if is_package else parts)
        comments = {t.start[0]: t.string[1:].strip() for t in tokens
                    if t.type == tokenize.COMMENT}
        modules.append(Module(rel.as_posix(), name, is_package, text.splitlines(), tree,
                              list(ast.walk(tree)), tokens, comments))
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


# -- rule 4: reaches into other objects' private members ------------------------------
#: Documented public names of the standard library that start with an underscore.
STDLIB_PUBLIC = frozenset({"os._exit", "sys._getframe"})


def reaches(mod: Module) -> Iterator[ast.Attribute]:
    """Every ``X._name`` of the module that reaches into another object."""
    own = {n.name for n in mod.tree.body if isinstance(n, (*FUNCTIONS, ast.ClassDef))}
    for node in mod.nodes:
        if not isinstance(node, ast.Attribute) or not node.attr.startswith("_"):
            continue
        x, attr = node.value, node.attr
        if ((attr.startswith("__") and attr.endswith("__"))
                or getattr(x, "id", None) in {"self", "cls", *own}
                or ast.unparse(node) in STDLIB_PUBLIC
                or (isinstance(x, ast.Call) and getattr(x.func, "id", None) == "super")):
            continue
        yield node


def statement_start(parents: dict[ast.AST, ast.AST], node: ast.AST) -> int:
    """The first line of the statement node is in (its first decorator's, for a def)."""
    while not isinstance(node, ast.stmt):
        node = parents[node]
    decorators = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def comment_block(mod: Module, start: int) -> list[int]:
    """The comment-only lines right above line ``start``, top down."""
    block, line = [], start - 1
    while line in mod.comments and mod.lines[line - 1].lstrip().startswith("#"):
        block.insert(0, line)
        line -= 1
    return block


@dataclass
class Reaches:
    """What rule 4 found in one module."""

    violations: list[Violation]
    commented: list[tuple[str, int, str]]  # path, line, the reach


def check_private(mod: Module) -> Reaches:
    found = Reaches([], [])
    parents = {child: node for node in mod.nodes for child in ast.iter_child_nodes(node)}
    marks = {line for line, text in mod.comments.items() if REACH_MARK.search(text)}
    used: set[int] = set()
    for node in reaches(mod):
        own = [i for i in range(node.lineno, (node.end_lineno or node.lineno) + 1)
               if i in mod.comments]
        block = comment_block(mod, statement_start(parents, node))
        used.update(marks.intersection(own + block))
        reach = f"{ast.unparse(node.value)[-40:]}.{node.attr}"
        if (any(REACH_REASON.search(mod.comments[i]) for i in own)
                or REACH_REASON.search(" ".join(mod.comments[i] for i in block))):
            found.commented.append((mod.path, node.lineno, reach))
        else:
            found.violations.append((mod.path, node.lineno, "private-access", f"{reach} "
                                     "(use a public method or a collaborator, or say why in "
                                     "'# private-reach: <reason>')"))
    for line in sorted(marks - used):
        found.violations.append((mod.path, line, "private-access",
                                 "a private-reach: comment with no reach on or under it"))
    return found


def check_reach_count(commented: list[tuple[str, int, str]]) -> Iterator[Violation]:
    if len(commented) > MAX_REACHES:
        path, line, _ = commented[0]
        listing = ", ".join(f"{p}:{n} {reach}" for p, n, reach in commented)
        yield (path, line, "private-access", f"{len(commented)} commented reaches in "
               f"txnats/ (limit {MAX_REACHES}): {listing}")


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
                yield (mod.path, line, "docstring-style", f"{text.strip()!r} section "
                       "(the project's style is reST: :param x:, :raises X:, :returns:)")
            epytext = EPYTEXT_FIELD.match(text)
            if epytext:
                yield (mod.path, line, "docstring-style", f"{epytext.group(1)!r} epytext field "
                       "(the project's style is reST: :param x:, :raises X:, :returns:)")
            for markup in dict.fromkeys(m.group() for m in EPYTEXT_MARKUP.finditer(text)):
                yield (mod.path, line, "docstring-style", f"{markup + '...}'!r} epytext markup "
                       "(the project's style is reST: ``literal``, :class:`Name`, *emphasis*)")


# -- driver --------------------------------------------------------------------------
def check(root: Path) -> tuple[list[Module], list[Violation]]:
    """The modules under root/txnats, and every violation sorted by path and line."""
    modules, found = load(root)
    found += check_cycles(modules)
    commented: list[tuple[str, int, str]] = []
    for mod in modules:
        private = check_private(mod)
        commented += private.commented
        found += [*check_sizes(mod), *private.violations, *check_docstrings(mod)]
    found += check_reach_count(commented)
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
    print(f"check_structure: {len(modules)} files, {len(found)} violations{by_rule}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
