"""The ``context`` command: ``ls``, ``show``, ``select``, ``unselect``, ``add`` and
``rm`` of the configuration contexts (ADR-21) the ``nats`` CLI keeps; see
:mod:`txnats.cli._context` for the files. Secrets (password, token, seed) are never
printed: they show as ``********``, in JSON too."""

from __future__ import annotations

import argparse
import os
from typing import Any

from twisted.internet.interfaces import IReactorCore

from txnats.cli import _context as contexts
from txnats.cli._common import CLIError, confirm, fail, status
from txnats.cli._flags import Parser, Subcommands, add_command, add_verbs
from txnats.cli._render import columns, print_json, table

__all__ = ["add_context", "run_context"]

#: The environment variables that override a context's settings (as ``nats`` warns).
_OVERRIDES = ("NATS_URL", "NATS_USER", "NATS_PASSWORD", "NATS_TOKEN", "NATS_CREDS",
              "NATS_NKEY", "NATS_CERT", "NATS_KEY", "NATS_CA")

#: ``context add``'s flags: the flag, the context field, its help.
_ADD_FLAGS = (
    ("--server", "url", "the server URLs, comma-separated"),
    ("--user", "user", "the user name"),
    ("--password", "password", "the user's password"),
    ("--token", "token", "an authentication token"),
    ("--creds", "creds", "a credentials file (JWT and seed)"),
    ("--nkey", "nkey", "an NKey seed file"),
    ("--tlscert", "cert", "a client certificate file (PEM)"),
    ("--tlskey", "key", "the client certificate's key file (PEM)"),
    ("--tlsca", "ca", "CA certificates to verify the server (PEM)"),
    ("--js-domain", "jetstream_domain", "the JetStream domain"),
    ("--js-api-prefix", "jetstream_api_prefix", "the JetStream API prefix"),
    ("--js-event-prefix", "jetstream_event_prefix", "the JetStream event prefix"),
    ("--inbox-prefix", "inbox_prefix", "the prefix of reply inboxes"),
    ("--description", "description", "what the context is for"),
)


def _verb(verbs: Subcommands, name: str, run: Any, help: str, text: str,
          aliases: tuple[str, ...] = ()) -> Parser:
    v = add_command(verbs, name, help, text, None, aliases)
    v.set_defaults(context_run=run)
    return v


def add_context(commands: Subcommands) -> None:
    """The ``context`` command and its verbs."""
    p = add_command(
        commands, "context", "manage configuration contexts (shared with 'nats')",
        "Named connection settings, in the files the 'nats' CLI keeps\n"
        "($XDG_CONFIG_HOME/nats/context/NAME.json, or ~/.config/nats/...): a context\n"
        "added with 'nats context add' serves txnats, and the other way round.\n"
        "Every client command takes --context NAME (default: $NATS_CONTEXT, else\n"
        "the selected context); its flags win over the context's settings.\n\n"
        "  txnats context add local --server nats://127.0.0.1:4222 --select\n"
        "  txnats context ls\n"
        "  txnats context show local --json",
        None, aliases=["ctx"],
    )
    p.set_defaults(command="context")
    verbs = add_verbs(p, "context_verb")
    v = _verb(verbs, "ls", _ls, "list the contexts",
              "List the contexts; the selected one is marked *.", ("list",))
    v.add_argument("-n", "--names", action="store_true", help="print only the names")
    v.add_argument("-j", "--json", action="store_true", help="print them as JSON")
    v = _verb(verbs, "show", _show, "show a context",
              "Show context NAME (default: the selected one); secrets are masked.",
              ("info",))
    v.add_argument("name", metavar="NAME", nargs="?")
    v.add_argument("-j", "--json", action="store_true", help="print it as JSON")
    v = _verb(verbs, "select", _select, "select the default context",
              "Select context NAME: commands use it when no --context is given.")
    v.add_argument("name", metavar="NAME")
    _verb(verbs, "unselect", _unselect, "select no context", "Select no context.")
    v = _verb(verbs, "add", _add, "create or change a context",
              "Create context NAME, or change the settings the flags give of an\n"
              "existing one.\n\n  txnats context add hub --server nats://hub:4222 "
              "--creds ~/hub.creds", ("create",))
    v.add_argument("name", metavar="NAME")
    for flag, key, help_ in _ADD_FLAGS:
        names = ["-s", flag] if flag == "--server" else [flag]
        v.add_argument(*names, dest=key, metavar=key.upper() if key != "url" else "URLS",
                       help=help_)
    v.add_argument("--tls-first", action="store_true", default=None, dest="tls_first",
                   help="start TLS before the server's greeting")
    v.add_argument("--select", action="store_true", help="select it")
    v = _verb(verbs, "rm", _rm, "remove a context",
              "Remove context NAME; asks first unless --force.", ("remove",))
    v.add_argument("name", metavar="NAME")
    v.add_argument("-f", "--force", action="store_true", help="do not ask")


