"""The ``stream`` command: ``ls``, ``info``, ``add``, ``edit``, ``rm``, ``purge``,
``get`` and ``view`` of JetStream streams, with ``nats``'s names and flags.

Each verb is one function below, the one place it calls the library; ``view`` is in
:mod:`txnats.cli._stream_view`.
"""

from __future__ import annotations

import argparse
from typing import Any

from twisted.internet.interfaces import IReactorCore

from txnats.cli._common import confirm, fail, on_terminal, status
from txnats.cli._connection import run_verb
from txnats.cli._flags import Parser, Subcommands, add_command, add_verb, add_verbs, count
from txnats.cli._render import (
    columns,
    data_text,
    headers_dict,
    human_bytes,
    human_count,
    human_seconds,
    limit,
    print_json,
    stdout_bytes,
    table,
    when,
)
from txnats.cli._stream_config import add_config_flags, config_changes, read_config_file
from txnats.cli._stream_view import add_view_flags, view
from txnats.jetstream import JetStreamContext, RawStreamMsg, StreamConfig, StreamInfo

__all__ = ["add_stream", "run_stream"]

#: Name prefixes of the streams behind the stores and MQTT: left out of ``ls`` unless
#: ``--all`` (as ``nats`` does).
_SYSTEM = ("KV_", "OBJ_", "$MQTT_")


# ====================================================================== flags
def add_stream(commands: Subcommands, conn: Parser) -> None:
    """The ``stream`` command and its verbs."""
    p = add_command(
        commands, "stream", "manage JetStream streams",
        "Create, change, inspect, purge and remove JetStream streams, and read the\n"
        "messages they hold.\n\n"
        "  txnats stream add ORDERS --subjects 'orders.>' --max-age 7d\n"
        "  txnats stream ls\n"
        "  txnats stream info ORDERS --json\n"
        "  txnats stream view ORDERS --since 1h",
        None, aliases=["str"],
    )
    p.set_defaults(command="stream")
    verbs = add_verbs(p, "stream_verb")
    v = add_verb(verbs, "ls", _ls, "list the streams",
                 "List the streams: name, description, created, messages, size, last\n"
                 "message. The streams of key-value and object stores are left out\n"
                 "unless --all.\n\n  txnats stream ls\n  txnats stream ls --names",
                 conn, aliases=["list"])
    v.add_argument("--subject", help="only the streams taking SUBJECT")
    v.add_argument("-n", "--names", action="store_true", help="print only the names")
    v.add_argument("-a", "--all", action="store_true",
                   help="include the streams of key-value and object stores")
    v.add_argument("-j", "--json", action="store_true", help="print the names as JSON")

    v = add_verb(verbs, "info", _info, "describe a stream",
                 "Show a stream's configuration and state.\n\n  txnats stream info ORDERS",
                 conn)
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("--state", action="store_true", help="show only the state")
    v.add_argument("-j", "--json", action="store_true", help="print the server's JSON")

    v = add_verb(verbs, "add", _add, "create a stream",
                 "Create a stream; flags left out take the server's defaults (its\n"
                 "subjects: its name).\n\n"
                 "  txnats stream add ORDERS --subjects 'orders.>' --storage memory\n"
                 "  txnats stream add --config orders.json",
                 conn, aliases=["create"])
    v.add_argument("stream", metavar="STREAM", nargs="?")
    add_config_flags(v, creating=True)
    v.add_argument("-j", "--json", action="store_true", help="print the new stream's JSON")

    v = add_verb(verbs, "edit", _edit, "change a stream's configuration",
                 "Change what the flags say of a stream's configuration (or all of it,\n"
                 "with --config); asks first unless --force.\n\n"
                 "  txnats stream edit ORDERS --max-age 30d -f",
                 conn, aliases=["update"])
    v.add_argument("stream", metavar="STREAM")
    add_config_flags(v, creating=False)
    v.add_argument("-f", "--force", action="store_true", help="do not ask")
    v.add_argument("--dry-run", action="store_true", help="show the changes only")
    v.add_argument("-j", "--json", action="store_true", help="print the stream's new JSON")
    _add_removals(verbs, conn)
    add_view_flags(add_verb(
        verbs, "view", view, "print the messages of a stream",
        "Print a stream's messages in order, from the first (or --id, or --since) to\n"
        "the last stored when it started (or --count of them). A progress bar shows\n"
        "on a terminal while the output goes elsewhere.\n\n"
        "  txnats stream view ORDERS --subject 'orders.eu.>'\n"
        "  txnats stream view ORDERS --since 1h --raw > orders.txt",
        conn,
    ))


