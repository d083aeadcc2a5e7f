"""The connection flags (and the context, and the environment) turned into a
connected client, and a JetStream context on it."""

from __future__ import annotations

import argparse
import os
from typing import Any

from twisted.internet.interfaces import IReactorCore

from txnats._connect import connect
from txnats.cli._common import CLIError, fail, one_line
from txnats.cli._context import Settings, resolve
from txnats.client import Client
from txnats.errors import NatsError
from txnats.jetstream import JetStreamContext

__all__ = [
    "connect_kwargs", "connect_to", "open_jetstream", "run_verb", "servers", "settings",
]

#: Connect options naming a file, and the flag (or context field) that gives each.
_FILES = (
    ("user_credentials", "--creds"), ("nkeys_seed_file", "--nkey"),
    ("tls_ca_file", "--tls-ca"), ("tls_cert_file", "--tls-cert"),
    ("tls_key_file", "--tls-key"),
)


def settings(args: argparse.Namespace) -> Settings:
    """The connection settings of the flags, the environment and the context, with
    the files they name checked.

    :raises CLIError: a file that is not there, or what :func:`resolve` refuses.
    """
    found = resolve(args)
    for option, flag in _FILES:
        path = found.connect.get(option)
        if path is not None and not os.path.isfile(path):
            where = f" (context {found.context!r})" if found.context else ""
            fail(f"{flag}: no such file: {path}{where}")
    return found


def servers(args: argparse.Namespace) -> list[str]:
    """The server URLs: ``--server`` (repeated or comma-separated), else $NATS_URL,
    else the context's, else the default."""
    return settings(args).servers


def _kwargs(args: argparse.Namespace, found: Settings) -> dict[str, Any]:
    return {
        "name": getattr(args, "connection_name", None) or "txnats-cli",
        "connect_timeout": getattr(args, "connect_timeout", 2.0),
        **found.connect,
    }


def connect_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for txnats.connect from the connection flags and context."""
    return _kwargs(args, settings(args))


async def connect_to(reactor: IReactorCore, args: argparse.Namespace) -> Client:
    """A client connected as the connection flags (and the context) say."""
    found = settings(args)
    return await connect(reactor, found.servers, **_kwargs(args, found))


async def open_jetstream(
    reactor: IReactorCore, args: argparse.Namespace
) -> tuple[Client, JetStreamContext]:
    """A connected client and its JetStream context: the domain or API prefix of the
    flags or the context, and ``--timeout`` seconds for each API request.

    :raises CLIError: a domain and a prefix both given.
    """
    found = settings(args)
    if found.js_domain and found.js_api_prefix:
        fail("give a JetStream domain or an API prefix, not both", 2)
    nc = await connect(reactor, found.servers, **_kwargs(args, found))
    try:
        js = nc.jetstream(
            domain=found.js_domain or None, prefix=found.js_api_prefix or None,
            timeout=getattr(args, "timeout", 5.0),
        )
    except BaseException:
        await nc.close()
        raise
    return nc, js


async def run_verb(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """Run a JetStream command's verb (``args.verb``, set by its parser) on a fresh
    connection, closed afterwards; an error the library reports names the verb."""
    nc, js = await open_jetstream(reactor, args)
    try:
        code: int = await args.verb(reactor, js, args)
    except NatsError as e:
        raise CLIError(f"{args.command} {args.verb_name}: {one_line(e)}") from e
    finally:
        await nc.close()
    return code