async def run_context(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats context VERB``."""
    code: int = await args.context_run(reactor, args)
    return code


# ====================================================================== output
def _check_file(path: str) -> str:
    if path.startswith(("env://", "op://", "nsc://")):
        return path.split("://", 1)[0]
    if path.startswith("data:"):
        return "embedded"
    local = os.path.expanduser(os.path.expandvars(path.removeprefix("file://")))
    return "OK" if os.access(local, os.R_OK) else "ERROR"


def describe(name: str, data: dict[str, Any], path: str) -> str:
    """A context for people, its secrets masked, its files checked."""
    shown = contexts.masked(data)

    def row(label: str, key: str) -> tuple[str, object] | None:
        value = shown.get(key)
        return (label, value) if value else None

    def file_row(label: str, key: str) -> tuple[str, object] | None:
        value = data.get(key)
        return (label, f"{value} ({_check_file(value)})") if value else None

    rows = [
        row("Description", "description"), row("Server URLs", "url"),
        row("Username", "user"), row("Password", "password"), row("Token", "token"),
        file_row("Credentials", "creds"), file_row("NKey", "nkey"),
        file_row("Certificate", "cert"), file_row("Key", "key"), file_row("CA", "ca"),
        ("TLS First", True) if data.get("tls_first") else None,
        row("JS API Prefix", "jetstream_api_prefix"),
        row("JS Event Prefix", "jetstream_event_prefix"),
        row("JS Domain", "jetstream_domain"), row("Inbox Prefix", "inbox_prefix"),
        row("NSC Lookup", "nsc"), row("SOCKS5 Proxy", "socks_proxy"),
        ("Path", path),
    ]
    return columns(f'NATS Configuration Context "{name}"', [("", "Settings"), *rows])


# ====================================================================== verbs
async def _ls(reactor: IReactorCore, args: argparse.Namespace) -> int:
    names = contexts.list_names()
    current = contexts.selected()
    if args.names:
        if names:
            print("\n".join(names), flush=True)
        return 0
    loaded = []
    for name in names:
        try:
            loaded.append((name, contexts.load(name)[1]))
        except CLIError as e:
            status(f"Could not load context {name}: {e}")
    if args.json:
        print_json([{"name": n, **contexts.masked(d)} for n, d in loaded])
        return 0
    if not loaded:
        status("No known contexts")
        return 0
    rows = [[n + ("*" if n == current else ""), d.get("description") or ""] for n, d in loaded]
    print(table(["Name", "Description"], rows), flush=True)
    return 0


async def _show(reactor: IReactorCore, args: argparse.Namespace) -> int:
    given = args.name or contexts.selected()
    if not given:
        fail("no context selected and no NAME given", 2)
    name, data = contexts.load(given)
    if args.json:
        print_json({"name": name, **contexts.masked(data)})
        return 0
    path = given if given.endswith(".json") and os.path.isfile(given) else (
        contexts.context_path(name))
    print(describe(name, data, str(path)), flush=True)
    overrides = [v for v in _OVERRIDES if os.environ.get(v)]
    if overrides:
        status(f"WARNING: shell environment overrides in place: {', '.join(overrides)}")
    return 0


async def _select(reactor: IReactorCore, args: argparse.Namespace) -> int:
    contexts.select(args.name)
    status(f"Selected context {args.name!r}")
    name, data = contexts.load(args.name)
    print(describe(name, data, str(contexts.context_path(name))), flush=True)
    return 0


async def _unselect(reactor: IReactorCore, args: argparse.Namespace) -> int:
    before = contexts.select(None)
    status(f"Unselected context {before!r}" if before else "No context was selected")
    return 0


async def _add(reactor: IReactorCore, args: argparse.Namespace) -> int:
    contexts.check_name(args.name)
    try:
        _, data = contexts.load(args.name)
    except CLIError:
        data = {}
    for _, key, _ in _ADD_FLAGS:
        if getattr(args, key) is not None:
            data[key] = getattr(args, key)
    if args.tls_first:
        data["tls_first"] = True
    if not data.get("url"):
        data["url"] = "nats://127.0.0.1:4222"
    path = contexts.save(args.name, data)
    status(f"Saved context {args.name!r} in {path}")
    if args.select:
        contexts.select(args.name)
        status(f"Selected context {args.name!r}")
    print(describe(args.name, contexts.load(args.name)[1], str(path)), flush=True)
    return 0


async def _rm(reactor: IReactorCore, args: argparse.Namespace) -> int:
    name = contexts.check_name(args.name)
    if not contexts.context_path(name).is_file():
        fail(f"unknown context {name!r}")
    if contexts.selected() == name:
        if not args.force:
            fail(f"context {name!r} is selected: select another (or 'context unselect'), "
                 "or give --force")
        contexts.select(None)
    if await confirm(reactor, f"Really delete context {name!r}", args.force):
        contexts.delete(name)
        status(f"Deleted context {name!r}")
    return 0
