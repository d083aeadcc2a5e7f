"""NATS configuration contexts (ADR-21): the files the ``nats`` CLI keeps, read and
written the same way, so that one ``nats context add`` serves both tools.

A context is a JSON object of connection settings in
``$XDG_CONFIG_HOME/nats/context/NAME.json`` (``~/.config`` without
``XDG_CONFIG_HOME``); ``nats/context.txt`` holds the name of the selected one and
``nats/previous-context.txt`` the one selected before it. Files are written whole
(a temporary file renamed into place), readable by their owner only.

:func:`resolve` turns the command line's connection flags, the environment
(``NATS_CONTEXT``, ``NATS_URL``, ``NATS_USER``, ...) and the chosen context into
:class:`Settings`: a flag (or its environment variable) wins over the context's value,
as in ``nats``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from txnats.cli._common import CLIError, fail
from txnats.options import DEFAULT_URL

__all__ = [
    "FIELDS",
    "SECRETS",
    "Settings",
    "check_name",
    "config_root",
    "context_path",
    "delete",
    "list_names",
    "load",
    "masked",
    "resolve",
    "save",
    "select",
    "selected",
]

#: Every key of a context file (ADR-21, and what ``nats`` writes), in its order; a
#: file holds all of them, empty when unset, as ``nats`` writes it.
FIELDS: tuple[str, ...] = (
    "description", "url", "socks_proxy", "token", "user", "password", "creds", "nkey",
    "cert", "key", "ca", "nsc", "jetstream_domain", "jetstream_api_prefix",
    "jetstream_event_prefix", "inbox_prefix", "user_jwt", "user_seed", "color_scheme",
    "tls_first", "windows_cert_store", "windows_cert_match_by", "windows_cert_match",
    "windows_ca_certs_match",
)

#: Fields whose values are secrets: never printed, only masked.
SECRETS = frozenset({"password", "token", "user_seed"})

#: What a secret is shown as.
MASK = "********"

#: Fields naming a file (``~`` and ``$VAR`` are expanded in them, as ``nats`` does).
_PATHS = ("creds", "nkey", "cert", "key", "ca")

#: Fields whose value may be a reference (``env://NAME``, ``file://PATH``).
_REFERENCES = frozenset({"password", "token", *_PATHS})

#: Fields txnats cannot act on: setting one is an error rather than a silent change of
#: how the connection is made.
_UNSUPPORTED = {
    "nsc": "nsc lookups",
    "socks_proxy": "SOCKS proxies",
    "user_jwt": "a user JWT without a credentials file",
    "user_seed": "a user seed without a credentials file",
    "windows_cert_store": "the Windows certificate store",
}

#: The environment variables ``nats`` reads for its connection flags: the flag's dest
#: here, and the variable.
_ENVIRONMENT = (
    ("user", "NATS_USER"), ("password", "NATS_PASSWORD"), ("token", "NATS_TOKEN"),
    ("creds", "NATS_CREDS"), ("nkey", "NATS_NKEY"), ("tls_cert", "NATS_CERT"),
    ("tls_key", "NATS_KEY"), ("tls_ca", "NATS_CA"),
)


# ====================================================================== the files
def config_root() -> Path:
    """``$XDG_CONFIG_HOME``, else ``~/.config`` (``$HOME`` decides ``~``)."""
    xdg = os.environ.get("XDG_CONFIG_HOME")
    if xdg:
        return Path(xdg)
    return Path(os.path.expanduser("~")) / ".config"


def _nats_dir() -> Path:
    return config_root() / "nats"


def check_name(name: str) -> str:
    """``name`` if it can name a context file.

    :raises CLIError: empty, or holding ``..``, ``/`` or ``\\``.
    """
    if not name:
        fail("a context name must not be empty", 2)
    if ".." in name or "/" in name or "\\" in name:
        fail(f"bad context name {name!r}: it must not contain '..', '/' or '\\'", 2)
    return name


def context_path(name: str) -> Path:
    """The file of context ``name``."""
    return _nats_dir() / "context" / f"{check_name(name)}.json"


def list_names() -> list[str]:
    """The names of the stored contexts, sorted (empty files and bad names skipped,
    as ``nats`` skips them)."""
    folder = _nats_dir() / "context"
    try:
        entries = list(folder.iterdir())
    except FileNotFoundError:
        return []
    names = []
    for entry in entries:
        if entry.suffix != ".json" or not entry.is_file() or entry.stat().st_size == 0:
            continue
        name = entry.stem
        if name and ".." not in name and "\\" not in name:
            names.append(name)
    return sorted(names)


def _read_selection(filename: str) -> str | None:
    try:
        text = (_nats_dir() / filename).read_text().strip()
    except (FileNotFoundError, NotADirectoryError):
        return None
    return text or None


def selected() -> str | None:
    """The selected context's name (``context.txt``), or None."""
    return _read_selection("context.txt")


