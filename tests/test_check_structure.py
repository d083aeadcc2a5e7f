"""tools/check_structure.py: each structure rule catches what it should and allows the rest.

Every test builds a small fake tree (a ``txnats/`` package in a temporary directory)
and runs the checks over it; one test runs the script as a subprocess.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from types import ModuleType

from twisted.trial.unittest import SynchronousTestCase

SCRIPT = Path(__file__).resolve().parent.parent / "tools" / "check_structure.py"


def _load_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_structure", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("check_structure", module)
    spec.loader.exec_module(module)
    return module


check_structure = _load_script()


def body(lines: int) -> str:
    """A function body of ``lines`` lines (so ``def`` + body is ``lines + 1`` lines)."""
    return "".join(f"    x{i} = {i}\n" for i in range(lines))


class TreeTestCase(SynchronousTestCase):
    """Builds a fake tree and runs the checks over it."""

    def scratch(self) -> Path:
        """A fresh directory removed after the test (not under the current directory:
        pytest, unlike trial, runs from the project root)."""
        root = Path(tempfile.mkdtemp(prefix="check-structure-"))
        self.addCleanup(shutil.rmtree, root, True)
        return root / "tree"

    def tree(self, files: dict[str, str]) -> Path:
        """Write ``files`` (path under the root: text, dedented) and return the root."""
        root = self.scratch()
        (root / "txnats").mkdir(parents=True)
        (root / "txnats" / "__init__.py").write_text("")
        for name, text in files.items():
            path = root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(textwrap.dedent(text))
        return root

    def violations(self, files: dict[str, str], rule: str) -> list[tuple[str, int, str]]:
        """The ``(path, line, detail)`` of each violation of ``rule`` in the tree."""
        _, found = check_structure.check(self.tree(files))
        return [(path, line, detail) for path, line, r, detail in found if r == rule]


class FileSizeTests(TreeTestCase):
    def test_over_800_lines(self) -> None:
        """An 801-line file is reported at its first line; an 800-line one is not."""
        found = self.violations({
            "txnats/big.py": "x = 1\n" * 801,
            "txnats/fits.py": "x = 1\n" * 800,
        }, "file-size")
        self.assertEqual(found, [("txnats/big.py", 1, "801 lines (limit 800)")])


class FunctionSizeTests(TreeTestCase):
    def test_81_lines(self) -> None:
        """An 81-line function (def line included) is reported; an 80-line one is not."""
        found = self.violations({
            "txnats/m.py": "def long():\n" + body(80) + "\n\ndef fits():\n" + body(79),
        }, "function-size")
        self.assertEqual(len(found), 1)
        self.assertEqual(found[0][:2], ("txnats/m.py", 1))
        self.assertIn("long is 81 lines", found[0][2])

    def test_method_and_nested(self) -> None:
        """Methods and nested functions are counted too, under their qualified names."""
        source = "class C:\n    def m(self):\n        def inner():\n" + textwrap.indent(
            body(80), "        ") + "        return inner\n"
        found = self.violations({"txnats/m.py": source}, "function-size")
        self.assertEqual([(line, detail.split(" is ")[0]) for _, line, detail in found],
                         [(2, "C.m"), (3, "C.m.inner")])

    def test_marker(self) -> None:
        """A ``long-function:`` comment with a reason above the def (or its decorators)
        allows it; one without a reason, or not right above, does not."""
        found = self.violations({"txnats/m.py": (
            "# long-function: the MSG fast path, measured: a call per message costs 8%\n"
            "def above_def():\n" + body(80) + "\n\n"
            "# long-function: one table,\n# read top to bottom\n"
            "@staticmethod\n@property\ndef above_decorators():\n" + body(80) + "\n\n"
            "# long-function:\ndef no_reason():\n" + body(80) + "\n\n"
            "# long-function: not right above\n\ndef apart():\n" + body(80)
        )}, "function-size")
        self.assertEqual([detail.split(" is ")[0] for _, _, detail in found],
                         ["no_reason", "apart"])


class ImportCycleTests(TreeTestCase):
    def test_cycle(self) -> None:
        """a -> b -> a is reported once, at a's import of b."""
        found = self.violations({
            "txnats/a.py": "import os\nfrom txnats.b import B\nA = 1\n",
            "txnats/b.py": "from txnats import a\nB = 1\n",
        }, "import-cycle")
        self.assertEqual(found, [("txnats/a.py", 2, "txnats.a -> txnats.b -> txnats.a")])

    def test_longer_cycle_and_relative_imports(self) -> None:
        """Relative imports are resolved; a three-module cycle is one report."""
        found = self.violations({
            "txnats/pkg/__init__.py": "",
            "txnats/pkg/a.py": "from .b import B\n",
            "txnats/pkg/b.py": "from . import c\nB = 1\n",
            "txnats/pkg/c.py": "from ..pkg.a import A\nimport txnats.pkg.a\n",
        }, "import-cycle")
        self.assertEqual([detail for _, _, detail in found],
                         ["txnats.pkg.a -> txnats.pkg.b -> txnats.pkg.c -> txnats.pkg.a"])

    def test_type_checking_and_lazy_imports(self) -> None:
        """Imports under ``if TYPE_CHECKING:`` or inside a function are not counted
        (but an ``else:`` branch runs)."""
        found = self.violations({
            "txnats/a.py": "from txnats.b import B\nfrom txnats.c import C\n",
            "txnats/b.py": (
                "from typing import TYPE_CHECKING\n"
                "if TYPE_CHECKING:\n    from txnats.a import A\n"
                "B = 1\n"
            ),
            "txnats/c.py": (
                "import typing\n"
                "if typing.TYPE_CHECKING:\n    pass\nelse:\n    import txnats.d\n"
                "def f():\n    from txnats.a import A\n    return A\n"
                "class K:\n    def m(self):\n        import txnats.a\n"
            ),
            "txnats/d.py": "try:\n    from txnats import a\nexcept ImportError:\n    pass\n",
        }, "import-cycle")
        self.assertEqual([detail for _, _, detail in found],
                         ["txnats.a -> txnats.c -> txnats.d -> txnats.a"])

    def test_package_init(self) -> None:
        """``from txnats.pkg import Name`` imports the package's __init__: a submodule
        that does so while the __init__ imports it is a cycle. Importing a sibling by
        its full name, or ``from txnats.pkg import sibling``, is not."""
        found = self.violations({
            "txnats/pkg/__init__.py": "from txnats.pkg.context import Context\n",
            "txnats/pkg/context.py": "from txnats.pkg import kv\nContext = 1\n",
            "txnats/pkg/kv.py": "from txnats.pkg.store import Store\nKV = 1\n",
            "txnats/pkg/store.py": "from txnats.pkg import Context\nStore = 1\n",
        }, "import-cycle")
        self.assertEqual(found, [(
            "txnats/pkg/__init__.py", 1,
            "txnats.pkg -> txnats.pkg.context -> txnats.pkg.kv -> txnats.pkg.store "
            "-> txnats.pkg",
        )])