def _add_removals(verbs: Subcommands, conn: Parser) -> None:
    """``rm``, ``purge`` and ``get``."""
    v = add_verb(verbs, "rm", _rm, "remove a stream",
                 "Remove a stream and every message in it; asks first unless --force.\n\n"
                 "  txnats stream rm ORDERS -f", conn, aliases=["delete", "del"])
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("-f", "--force", action="store_true", help="do not ask")

    v = add_verb(verbs, "purge", _purge, "remove messages from a stream",
                 "Remove a stream's messages: all, or those on --subject, or those\n"
                 "below --seq, or all but the last --keep; asks first unless --force.\n\n"
                 "  txnats stream purge ORDERS --subject orders.old -f", conn)
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("--subject", help="only the messages on SUBJECT")
    v.add_argument("--seq", type=count, metavar="SEQUENCE",
                   help="only those below sequence SEQUENCE")
    v.add_argument("--keep", type=count, metavar="MESSAGES", help="keep the last MESSAGES")
    v.add_argument("-f", "--force", action="store_true", help="do not ask")
    v.add_argument("-j", "--json", action="store_true", help="print the stream's JSON after")

    v = add_verb(verbs, "get", _get, "print one message of a stream",
                 "Print the message at sequence ID, or the last one on a subject.\n\n"
                 "  txnats stream get ORDERS 12\n"
                 "  txnats stream get ORDERS -S orders.new --raw", conn)
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("id", metavar="ID", type=count, nargs="?", help="the message's sequence")
    v.add_argument("-S", "--last-for", metavar="SUBJECT", help="the last message on SUBJECT")
    v.add_argument("--raw", action="store_true", help="print only the data")
    v.add_argument("-j", "--json", action="store_true", help="print the message as JSON")


