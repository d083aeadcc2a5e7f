"""The guide's code runs: every block of Python in docs/ is a doctest (run here) or
included from a program in examples/ that a test runs; shell blocks are run by the
tests this file names; program output is shown as ``code-block:: text``. And the README
is the front page: under 20 KB, the two commands first, links into the guide."""

from __future__ import annotations

import doctest
import re
from dataclasses import dataclass
from pathlib import Path

from twisted.python import usage
from twisted.trial.unittest import SynchronousTestCase

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TESTS = ROOT / "tests"
TWO_COMMANDS = [
    "pip install -e '.[bridge]' && twistd -n nats-bridge",
    "pip install -e '.[test]' && python -m pytest -q tests",
]

#: The shell blocks of the guide, by their first line, and what runs them.
SHELL_BLOCKS = {
    # The two commands: tests/test_bridge_tap.py (figure 1) runs `twistd -n nats-bridge`
    # as a process; .ci/run installs and runs the suite; README_COMMANDS below checks
    # they are the README's first block.
    TWO_COMMANDS[0]: "tests/test_bridge_tap.py, .ci/run",
    # Run line by line against a bridge by test_examples_guide.BridgeCurlTests.
    "curl -X POST --data 'hello' http://127.0.0.1:8080/v1/publish/greet.joe":
        "tests/test_examples_guide.py",
    # Each --forward spec is parsed by twistd's options below (the other system,
    # nats://other:4222, is not there to run them against); examples/forward.py runs
    # both modes.
    "# core messages on orders.> go to the same subjects on another system":
        "tests/test_docs.py",
    # tests/test_micro_examples.py runs these three commands.
    "python examples/service_client.py                  # its own server, the service "
    "in-process": "tests/test_micro_examples.py",
}


@dataclass
class Block:
    path: Path
    line: int
    kind: str  # the directive: code-block, literalinclude, doctest, literal
    language: str
    text: str  # the argument of literalinclude, else the content


def blocks(path: Path) -> list[Block]:
    """Every code block of one reST file: directives, ``::`` literals, doctests."""
    lines = path.read_text(encoding="utf-8").splitlines()
    found: list[Block] = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"\s*\.\. (code-block|code|sourcecode|literalinclude|doctest)::\s*(.*)",
                     line)
        if m or (line.rstrip().endswith("::") and not line.lstrip().startswith("..")):
            j = i + 1
            options: list[str] = []
            while j < len(lines) and re.match(r"\s+:\w[\w-]*:", lines[j]):
                options.append(lines[j].strip())
                j += 1
            body: list[str] = []
            while j < len(lines) and (not lines[j].strip() or lines[j][:1].isspace()):
                body.append(lines[j])
                j += 1
            text = "\n".join(body).strip("\n")
            if m:
                kind, arg = m.group(1), m.group(2).strip()
                language = next((o.split(":", 2)[2].strip() for o in options
                                 if o.startswith(":language:")), "") if kind == \
                    "literalinclude" else arg
                found.append(Block(path, i + 1, kind, language,
                                   arg if kind == "literalinclude" else text))
            else:
                found.append(Block(path, i + 1, "literal", "", text))
            i = j
            continue
        if line.startswith(">>> "):
            found.append(Block(path, i + 1, "doctest", "python", line))
        i += 1
    return found


def guide_files() -> list[Path]:
    """The reST files written by hand (the API pages are generated from docstrings)."""
    return sorted(p for p in DOCS.rglob("*.rst") if "_build" not in p.parts)


def source_of_the_tests() -> str:
    """The test files' source, to find which examples they run."""
    return "\n".join(p.read_text(encoding="utf-8") for p in TESTS.glob("test_*.py"))