class PrivateAccessTests(TreeTestCase):
    def test_other_objects(self) -> None:
        """``other._x`` is flagged, wherever it is; ``self``, ``cls``, ``super()``,
        dunders and classes or functions of the module itself are not."""
        found = self.violations({"txnats/m.py": """\
            import os


            def helper(): ...


            class C:
                _n = 0

                def __init__(self, other):
                    super().__init__()
                    self._x = other._x
                    super()._setup()

                @classmethod
                def make(cls):
                    cls._n += 1
                    C._n += 1
                    helper._cache = {}
                    return os._wrap_close, self.__class__, type(cls)._n
            """}, "private-access")
        self.assertEqual([(line, detail.split(" ")[0]) for _, line, detail in found],
                         [(12, "other._x"), (20, "os._wrap_close"), (20, "type(cls)._n")])
        self.assertIn("'# private-reach: <reason>'", found[0][2])

    def test_stdlib_public_underscore_names_allowed(self) -> None:
        """os._exit and sys._getframe are public despite the underscore; another
        module's _name is still a violation."""
        found = self.violations({"txnats/m.py": """\
            import os
            import sys
            import json
            def end() -> None:
                sys._getframe(0)
                json._default_decoder
                os._exit(1)
            """}, "private-access")
        self.assertEqual([v[2].split(" ")[0] for v in found], ["json._default_decoder"])

    def test_reason_on_its_line(self) -> None:
        """A ``# private-reach: <reason>`` comment on the reach's line (any line of a
        reach split over several) allows it; one on another line of the statement, or
        without a reason, does not."""
        found = self.violations({"txnats/m.py": """\
            def use(o, p):
                a = o._a  # private-reach: pytest-twisted keeps it nowhere else
                b = (o
                     ._b)  # private-reach: split over two lines
                c = f(p._c,
                      1)  # private-reach: on the statement's last line only
                d = p._d  # private-reach:
                return a, b, c, d
            """}, "private-access")
        self.assertEqual([(line, detail.split(" ")[0]) for _, line, detail in found],
                         [(5, "p._c"), (6, "a"), (7, "p._d")])
        self.assertEqual(found[1][2], "a private-reach: comment with no reach on or under it")

    def test_reason_in_block_above(self) -> None:
        """A reason in the comment block right above the statement a reach is in allows
        it (a reason may go on over the next lines; a def's block is above its
        decorators; a compound statement's block covers its header, not its body). A
        blank line between, or a block above another statement, does not."""
        found = self.violations({"txnats/m.py": """\
            # private-reach: the decorator reads the registry's table
            @register(table._rows)
            def f(o):
                # Why: private-reach:
                # the reason, on the next line
                x = o._x
                # private-reach: covers the if's test
                if o._flag:
                    return o._body

                # private-reach: not right above

                y = o._y
                # private-reach: above the wrong statement
                z = 1
                return x + y + z + o._w
            """}, "private-access")
        self.assertEqual([(line, detail.split(" ")[0]) for _, line, detail in found], [
            (9, "o._body"),
            (11, "a"),
            (13, "o._y"),
            (14, "a"),
            (16, "o._w"),
        ])

    def test_at_most_ten_commented_reaches(self) -> None:
        """Ten commented reaches in all of txnats/ pass; an eleventh is one violation
        (at the first of them) that gives the count and lists every one."""
        def reaching(count: int, start: int = 0) -> str:
            return "".join(f"def f{i}(o):\n    return o._r{i}  # private-reach: why {i}\n"
                           for i in range(start, start + count))

        self.assertEqual(self.violations({
            "txnats/a.py": reaching(6), "txnats/pkg/__init__.py": "",
            "txnats/pkg/b.py": reaching(4, 6),
        }, "private-access"), [])
        found = self.violations({
            "txnats/a.py": reaching(6), "txnats/pkg/__init__.py": "",
            "txnats/pkg/b.py": reaching(5, 6),
        }, "private-access")
        self.assertEqual(len(found), 1)
        path, line, detail = found[0]
        self.assertEqual((path, line), ("txnats/a.py", 2))
        self.assertTrue(detail.startswith("11 commented reaches in txnats/ (limit 10): "
                                          "txnats/a.py:2 o._r0, txnats/a.py:4 o._r1, "), detail)
        self.assertTrue(detail.endswith("txnats/pkg/b.py:10 o._r10"), detail)

    def test_google_and_numpy(self) -> None:
        """Google sections (Args:, Returns:, Raises:) and NumPy ones (Parameters over a
        dashed line) are flagged at their own line, in functions, classes and modules."""
        found = self.violations({"txnats/m.py": '''\
            """Module.

            Returns: nothing.
            """


            class C:
                """A class.

                Parameters
                ----------
                x : int
                """

                def f(self, x):
                    """Do it.

                    Args:
                        x: the thing.

                    Raises:
                        ValueError: when not.
                    """
            '''}, "docstring-style")
        self.assertEqual([(line, detail.split(" ")[0]) for _, line, detail in found],
                         [(3, "'Returns:"), (10, "'Parameters'"), (18, "'Args:'"),
                          (21, "'Raises:'")])

    def test_rest_allowed(self) -> None:
        """reST fields and prose that merely mentions raising or returning are fine."""
        found = self.violations({"txnats/m.py": '''\
            def f(x):
                """Do it. Raises :class:`ValueError` when ``x`` is bad.

                Returns the thing, or raises.

                :param x: the thing.
                :raises ValueError: when not.
                :returns: the result.
                """
            '''}, "docstring-style")
        self.assertEqual(found, [])

    def test_epytext(self) -> None:
        """Epytext fields starting a line (any of them, indented or not) and ``L{``,
        ``C{``, ``I{`` anywhere are flagged at their own line, in functions, classes and
        modules: each marker once per line, several markers on one line each once."""
        found = self.violations({"txnats/m.py": '''\
            """Module: see L{C}.
            @type x: int
            """


            class C:
                """A class with I{emphasis}.

                @ivar n: the count, C{0} at first or C{1} with L{f} and C{x}.
                """

                def f(self, x):
                    """Do it.

                    @param x: the thing.
                    @return: the result.
                    @returns: the result.
                    @rtype: int
                    @raise ValueError: when not.
                    @raises TypeError: when not either.
                    """
            '''}, "docstring-style")
        self.assertEqual([(line, detail.split(" ")[0]) for _, line, detail in found], [
            (1, "'L{...}'"),
            (2, "'@type'"),
            (7, "'I{...}'"),
            (9, "'@ivar'"),
            (9, "'C{...}'"),
            (9, "'L{...}'"),
            (15, "'@param'"),
            (16, "'@return'"),
            (17, "'@returns'"),
            (18, "'@rtype'"),
            (19, "'@raise'"),
            (20, "'@raises'"),
        ])
        self.assertIn("epytext field (the project's style is reST", found[1][2])
        self.assertIn("epytext markup (the project's style is reST", found[0][2])

    def test_epytext_lookalikes_allowed(self) -> None:
        """reST roles and literals, an ``@`` that does not start a field at the start of
        a line, braces after other letters, and epytext outside docstrings (comments,
        other strings) are fine."""
        found = self.violations({"txnats/m.py": '''\
            """Module: :class:`C` and ``C`` and *emphasis*."""

            # L{C} and C{x} in a comment, and @param x: too.
            TEMPLATE = "L{name} C{code}"


            class C:
                """Mention the @param field, the @return value, mail x@raise.org.

                Decorated with ``@property``, formatted with ``f"{CL}{x}"``:

                    @property
                    def n(self): ...

                @typed and @parameter are other words; SQL{x}, ABC{1} and {C} are
                not markup.
                """

                def f(self, x):
                    """Do it.

                    :param x: the thing, ``None`` or a :class:`C`.
                    :ivar n: the count.
                    :type x: int
                    :rtype: int
                    :raises ValueError: when not.
                    :returns: the result.
                    """
                    return "@param x: C{x}"
            '''}, "docstring-style")
        self.assertEqual(found, [])