def _write_atomically(path: Path, text: str) -> None:
    """Write ``path`` whole, readable by its owner only (folders made: owner only)."""
    missing = [p for p in (path.parent, *path.parent.parents) if not p.exists()]
    for folder in reversed(missing):
        folder.mkdir(mode=0o700, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".tmp-", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as f:
            os.fchmod(f.fileno(), 0o600)
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def select(name: str | None) -> str | None:
    """Select context ``name`` (None: select none); return the one selected before,
    which becomes the previous one (``previous-context.txt``).

    :raises CLIError: there is no context ``name``.
    """
    if name is not None and not context_path(name).is_file():
        fail(f"unknown context {name!r}")
    before = selected()
    _write_atomically(_nats_dir() / "context.txt", name or "")
    if before and before != name:
        _write_atomically(_nats_dir() / "previous-context.txt", before)
    return before


def load(name_or_file: str) -> tuple[str, dict[str, Any]]:
    """The context called ``name_or_file``, or in that file if it is the path of an
    existing ``.json`` file: its name and its fields (every one of :data:`FIELDS`,
    unset ones empty, and any others the file holds).

    :raises CLIError: no such context, or a file that is not a JSON object.
    """
    given = Path(name_or_file)
    if name_or_file.endswith(".json") and given.is_file():
        path, name = given, given.stem
    else:
        path, name = context_path(name_or_file), name_or_file
    try:
        text = path.read_text()
    except FileNotFoundError:
        fail(f"unknown context {name!r}")
    except OSError as e:
        fail(f"cannot read context {name!r}: {e.strerror or e}")
    try:
        data = json.loads(text)
    except ValueError as e:
        fail(f"context {name!r} ({path}) is not valid JSON: {e}")
    if not isinstance(data, dict):
        fail(f"context {name!r} ({path}) is not a JSON object")
    return name, {**{k: _empty(k) for k in FIELDS}, **data}


def _empty(key: str) -> Any:
    if key == "tls_first":
        return False
    if key == "windows_ca_certs_match":
        return None
    return ""


def save(name: str, data: Mapping[str, Any]) -> Path:
    """Write context ``name`` (every field of :data:`FIELDS`, then any others the data
    holds; the name itself is not stored); return its path."""
    path = context_path(name)
    body = {k: data.get(k, _empty(k)) for k in FIELDS}
    body.update((k, v) for k, v in data.items() if k not in body and k != "name")
    _write_atomically(path, json.dumps(body, indent=2) + "\n")
    return path


def delete(name: str) -> None:
    """Remove context ``name`` (none: nothing to do)."""
    try:
        context_path(name).unlink()
    except FileNotFoundError:
        pass


def masked(data: Mapping[str, Any]) -> dict[str, Any]:
    """``data`` with every secret that is set replaced by a mask."""
    return {k: (MASK if k in SECRETS and v else v) for k, v in data.items()}


# ====================================================================== settings
@dataclass
class Settings:
    """How to connect: the servers, the keyword arguments of ``txnats.connect``, and
    the JetStream domain or API prefix, from the flags and the context."""

    servers: list[str]
    connect: dict[str, Any] = field(default_factory=dict)
    js_domain: str | None = None
    js_api_prefix: str | None = None
    #: The context used, if any.
    context: str | None = None


def _chosen(args: argparse.Namespace) -> str | None:
    if getattr(args, "no_context", False):
        return None
    name: str | None = getattr(args, "context", None) or os.environ.get("NATS_CONTEXT")
    return name or selected()


def _reference(field_name: str, value: str) -> str:
    """A secret or file field's value, which may be a reference: ``env://NAME`` (the
    variable's value) or ``file://PATH`` (the path); ``~`` and ``$VAR`` are expanded in
    paths. The other schemes ``nats`` knows (``op://``, ``nsc://``, ``data:``) are
    refused, naming the field.
    """
    scheme, sep, rest = value.partition("://")
    if value.startswith("data:"):
        fail(f"context {field_name}: embedded data is not supported by txnats")
    if sep and scheme == "env":
        found = os.environ.get(rest)
        if found is None:
            fail(f"context {field_name}: environment variable {rest} is not set")
        return found
    if sep and scheme == "file":
        value = rest
    elif sep and scheme.isalnum():
        fail(f"context {field_name}: {scheme}:// references are not supported by txnats")
    if field_name in _PATHS:
        value = os.path.expanduser(os.path.expandvars(value))
    return value


def _from_context(name: str | None) -> dict[str, Any]:
    """The chosen context's fields that apply, references resolved."""
    if name is None:
        return {}
    _, data = load(name)
    for key, what in _UNSUPPORTED.items():
        if data.get(key):
            fail(f"context {name!r} sets {key}: {what} are not supported by txnats")
    out: dict[str, Any] = {}
    for key, value in data.items():
        if key in FIELDS and isinstance(value, str) and value:
            out[key] = _reference(key, value) if key in _REFERENCES else value
    if data.get("tls_first"):
        out["tls_first"] = True
    return out


def _flag(args: argparse.Namespace, dest: str, env: str | None = None) -> Any:
    value = getattr(args, dest, None)
    if value is None and env is not None:
        value = os.environ.get(env) or None
    return value


def _split(items: list[str]) -> list[str]:
    return [u.strip() for item in items for u in item.split(",") if u.strip()]


def resolve(args: argparse.Namespace) -> Settings:
    """The settings the flags, the environment and the context give.

    :raises CLIError: an unknown or unreadable context, one setting what txnats cannot
        do, ``--password`` without a user, or no server URL.
    """
    name = _chosen(args)
    ctx = _from_context(name)
    given: list[str] | None = args.server if getattr(args, "server", None) else None
    if given is None and os.environ.get("NATS_URL"):
        given = [os.environ["NATS_URL"]]
    urls = _split(given if given is not None else [ctx.get("url") or DEFAULT_URL])
    if not urls:
        fail("--server: no server URL given", 2)
    env = {dest: _flag(args, dest, var) for dest, var in _ENVIRONMENT}
    kwargs = _credentials(env, ctx)
    for dest, key, option in (("tls_ca", "ca", "tls_ca_file"),
                              ("tls_cert", "cert", "tls_cert_file"),
                              ("tls_key", "key", "tls_key_file")):
        value = env[dest] or ctx.get(key)
        if value is not None:
            kwargs[option] = value
    inbox = _flag(args, "inbox_prefix") or ctx.get("inbox_prefix")
    if inbox:
        kwargs["inbox_prefix"] = inbox
    if ctx.get("tls_first") or getattr(args, "tls_first", False):
        kwargs["tls_handshake_first"] = True
    return Settings(
        servers=urls, connect=kwargs, context=name,
        js_domain=_flag(args, "js_domain") or ctx.get("jetstream_domain"),
        js_api_prefix=_flag(args, "js_api_prefix") or ctx.get("jetstream_api_prefix"),
    )


def _credentials(env: Mapping[str, Any], ctx: Mapping[str, Any]) -> dict[str, Any]:
    """User and password, token, credentials file, NKey: the flags' where given (a
    user given by flag replaces the context's user and password), else the context's."""
    kwargs: dict[str, Any] = {}
    if env["user"] is not None:
        kwargs["user"] = env["user"]
        kwargs["password"] = env["password"] or ""
    elif env["password"] is not None:
        if not ctx.get("user"):
            raise CLIError("--password needs --user", 2)
        kwargs["user"], kwargs["password"] = ctx["user"], env["password"]
    elif ctx.get("user"):
        kwargs["user"] = ctx["user"]
        kwargs["password"] = ctx.get("password", "")
    token = env["token"] or ctx.get("token")
    if token:
        kwargs["token"] = token
    creds = env["creds"] or ctx.get("creds")
    if creds:
        kwargs["user_credentials"] = creds
    nkey = env["nkey"] or ctx.get("nkey")
    if nkey:
        kwargs["nkeys_seed_file"] = nkey
    return kwargs
