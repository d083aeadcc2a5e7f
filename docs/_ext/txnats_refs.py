"""Cross-references the docstrings make in short form, and links to other projects.

The docstrings name txnats objects the way their module sees them (``:class:`Client```
in ``txnats.client``, ``:class:`~txnats.client.Client``` elsewhere), while the
reference documents each public object once, under the name users import
(``txnats.Client``). A reference Sphinx cannot resolve is looked up here by its last
dotted parts among the documented objects; exactly one match resolves it, and none or
several leave it to nitpicky mode, which fails the build.

Names of Twisted, zope.interface and the standard library become links to their
published references (Twisted's pydoctor pages, Python's library pages) from the tables
below: no inventory is fetched at build time, so the build needs no network. A name of
theirs that is not in the tables stays a warning until it is added.
"""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

from docutils import nodes
from sphinx.addnodes import pending_xref
from sphinx.application import Sphinx
from sphinx.environment import BuildEnvironment

TWISTED_API = "https://docs.twisted.org/en/stable/api/"
PYTHON_DOCS = "https://docs.python.org/3/library/"
ZOPE_DOCS = "https://zopeinterface.readthedocs.io/en/latest/api/declarations.html"

#: Short names the annotations use, and the full names they stand for.
ALIASES = {
    "Deferred": "twisted.internet.defer.Deferred",
    "Failure": "twisted.python.failure.Failure",
    "IReactorTime": "twisted.internet.interfaces.IReactorTime",
    "IReactorCore": "twisted.internet.interfaces.IReactorCore",
    "IReactorTCP": "twisted.internet.interfaces.IReactorTCP",
    "IConsumer": "twisted.internet.interfaces.IConsumer",
    "IProducer": "twisted.internet.interfaces.IProducer",
    "IPushProducer": "twisted.internet.interfaces.IPushProducer",
    "IPullProducer": "twisted.internet.interfaces.IPullProducer",
    "IBodyProducer": "twisted.web.iweb.IBodyProducer",
    "Service": "twisted.application.service.Service",
    "StringTransport": "twisted.internet.testing.StringTransport",
    "MemoryReactorClock": "twisted.internet.testing.MemoryReactorClock",
    "Protocol": "twisted.internet.protocol.Protocol",
    "Interface": "zope.interface.Interface",
}

#: Standard-library names: the page of Python's library reference each is on.
PYTHON = {
    "datetime": "datetime.html", "timedelta": "datetime.html", "date": "datetime.html",
    "Enum": "enum.html", "StrEnum": "enum.html", "IntEnum": "enum.html",
    "Path": "pathlib.html", "PurePath": "pathlib.html",
    "Mapping": "collections.abc.html", "MutableMapping": "collections.abc.html",
    "Sequence": "collections.abc.html", "Iterable": "collections.abc.html",
    "Iterator": "collections.abc.html", "AsyncIterator": "collections.abc.html",
    "AsyncIterable": "collections.abc.html", "Callable": "collections.abc.html",
    "Awaitable": "collections.abc.html", "Coroutine": "collections.abc.html",
    "Generator": "collections.abc.html", "Collection": "collections.abc.html",
    "Any": "typing.html", "TypeVar": "typing.html", "Generic": "typing.html",
    "Self": "typing.html", "Literal": "typing.html", "Union": "typing.html",
    "Optional": "typing.html", "ClassVar": "typing.html", "NamedTuple": "typing.html",
    "BinaryIO": "typing.html", "IO": "typing.html", "Protocol": "typing.html",
    "Exception": "exceptions.html", "BaseException": "exceptions.html",
    "ValueError": "exceptions.html", "TypeError": "exceptions.html",
    "TimeoutError": "exceptions.html", "OSError": "exceptions.html",
    "KeyError": "exceptions.html", "RuntimeError": "exceptions.html",
    "int": "functions.html", "float": "functions.html", "str": "stdtypes.html",
    "bytes": "stdtypes.html", "bytearray": "stdtypes.html", "bool": "functions.html",
    "dict": "stdtypes.html", "list": "stdtypes.html", "tuple": "stdtypes.html",
    "set": "stdtypes.html", "frozenset": "stdtypes.html", "object": "functions.html",
    "type": "functions.html", "memoryview": "stdtypes.html", "None": "constants.html",
    "NoneType": "constants.html", "Ellipsis": "constants.html",
    "re.Pattern": "re.html", "Pattern": "re.html", "Logger": "logging.html",
    "SSLContext": "ssl.html", "subprocess.Popen": "subprocess.html",
    "Popen": "subprocess.html", "PathLike": "os.html", "TextIO": "typing.html",
    "Random": "random.html", "deque": "collections.html", "OrderedDict": "collections.html",
    "defaultdict": "collections.html", "Counter": "collections.html",
}
STDLIB_MODULES = ("collections.abc", "builtins", "collections", "typing", "random", "datetime",
                  "enum", "pathlib", "re", "ssl", "subprocess", "types", "os", "io", "asyncio",
                  "dataclasses")