class CodeBlockTests(SynchronousTestCase):
    def test_no_untested_python(self) -> None:
        """No ``::`` literal block (it would be highlighted as Python, untested) and no
        Python ``code-block``: Python comes from examples/ or is a doctest."""
        bad = [f"{b.path.relative_to(ROOT)}:{b.line}" for p in guide_files()
               for b in blocks(p)
               if b.kind == "literal" or (b.kind in ("code-block", "code", "sourcecode")
               and b.language not in ("text", "shell"))]
        self.assertEqual(bad, [])

    def test_included_examples_are_run_by_tests(self) -> None:
        """Every file the guide includes exists in examples/ and a test runs it."""
        source = source_of_the_tests()
        included = {b.text for p in guide_files() for b in blocks(p)
                    if b.kind == "literalinclude"}
        self.assertTrue(included)
        for target in sorted(included):
            path = (DOCS / "guide" / target).resolve()
            self.assertEqual(path.parent, ROOT / "examples", target)
            self.assertTrue(path.exists(), target)
            self.assertRegex(source, rf"['\"]{re.escape(path.stem)}(\.\w+)?['\"]",
                             f"no test runs examples/{path.name}")

    def test_shell_blocks_are_accounted_for(self) -> None:
        """Each shell block is one SHELL_BLOCKS names, with the test that runs it."""
        firsts = [b.text.splitlines()[0].strip() for p in guide_files() for b in blocks(p)
                  if b.kind == "code-block" and b.language == "shell"]
        self.assertEqual(sorted(firsts), sorted(SHELL_BLOCKS))

    def test_doctests(self) -> None:
        """Every ``>>>`` example of the guide gives the output it shows."""
        parser, total = doctest.DocTestParser(), 0
        for path in guide_files():
            text = path.read_text(encoding="utf-8")
            if ">>>" not in text:
                continue
            test = parser.get_doctest(text, {}, path.name, str(path), 0)
            runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                           | doctest.NORMALIZE_WHITESPACE)
            out: list[str] = []
            result = runner.run(test, out=out.append)
            self.assertEqual(result.failed, 0, "".join(out))
            total += result.attempted
        self.assertGreaterEqual(total, 10)


class ForwardSpecTests(SynchronousTestCase):
    def test_bridge_page_forward_commands_parse(self) -> None:
        """The ``--forward`` commands of the bridge page are accepted by twistd's
        options for nats-bridge, as written."""
        from txnats.bridge.tap import Options

        page = (DOCS / "guide" / "bridge.rst").read_text(encoding="utf-8")
        specs = re.findall(r"twistd -n nats-bridge --forward '([^']+)'", page)
        self.assertEqual(len(specs), 3)
        for spec in specs:
            options = Options()
            try:
                options.parseOptions(["--nats", "nats://127.0.0.1:4222", "--forward", spec])
            except usage.UsageError as e:  # pragma: no cover - the failure's message
                self.fail(f"{spec}: {e}")


class ReadmeTests(SynchronousTestCase):
    readme = (ROOT / "README.rst").read_text(encoding="utf-8")

    def test_front_page_size(self) -> None:
        """The README is a front page: under 20 KB."""
        self.assertLess(len(self.readme.encode("utf-8")), 20_000)

    def test_two_commands_first(self) -> None:
        """The README's first code block is the two commands, as the guide's is."""
        first = next(b for b in blocks(ROOT / "README.rst") if b.kind == "code-block")
        self.assertEqual([x.strip() for x in first.text.splitlines()], TWO_COMMANDS)
        page = next(b for b in blocks(DOCS / "guide" / "getting-started.rst")
                    if b.kind == "code-block")
        self.assertEqual([x.strip() for x in page.text.splitlines()], TWO_COMMANDS)

    def test_links_into_the_guide(self) -> None:
        """The README links to the guide's pages it summarises (as files in docs/)."""
        links = set(re.findall(r"<(docs/[^>]+\.rst)>`_", self.readme))
        self.assertGreaterEqual(len(links), 10)
        for link in links:
            self.assertTrue((ROOT / link).exists(), link)