class CommandLineTests(TreeTestCase):
    def test_subprocess(self) -> None:
        """Run as a script, it prints ``path:line: rule: detail`` per violation and a
        summary, and exits 1."""
        root = self.tree({
            "txnats/a.py": "from txnats.b import B\ndef f(o):\n    return o._x\n",
            "txnats/b.py": "from txnats.a import f\nB = 1\n",
        })
        result = subprocess.run(
            [sys.executable, str(SCRIPT), "--root", str(root)],
            capture_output=True, text=True, timeout=60, check=False,
        )
        self.assertEqual(result.returncode, 1, result.stderr)
        self.assertEqual(result.stdout.splitlines(), [
            "txnats/a.py:1: import-cycle: txnats.a -> txnats.b -> txnats.a",
            "txnats/a.py:3: private-access: o._x (use a public method or a collaborator, or "
            "say why in '# private-reach: <reason>')",
            "check_structure: 3 files, 2 violations, import-cycle 1, private-access 1",
        ])

    def test_clean_and_sizes(self) -> None:
        """A clean tree exits 0; ``--sizes`` lists the files by size and the functions
        over 60 lines."""
        root = self.tree({"txnats/m.py": "def f():\n" + body(61)})
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            status = check_structure.main(["--root", str(root), "--sizes"])
        self.assertEqual(status, 0)
        lines = out.getvalue().splitlines()
        self.assertIn("     62  txnats/m.py", lines)
        self.assertIn("     62  txnats/m.py:1 f", lines)
        self.assertEqual(lines[-1], "check_structure: 2 files, 0 violations")

    def test_no_tree(self) -> None:
        """A root without txnats/ is a usage error, not a clean pass."""
        with contextlib.redirect_stderr(io.StringIO()):
            with self.assertRaises(SystemExit) as caught:
                check_structure.main(["--root", str(self.scratch())])
        self.assertEqual(caught.exception.code, 2)

    def test_real_tree(self) -> None:
        """The checks run over the repository's own txnats/ (clean or not) and report
        in the expected format."""
        modules, found = check_structure.check(SCRIPT.parent.parent)
        self.assertTrue(modules)
        for path, line, rule, detail in found:
            self.assertRegex(f"{path}:{line}: {rule}: {detail}",
                             re.compile(r"^txnats/\S+\.py:\d+: [a-z-]+: \S"))