def _pydoctor_page(target: str) -> str:
    """pydoctor's page for a Twisted name: one page per module and class, members as
    anchors on their class's or module's page."""
    parts = target.split(".")
    obj: Any = None
    for i in range(1, len(parts) + 1):
        head = ".".join(parts[:i])
        try:
            obj = importlib.import_module(head)
            continue
        except ImportError:
            pass
        obj = getattr(obj, parts[i - 1], None)
        if obj is None or (not isinstance(obj, type) and not hasattr(obj, "names")):
            page = ".".join(parts[:i - 1])
            return f"{page}.html#{parts[i - 1]}"
        if i < len(parts):
            return f"{head}.html#{parts[i]}"
    return f"{target}.html"


def _external(target: str) -> str | None:
    """The URL of a Twisted, zope or standard-library name, or None."""
    target = ALIASES.get(target, target)
    if target.startswith("twisted."):
        return TWISTED_API + _pydoctor_page(target)
    if target.startswith("zope."):
        return ZOPE_DOCS
    short = target
    for mod in STDLIB_MODULES:
        if target.startswith(mod + "."):
            short = target[len(mod) + 1:]
            break
    page = PYTHON.get(short) or PYTHON.get(target)
    if page:
        return f"{PYTHON_DOCS}{page}#{target if '.' in target else short}"
    return None


def _import(dotted: str) -> tuple[bool, Any]:
    """(True, the object) that a dotted name imports as (a module, then attributes)."""
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        except Exception:  # a module that fails to import is not ours to judge here
            return False, None
        for attr in parts[i:]:
            try:
                obj = getattr(obj, attr)
            except AttributeError:
                return False, None
        return True, obj
    return False, None


def _identity_key(obj: Any) -> int | None:
    """A key to recognise obj by, or None for values that equal ones could share."""
    if obj is None or isinstance(obj, int | float | str | bytes | bool | tuple):
        return None
    return id(obj)


def _documented(env: BuildEnvironment) -> tuple[dict[str, Any], dict[int, str]]:
    """The Python domain's objects, and the documented name of each object by identity."""
    domain = env.get_domain("py")
    objects = domain.objects  # type: ignore[attr-defined]
    cache = env.app.__dict__.setdefault("_txnats_identity", {})
    if cache.get("n") != len(objects):
        by_id: dict[int, str] = {}
        for full, entry in objects.items():
            if entry.aliased or entry.objtype == "module":
                continue
            ok, obj = _import(full)
            key = _identity_key(obj) if ok else None
            if key is not None:
                # The shortest name wins: txnats.Client over txnats.client.Client.
                if key not in by_id or len(full) < len(by_id[key]):
                    by_id[key] = full
        cache.update(n=len(objects), by_id=by_id)
    return objects, cache["by_id"]


