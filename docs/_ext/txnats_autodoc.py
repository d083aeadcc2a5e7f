"""What autodoc needs to document txnats as users import it.

- Signatures: a zope interface in an annotation shows as ``<InterfaceClass name>``
  (shown by its name instead); a dataclass field made by a factory shows as
  ``<factory>`` and a duration field as ``Annotated[float, <marker object>]``;
  neither parses as Python, and Sphinx then splits the signature at every comma.
  They become ``dict()`` (the factory's name) and ``float`` (a duration is seconds,
  as every docstring says).
- Constants a package re-exports (``txnats.testing.PASS``, ``txnats.micro.API_PREFIX``)
  have their ``#:`` comment in the module that defines them, where autodoc, documenting
  the package, does not look: it is taken from there.
- ``DOCSTRING_FIXES``: markup slips in docstrings of modules whose owners are changing
  them, mended here until they are fixed at the source (each entry says where).
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import sys
from typing import Any

from sphinx.application import Sphinx
from sphinx.pycode import ModuleAnalyzer, PycodeError

INTERFACE = re.compile(r"<InterfaceClass ([\w.]+)>")
ANNOTATED = re.compile(r"~?(?:typing|types)\.Annotated\[([^\[\],]+(?:\[[^\[\]]*\])?[^\[\],]*),"
                       r" [^\[\]]*?\]")

#: Short names two modules define (a type alias in a signature): the full name meant,
#: unless the object documented lives under the other module named.
AMBIGUOUS = {"Handler": ("txnats.interfaces.Handler", "txnats.micro")}

#: (the docstring's object, the text as written, the text as meant).
DOCSTRING_FIXES = [
    # txnats/jetstream/context.py, JetStreamContext.publish: a plural after a role.
    ("publish", ":class:`APIError`s", ":class:`APIError`\\ s"),
]


def _signature(app: Sphinx, what: str, name: str, obj: Any, options: Any,
               signature: str | None, return_annotation: str | None) -> tuple[str | None,
                                                                            str | None]:
    """Mend the two forms of signature that do not parse (see the module's docstring)."""
    if signature is None:
        return signature, return_annotation
    if dataclasses.is_dataclass(obj) and "<factory>" in signature:
        factories = [f.default_factory for f in dataclasses.fields(obj)
                     if f.default_factory is not dataclasses.MISSING and f.init]
        for factory in factories:
            label = getattr(factory, "__name__", "factory")
            label = "..." if label == "<lambda>" else f"{label}()"
            signature = signature.replace("<factory>", label, 1)
    home = getattr(obj, "__module__", "") or ""
    for short, (full, other) in AMBIGUOUS.items():
        if not home.startswith(other):
            signature = re.sub(rf"(?<![\w.~]){short}\b", f"~{full}", signature)
    signature = INTERFACE.sub(r"~\1", signature)
    if return_annotation:
        return_annotation = INTERFACE.sub(r"~\1", return_annotation)
    for _ in range(3):  # nested ones: list[Annotated[...]]
        signature = ANNOTATED.sub(r"\1", signature)
        if return_annotation:
            return_annotation = ANNOTATED.sub(r"\1", return_annotation)
    return signature, return_annotation


def _attr_docs(modname: str) -> dict[tuple[str, str], list[str]]:
    """The ``#:`` comments (and strings after assignments) of one module."""
    try:
        return ModuleAnalyzer.for_module(modname).find_attr_docs()
    except PycodeError:
        return {}


def defining_comment(package: str, name: str) -> list[str] | None:
    """The doc comment of ``package.name`` where that constant is defined, or None."""
    value = getattr(sys.modules.get(package), name, None)
    for modname, module in sorted(sys.modules.items()):
        if not modname.startswith(package + ".") or module is None:
            continue
        if name in vars(module) and vars(module)[name] is value:
            lines = _attr_docs(modname).get(("", name))
            if lines:
                return list(lines)
    return None


def _docstring(app: Sphinx, what: str, name: str, obj: Any, options: Any,
               lines: list[str]) -> None:
    """Fill a re-exported constant's docs, and apply :data:`DOCSTRING_FIXES`."""
    if what in ("data", "attribute") and "." in name:
        package, short = name.rsplit(".", 1)
        own = _attr_docs(package).get(("", short))
        if not own and package in sys.modules:
            found = defining_comment(package, short)
            if found:
                lines[:] = [*found, ""]
    for target, wrong, right in DOCSTRING_FIXES:
        if name.endswith("." + target):
            lines[:] = [line.replace(wrong, right) for line in lines]


def _reexported_constants(app: Sphinx) -> None:
    """Give each package's analyzer the doc comments of the constants it re-exports, so
    that autodoc documents them on the package's page (it documents a module-level value
    only where that module's source comments it)."""
    import importlib

    for package in app.config.txnats_packages:
        module = importlib.import_module(package)
        docs = _attr_docs(package)
        for name in getattr(module, "__all__", ()):
            value = getattr(module, name)
            if ("", name) in docs or inspect.isclass(value) or inspect.isroutine(value):
                continue
            found = defining_comment(package, name)
            if found:
                docs[("", name)] = found


def _patch_stringify() -> None:
    """Name zope interfaces in the annotations of attributes and properties too (those
    do not go through a signature): wrap Sphinx's ``stringify_annotation`` wherever
    autodoc imported it."""
    from sphinx.util import typing as sphinx_typing

    original = sphinx_typing.stringify_annotation
    if getattr(original, "txnats_wrapped", False):
        return

    def stringify(annotation: Any, /, *args: Any, **kwargs: Any) -> str:
        text = original(annotation, *args, **kwargs)
        return INTERFACE.sub(r"\1", text)

    stringify.txnats_wrapped = True  # type: ignore[attr-defined]
    for module in list(sys.modules.values()):
        if getattr(module, "stringify_annotation", None) is original:
            module.stringify_annotation = stringify  # type: ignore[union-attr]


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the hooks."""
    import sphinx.ext.autodoc  # noqa: F401  (its modules import stringify_annotation)

    _patch_stringify()
    app.add_config_value("txnats_packages", (), "env")
    app.connect("builder-inited", _reexported_constants)
    app.connect("autodoc-process-signature", _signature)
    app.connect("autodoc-process-docstring", _docstring)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
