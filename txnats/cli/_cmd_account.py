"""The ``account`` command: ``account info``, the connection, the user (as the server
tells it, on ``$SYS.REQ.USER.INFO``) and the account's JetStream usage and limits, as
``nats account info`` shows them."""

from __future__ import annotations

import argparse
import json
from typing import Any

from twisted.internet.interfaces import IReactorCore

from txnats.cli._connection import run_verb
from txnats.cli._flags import Parser, Subcommands, add_command, add_verb, add_verbs
from txnats.cli._render import columns, human_bytes, human_count, limit, print_json
from txnats.errors import JetStreamNotEnabledError, NatsError
from txnats.jetstream import AccountInfo, JetStreamContext

__all__ = ["add_account", "run_account"]


def add_account(commands: Subcommands, conn: Parser) -> None:
    """The ``account`` command and its ``info`` verb."""
    p = add_command(
        commands, "account", "show the account's information",
        "What the server says of this connection's user and account, and the\n"
        "account's JetStream usage and limits.\n\n  txnats account info\n"
        "  txnats account info --json",
        None,
    )
    verbs = add_verbs(p, "account_verb")
    v = add_verb(verbs, "info", _info, "show the account's information",
                 "Show the connection, the user and account, and JetStream's usage and\n"
                 "limits for the account.\n\n  txnats account info", conn)
    v.add_argument("-j", "--json", action="store_true", help="print it as JSON")


async def run_account(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats account VERB``."""
    return await run_verb(reactor, args)


async def _user_info(js: JetStreamContext) -> dict[str, Any] | None:
    """``$SYS.REQ.USER.INFO``'s answer (server 2.10+), or None if it gave none."""
    try:
        msg = await js.client.request("$SYS.REQ.USER.INFO", b"", timeout=1.0)
        answer = json.loads(msg.data)
    except (NatsError, ValueError):
        return None
    data = answer.get("data") if isinstance(answer, dict) else None
    return data if isinstance(data, dict) and not answer.get("error") else None


def _connection(js: JetStreamContext, rtt: float | None) -> dict[str, Any]:
    nc = js.client
    server = nc.server_info
    return {
        "client_id": nc.client_id, "connected_url": nc.connected_url,
        "server_id": server.get("server_id"), "server_name": server.get("server_name"),
        "server_version": server.get("version"), "cluster": server.get("cluster"),
        "max_payload": server.get("max_payload"), "headers": bool(server.get("headers")),
        "tls_required": bool(server.get("tls_required")), "rtt": rtt,
    }


def _jetstream_rows(info: AccountInfo | None) -> list[tuple[str, object] | None]:
    if info is None:
        return [("", "JetStream"), ("JetStream", "not enabled for this account")]
    lim = info.limits
    return [
        ("", "JetStream Account Information" + (f" for domain {info.domain}"
                                               if info.domain else "")),
        ("Storage", f"{human_bytes(info.storage)} of {limit(lim.max_storage, human_bytes)}"),
        ("Memory", f"{human_bytes(info.memory)} of {limit(lim.max_memory, human_bytes)}"),
        ("Streams", f"{human_count(info.streams)} of {limit(lim.max_streams)}"),
        ("Consumers", f"{human_count(info.consumers)} of {limit(lim.max_consumers)}"),
        ("Max Ack Pending", limit(lim.max_ack_pending)),
        ("Stream Requires Max Bytes", lim.max_bytes_required),
        ("API Requests", f"{human_count(info.api.total)} ({human_count(info.api.errors)} errors)"),
    ]


async def _info(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    rtt = await js.client.rtt(timeout=args.timeout)
    user = await _user_info(js)
    try:
        account: AccountInfo | None = await js.account_info()
    except JetStreamNotEnabledError:
        account = None
    conn = _connection(js, rtt)
    if args.json:
        print_json({"connection": conn, "user": user,
                    "jetstream": account.to_json() if account else None})
        return 0
    rows: list[tuple[str, object] | None] = [("", "Connection")]
    if user is not None:
        rows += [("User", user.get("user") or "-"), ("Account", user.get("account") or "-")]
    rows += [
        ("Client ID", conn["client_id"]), ("Connected URL", conn["connected_url"]),
        ("Server", conn["server_id"] if conn["server_name"] in (None, conn["server_id"])
         else f"{conn['server_name']} ({conn['server_id']})"),
        ("Server Version", conn["server_version"]),
        ("Cluster", conn["cluster"]) if conn["cluster"] else None,
        ("RTT", f"{rtt * 1000:.2f}ms"), ("Headers Supported", conn["headers"]),
        ("Maximum Payload", human_bytes(conn["max_payload"] or 0)),
        ("TLS", conn["tls_required"]),
        *_jetstream_rows(account),
    ]
    print(columns("Account Information", rows), flush=True)
    return 0