def _ours(env: BuildEnvironment, node: pending_xref, target: str) -> str | None:
    """The documented name of the txnats object target names, or None.

    The name is tried as it is, then inside the class and module the reference is
    made from; what it imports as is then looked up among the documented objects by
    identity (``txnats.client.Client`` is ``txnats.Client``), else by its last dotted
    parts. A module that is not documented stands for the documented package above it.
    """
    objects, by_id = _documented(env)
    name = target.lstrip("~.")
    if name in objects:
        return name
    module, cls = node.get("py:module"), node.get("py:class")
    candidates = [name]
    home = _home_module(module, cls)
    if home:
        candidates += [f"{home}.{cls}.{name}", f"{home}.{name}"]
    if module:
        candidates += [f"{module}.{cls}.{name}"] if cls else []
        candidates += [f"{module}.{name}"]
        head = module
        while "." in head:
            head = head.rsplit(".", 1)[0]
            candidates.append(f"{head}.{name}")
    for candidate in candidates:
        ok, obj = _import(candidate)
        if not ok:
            continue
        if inspect.ismodule(obj):
            while candidate and candidate not in objects:
                candidate = candidate.rpartition(".")[0]
            return candidate or None
        key = _identity_key(obj)
        if key is not None and key in by_id:
            return by_id[key]
        if candidate in objects:
            return candidate
    tail = name.split(".")
    for cut in range(len(tail) - 1):
        suffix = "." + ".".join(tail[cut:])
        found = [full for full in objects if full.endswith(suffix) and "._" not in full]
        if len(found) == 1:
            return found[0]
    return None


def _home_module(module: str | None, cls: str | None) -> str | None:
    """The module that defines the object a docstring belongs to (autodoc's context is
    the package documenting it: ``txnats.jetstream`` for ``txnats.jetstream.kv``)."""
    if not module:
        return None
    ok, obj = _import(f"{module}.{cls}" if cls else module)
    home = getattr(obj, "__module__", None) if ok else None
    return home if isinstance(home, str) and home != module else None


def _undocumented_but_real(node: pending_xref, target: str) -> bool:
    """Whether target names a txnats object that exists but is not in the reference:
    a module-level name, or an instance attribute its class's ``__init__`` sets."""
    name = target.lstrip("~.")
    module, cls = node.get("py:module"), node.get("py:class")
    home = _home_module(module, cls) or module
    places = [name, f"{module}.{cls}.{name}", f"{module}.{name}", f"{home}.{cls}.{name}",
              f"{home}.{name}"]
    if any(p.startswith("txnats.") and _import(p)[0] for p in places):
        return True
    if cls and node.get("reftype") == "attr":
        ok, klass = _import(f"{module}.{cls}")
        try:
            source = inspect.getsource(klass) if ok else ""
        except (OSError, TypeError):
            source = ""
        return re.search(rf"\bself\.{re.escape(name)}\s*[:=]", source) is not None
    return False


#: Internal names the signatures show (type aliases, base classes and protocols of
#: private modules): shown as they are, without a link, as nothing documents them.
INTERNAL = {"HeaderInput", "T", "PullOptions", "JsonName", "JsonObject", "_Keep", "Seconds",
            "SubscriptionHost"}


def _internal(target: str) -> bool:
    """Whether target is a private txnats name (or a type variable) nothing documents."""
    if target in INTERNAL:
        return True
    return target.startswith("txnats.") and any(p.startswith("_") for p in target.split("."))


def missing_reference(
    app: Sphinx, env: BuildEnvironment, node: pending_xref, contnode: nodes.Element
) -> nodes.Element | None:
    """Resolve what the Python domain could not: our short names, then external ones."""
    if node.get("refdomain") != "py":
        return None
    target = node["reftarget"]
    if target.startswith("<InterfaceClass ") and target.endswith(">"):
        target = target[len("<InterfaceClass "):-1]
    if _internal(target):
        return contnode
    full = _ours(env, node, target)
    if full is not None:
        entry = env.get_domain("py").objects[full]  # type: ignore[attr-defined]
        ref = nodes.reference("", "", internal=True)
        ref["refuri"] = app.builder.get_relative_uri(node["refdoc"], entry.docname)
        ref["refuri"] += "#" + entry.node_id
        ref["reftitle"] = full
        ref.append(contnode)
        return ref
    url = _external(target)
    if url is not None:
        ref = nodes.reference("", "", internal=False, refuri=url, reftitle=target)
        ref.append(contnode)
        return ref
    if _undocumented_but_real(node, target):
        return contnode
    return None


def setup(app: Sphinx) -> dict[str, Any]:
    """Register the resolver (after the Python domain's own, which runs first)."""
    app.connect("missing-reference", missing_reference, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