async def run_stream(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats stream VERB``."""
    return await run_verb(reactor, args)


# ====================================================================== output
def _is_system(name: str) -> bool:
    return name.startswith(_SYSTEM)


def _config_rows(c: StreamConfig) -> list[tuple[str, object] | None]:
    storage = str(c.storage or "file").capitalize()
    rows: list[tuple[str, object] | None] = [
        ("Description", c.description) if c.description else None,
        ("Subjects", ", ".join(c.subjects or []) or "-"),
        ("Acknowledgements", not c.no_ack),
        ("Retention", f"{storage} - {str(c.retention or 'limits').capitalize()}"),
        ("Replicas", c.num_replicas or 1),
        ("Discard Policy", str(c.discard or "old").capitalize()
         + (" Per Subject" if c.discard_new_per_subject else "")),
        ("Duplicate Window", human_seconds(c.duplicate_window)),
        ("Allows Msg Delete", not c.deny_delete),
        ("Allows Purge", not c.deny_purge),
        ("Allows Rollups", bool(c.allow_rollup_hdrs)),
        ("Allows Direct Get", bool(c.allow_direct)),
        ("Allows Per-Message TTL", bool(c.allow_msg_ttl)),
        ("Maximum Messages", limit(c.max_msgs)),
        ("Maximum Per Subject", limit(c.max_msgs_per_subject)),
        ("Maximum Bytes", limit(c.max_bytes, human_bytes)),
        ("Maximum Age", limit(c.max_age, human_seconds)),
        ("Maximum Message Size", limit(c.max_msg_size, human_bytes)),
        ("Maximum Consumers", limit(c.max_consumers)),
        ("Compression", str(c.compression)) if c.compression not in (None, "none") else None,
        ("Mirror", c.mirror.name) if c.mirror else None,
        ("Sources", ", ".join(s.name or "?" for s in c.sources)) if c.sources else None,
        ("Placement", _placement(c)) if c.placement else None,
        ("Sealed", True) if c.sealed else None,
    ]
    shown = {k: v for k, v in (c.metadata or {}).items() if not k.startswith("_nats.")}
    if shown:
        rows += [("", "Metadata"), *sorted(shown.items())]
    return rows


def _placement(c: StreamConfig) -> str:
    assert c.placement is not None
    parts = []
    if c.placement.cluster:
        parts.append(f"cluster {c.placement.cluster}")
    if c.placement.tags:
        parts.append("tags " + ", ".join(c.placement.tags))
    return "; ".join(parts) or "-"


def _state_rows(info: StreamInfo) -> list[tuple[str, object] | None]:
    s = info.state
    return [
        ("Messages", human_count(s.messages)),
        ("Bytes", human_bytes(s.bytes)),
        ("First Sequence", f"{s.first_seq} @ {when(s.first_ts)}" if s.messages else s.first_seq),
        ("Last Sequence", f"{s.last_seq} @ {when(s.last_ts)}" if s.messages else s.last_seq),
        ("Deleted Messages", human_count(s.num_deleted)) if s.num_deleted else None,
        ("Active Consumers", s.consumer_count),
        ("Number of Subjects", human_count(s.num_subjects)) if s.num_subjects else None,
    ]


def describe(info: StreamInfo, state_only: bool = False) -> str:
    """A stream's info for people (``stream info``)."""
    name = info.config.name
    rows: list[tuple[str, object] | None] = []
    if not state_only:
        rows += [("", "Configuration"), *_config_rows(info.config)]
        if info.cluster is not None and info.cluster.leader:
            rows += [("", "Cluster"), ("Name", info.cluster.name or "-"),
                     ("Leader", info.cluster.leader)]
    rows += [("", "State"), *_state_rows(info)]
    return columns(f"Information for Stream {name} created {when(info.created)}", rows)


def print_msg(msg: RawStreamMsg, stream: str, raw: bool) -> None:
    """Print a stored message: a line naming it, its headers, its data."""
    out = stdout_bytes()
    if raw:
        out.write(msg.data + b"\n")
        out.flush()
        return
    head = f"Item: {stream}#{msg.seq} received {msg.time or '-'} on Subject {msg.subject}\n"
    lines = [head.encode(), b"\n"]
    hdrs = headers_dict(msg.headers)
    if hdrs:
        lines.append(b"Headers:\n")
        lines += [f"  {k}: {v}\n".encode("utf-8", "surrogateescape")
                  for k, vs in hdrs.items() for v in vs]
        lines.append(b"\n")
    lines.append(msg.data + b"\n")
    out.write(b"".join(lines))
    out.flush()


def msg_json(msg: RawStreamMsg) -> dict[str, Any]:
    """A stored message as JSON: data as text if it is UTF-8, else base64 (and said)."""
    text = data_text(msg.data)
    return {
        "subject": msg.subject, "seq": msg.seq, "time": msg.time or None,
        "headers": headers_dict(msg.headers) or None, "data": text,
        "data_encoding": "utf-8" if text.encode() == msg.data else "base64",
    }


# ====================================================================== verbs
async def _ls(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    if args.names or args.json:
        names = sorted(await js.stream_names(args.subject))
        names = [n for n in names if args.all or not _is_system(n)]
        if args.json:
            print_json(names)
        elif names:
            print("\n".join(names), flush=True)
        return 0
    infos = [i for i in await js.streams(args.subject).all()
             if args.all or not _is_system(i.config.name)]
    if not infos:
        status("No Streams defined" + ("" if args.all else ", pass -a for all streams"))
        return 0
    infos.sort(key=lambda i: i.config.name)
    rows = [[i.config.name, i.config.description or "", when(i.created),
             human_count(i.state.messages), human_bytes(i.state.bytes),
             when(i.state.last_ts) if i.state.messages else "never"] for i in infos]
    print(table(["Name", "Description", "Created", "Messages", "Size", "Last Message"],
                rows, right={3, 4}), flush=True)
    return 0


async def _info(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    info = await js.stream_info(args.stream)
    if args.json:
        print_json(info.to_json())
    else:
        print(describe(info, args.state), flush=True)
    return 0


async def _add(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    if args.config is not None:
        cfg = read_config_file(args.config, args.stream)
        cfg = cfg.with_fields(config_changes(args, cfg))
    elif args.stream is None:
        fail("give the stream's name (or a --config file that names it)", 2)
    else:
        fields = {"allow_direct": True, **config_changes(args, None), "name": args.stream}
        cfg = StreamConfig.build(None, fields)
    info = await js.add_stream(cfg)
    _show(info, args.json)
    return 0


def _show(info: StreamInfo, as_json: bool) -> None:
    if as_json:
        print_json(info.to_json())
    else:
        print(describe(info), flush=True)


def _differences(old: StreamConfig, new: StreamConfig) -> list[str]:
    before, after = old.to_json(), new.to_json()
    return [f"  {k}: {before.get(k)!r} -> {after.get(k)!r}"
            for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]


async def _edit(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    old = (await js.stream_info(args.stream)).config
    base = read_config_file(args.config, args.stream) if args.config is not None else old
    new = base.with_fields(config_changes(args, base))
    changes = _differences(old, new)
    if not changes:
        fail(f"no changes to stream {args.stream!r}: give the flags to change", 2)
    if args.dry_run or args.force or on_terminal():  # else confirm refuses at once
        status(f"Differences in stream {args.stream}:\n" + "\n".join(changes))
    if args.dry_run:
        return 0
    if not await confirm(reactor, f"Really edit stream {args.stream}", args.force):
        return 0
    _show(await js.update_stream(new), args.json)
    return 0


async def _rm(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    await js.stream_info(args.stream)  # a missing stream is an error before asking
    if not await confirm(reactor, f"Really delete stream {args.stream}", args.force):
        return 0
    await js.delete_stream(args.stream)
    status(f"Deleted stream {args.stream}")
    return 0


async def _purge(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    await js.stream_info(args.stream)
    if not await confirm(reactor, f"Really purge stream {args.stream}", args.force):
        return 0
    purged = await js.purge_stream(args.stream, subject=args.subject, seq=args.seq or None,
                                   keep=args.keep)
    status(f"Purged {purged:,} messages from stream {args.stream}")
    _show(await js.stream_info(args.stream), args.json)
    return 0


async def _get(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    if (args.id is None) == (args.last_for is None):
        fail("give a message sequence ID or --last-for SUBJECT (one of them)", 2)
    if args.id is not None and args.id < 1:
        fail(f"a message sequence is at least 1, not {args.id}", 2)
    if args.last_for is not None:
        msg = await js.get_msg(args.stream, last_by_subject=args.last_for)
    else:
        msg = await js.get_msg(args.stream, args.id)
    if args.json:
        print_json(msg_json(msg))
    else:
        print_msg(msg, args.stream, args.raw)
    return 0

