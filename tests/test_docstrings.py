"""Every public name has a docstring: the API reference (docs/api/, generated from the
docstrings by Sphinx autodoc) is then complete.

The public API is the ``__all__`` of each module in ``PUBLIC_MODULES`` of docs/conf.py
(the modules docs/api/ documents): every class, function and constant listed there, and
every public method and property of those classes (their own, or inherited from a
txnats class), must say what it does. A constant's docstring is its ``#:`` comment (or a
string right after it) where it is defined. The test fails listing each name that has
none, except those in ``STILL_MISSING``.
"""

from __future__ import annotations

import ast
import enum
import importlib
import inspect
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from twisted.trial.unittest import SynchronousTestCase
from zope.interface.interface import InterfaceClass

ROOT = Path(__file__).resolve().parent.parent
CONF = ROOT / "docs" / "conf.py"

#: Public names that have no docstring yet, in modules whose owners are changing them.
#: Each is a defect to fix at its source, then to delete from here: a name listed here
#: that has a docstring fails the test too, and so does any new name without one.
STILL_MISSING = frozenset({
    # txnats/bridge/service.py
    "txnats.bridge.service.BridgeService.startService",
    # txnats/jetstream/msg.py: the IMsg attributes JsMsg passes through
    "txnats.jetstream.JsMsg.data",
    "txnats.jetstream.JsMsg.headers",
    "txnats.jetstream.JsMsg.reply",
    "txnats.jetstream.JsMsg.sid",
    "txnats.jetstream.JsMsg.subject",
    # txnats/jetstream/object_store.py, _obj_put.py, push.py
    "txnats.jetstream.ObjectInfo.is_link",
    "txnats.jetstream.ObjectWriter.next",
    "txnats.jetstream.ObjectWriter.registerProducer",
    "txnats.jetstream.ObjectWriter.unregisterProducer",
    "txnats.jetstream.PushSubscription.is_active",
})


def public_modules() -> tuple[str, ...]:
    """``PUBLIC_MODULES`` as docs/conf.py writes it (read without running Sphinx)."""
    for node in ast.parse(CONF.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "PUBLIC_MODULES" for t in node.targets
        ):
            return tuple(ast.literal_eval(node.value))
    raise AssertionError("docs/conf.py has no PUBLIC_MODULES")


def own_doc(obj: Any) -> str:
    """The docstring obj itself carries ('' for none, or one dataclass made up)."""
    if isinstance(obj, InterfaceClass):
        return obj.getDoc() or ""
    if inspect.isclass(obj):
        doc = obj.__dict__.get("__doc__") or ""
        made_up = f"{obj.__name__}("  # dataclasses write the signature when there is none
        return "" if doc.startswith(made_up) else doc
    return inspect.getdoc(obj) or ""


def constant_documented(modname: str, name: str) -> bool:
    """Whether a constant is commented where it is defined: the module that binds it to
    the same value (``#:`` lines just above, or a string statement right after)."""
    value = getattr(sys.modules[modname], name)
    for other, module in sorted(sys.modules.items()):
        if not (other == modname or other.startswith(modname.split(".")[0] + ".")):
            continue
        if module is None or vars(module).get(name, object()) is not value:
            continue
        try:
            source = inspect.getsource(module)
        except (OSError, TypeError):
            continue
        tree = ast.parse(source)
        lines = source.splitlines()
        for i, node in enumerate(tree.body):
            targets = (node.targets if isinstance(node, ast.Assign)
                       else [node.target] if isinstance(node, ast.AnnAssign) else [])
            if not any(isinstance(t, ast.Name) and t.id == name for t in targets):
                continue
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            after = tree.body[i + 1] if i + 1 < len(tree.body) else None
            if above.startswith("#:") or (
                isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                and isinstance(after.value.value, str)
            ):
                return True
    return False


def class_members(cls: type) -> Iterator[tuple[str, Any]]:
    """The public methods and properties a class's page shows: its own and those it
    inherits from txnats classes (not Exception's, Enum's or Twisted's)."""
    if issubclass(cls, enum.Enum):
        return
    seen: set[str] = set()
    for klass in cls.__mro__:
        if klass is not cls and not klass.__module__.startswith("txnats"):
            continue
        for name, member in vars(klass).items():
            if name.startswith("_") or name in seen:
                continue
            seen.add(name)
            if isinstance(member, staticmethod | classmethod):
                member = member.__func__
            if isinstance(member, property) or inspect.isfunction(member):
                yield name, getattr(cls, name) if not isinstance(member, property) else member


def undocumented() -> list[str]:
    """Every public name without a docstring, by its full name."""
    missing: list[str] = []
    for modname in public_modules():
        module = importlib.import_module(modname)
        if not (module.__doc__ or "").strip():
            missing.append(modname)
        for name in getattr(module, "__all__", ()):
            if name.startswith("__"):
                continue
            obj = getattr(module, name)
            full = f"{modname}.{name}"
            if isinstance(obj, InterfaceClass):
                if not own_doc(obj).strip():
                    missing.append(full)
                for attr in obj.names():
                    if not (obj[attr].getDoc() or "").strip():
                        missing.append(f"{full}.{attr}")
            elif inspect.isclass(obj):
                if not own_doc(obj).strip():
                    missing.append(full)
                for attr, member in class_members(obj):
                    if not (inspect.getdoc(member) or "").strip():
                        missing.append(f"{full}.{attr}")
            elif inspect.isfunction(obj) or inspect.isbuiltin(obj) or hasattr(obj, "__wrapped__"):
                # (a wrapped function: a pytest fixture, a decorated function)
                if not own_doc(obj).strip():
                    missing.append(full)
            elif not constant_documented(modname, name):
                missing.append(full)
    return sorted(set(missing))


class DocstringCoverageTests(SynchronousTestCase):
    def test_every_public_name_has_a_docstring(self) -> None:
        """No public name lacks a docstring, except those STILL_MISSING lists."""
        missing = set(undocumented())
        new = sorted(missing - STILL_MISSING)
        self.assertEqual(new, [], "public names without a docstring:\n" + "\n".join(new))

    def test_still_missing_is_up_to_date(self) -> None:
        """Every name STILL_MISSING lists still exists and still lacks its docstring
        (a name that gained one is to be deleted from the list)."""
        fixed = sorted(STILL_MISSING - set(undocumented()))
        self.assertEqual(fixed, [], "documented now; delete from STILL_MISSING:\n"
                         + "\n".join(fixed))

    def test_every_public_module_is_in_the_reference(self) -> None:
        """docs/api/ has an ``automodule`` for each module of PUBLIC_MODULES."""
        text = "\n".join(p.read_text(encoding="utf-8")
                         for p in (ROOT / "docs" / "api").glob("*.rst"))
        documented = set(re.findall(r"^\.\. automodule:: (\S+)", text, re.M))
        self.assertEqual(sorted(set(public_modules()) - documented), [])

    def test_the_check_finds_what_it_must(self) -> None:
        """The checks themselves: a class, a method, a property, a dataclass's made-up
        docstring and an uncommented constant each count as missing."""
        import dataclasses

        @dataclasses.dataclass
        class Record:
            x: int = 0

        class Thing:
            """Documented."""

            def call(self) -> None:
                pass

            @property
            def value(self) -> int:
                return 1

        self.assertEqual(own_doc(Record), "")
        self.assertEqual([n for n, m in class_members(Thing) if not inspect.getdoc(m)],
                         ["call", "value"])
        self.assertTrue(constant_documented("txnats.testing", "PASS"))
        self.assertFalse(constant_documented(__name__, "CONF"))  # this module's, uncommented
