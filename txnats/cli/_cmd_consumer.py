"""The ``consumer`` command: ``ls``, ``info``, ``add``, ``rm`` and ``next`` of the
consumers of a JetStream stream, with ``nats``'s names and flags.

Each verb is one function below, the one place it calls the library.
"""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from twisted.internet.interfaces import IReactorCore

from txnats.cli._common import confirm, fail, status
from txnats.cli._connection import run_verb
from txnats.cli._consumer_config import add_consumer_config_flags, consumer_config
from txnats.cli._flags import Parser, Subcommands, add_command, add_verb, add_verbs, positive_int
from txnats.cli._render import (
    ago,
    columns,
    data_text,
    headers_dict,
    human_count,
    human_seconds,
    limit,
    print_json,
    stdout_bytes,
    table,
    when,
)
from txnats.jetstream import ConsumerInfo, JetStreamContext, JsMsg

__all__ = ["add_consumer", "run_consumer"]


def add_consumer(commands: Subcommands, conn: Parser) -> None:
    """The ``consumer`` command and its verbs."""
    p = add_command(
        commands, "consumer", "manage the consumers of JetStream streams",
        "Create, inspect and remove the consumers of a stream, and take messages\n"
        "from a pull consumer.\n\n"
        "  txnats consumer add ORDERS NEW --filter orders.new --ack explicit\n"
        "  txnats consumer ls ORDERS\n"
        "  txnats consumer next ORDERS NEW --count 10",
        None, aliases=["con"],
    )
    p.set_defaults(command="consumer")
    verbs = add_verbs(p, "consumer_verb")
    v = add_verb(verbs, "ls", _ls, "list a stream's consumers",
                 "List the consumers of STREAM: name, description, created, pending\n"
                 "acknowledgements, unprocessed messages, last delivery.\n\n"
                 "  txnats consumer ls ORDERS", conn, aliases=["list"])
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("-n", "--names", action="store_true", help="print only the names")
    v.add_argument("-j", "--json", action="store_true", help="print the names as JSON")

    v = add_verb(verbs, "info", _info, "describe a consumer",
                 "Show a consumer's configuration and state.\n\n"
                 "  txnats consumer info ORDERS NEW --json", conn)
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("consumer", metavar="CONSUMER")
    v.add_argument("-j", "--json", action="store_true", help="print the server's JSON")

    v = add_verb(verbs, "add", _add, "create a consumer",
                 "Create a consumer on STREAM (a pull consumer unless --target).\n\n"
                 "  txnats consumer add ORDERS NEW --filter orders.new --max-deliver 5\n"
                 "  txnats consumer add ORDERS PUSHED --target deliver.orders",
                 conn, aliases=["create"])
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("consumer", metavar="CONSUMER", nargs="?")
    add_consumer_config_flags(v)
    v.add_argument("-j", "--json", action="store_true", help="print the new consumer's JSON")

    v = add_verb(verbs, "rm", _rm, "remove a consumer",
                 "Remove a consumer; asks first unless --force.\n\n"
                 "  txnats consumer rm ORDERS NEW -f", conn, aliases=["delete", "del"])
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("consumer", metavar="CONSUMER")
    v.add_argument("-f", "--force", action="store_true", help="do not ask")

    v = add_verb(verbs, "next", _next, "take messages from a pull consumer",
                 "Fetch --count messages from a pull consumer, print them and acknowledge\n"
                 "each (or --no-ack, --nak, --term). Waits --timeout seconds for them;\n"
                 "fails if none came.\n\n"
                 "  txnats consumer next ORDERS NEW --count 5 --raw", conn)
    v.add_argument("stream", metavar="STREAM")
    v.add_argument("consumer", metavar="CONSUMER")
    v.add_argument("--ack", action=argparse.BooleanOptionalAction, default=True,
                   help="acknowledge each message (default: yes)")
    v.add_argument("--nak", action="store_true", help="ask for each to be delivered again")
    v.add_argument("--term", action="store_true", help="never deliver each again")
    v.add_argument("-r", "--raw", action="store_true", help="print only the data")
    v.add_argument("--count", type=positive_int, default=1, metavar="N",
                   help="how many messages to take (default: %(default)s)")
    v.add_argument("-j", "--json", action="store_true", help="print each message as JSON lines")


async def run_consumer(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats consumer VERB``."""
    return await run_verb(reactor, args)


# ====================================================================== output
def _kind(info: ConsumerInfo) -> str:
    return "Push" if info.config.deliver_subject else "Pull"


def describe(info: ConsumerInfo) -> str:
    """A consumer's info for people (``consumer info``)."""
    c = info.config
    pull = not c.deliver_subject
    filters = c.filter_subjects or ([c.filter_subject] if c.filter_subject else [])
    rows: list[tuple[str, object] | None] = [
        ("", "Configuration"),
        ("Name", info.name),
        ("Description", c.description) if c.description else None,
        ("Durable", bool(c.durable_name)),
        ("Pull Mode", pull),
        ("Delivery Subject", c.deliver_subject) if not pull else None,
        ("Deliver Group", c.deliver_group) if c.deliver_group else None,
        ("Filter Subjects", ", ".join(filters)) if filters else None,
        ("Deliver Policy", str(c.deliver_policy or "all")),
        ("Start Sequence", c.opt_start_seq) if c.opt_start_seq else None,
        ("Start Time", when(c.opt_start_time)) if c.opt_start_time else None,
        ("Ack Policy", str(c.ack_policy or "explicit")),
        ("Ack Wait", human_seconds(c.ack_wait)),
        ("Replay Policy", str(c.replay_policy or "instant")),
        ("Maximum Deliveries", limit(c.max_deliver)),
        ("Max Ack Pending", limit(c.max_ack_pending)),
        ("Max Waiting Pulls", limit(c.max_waiting)) if pull else None,
        ("Backoff", ", ".join(human_seconds(b) for b in c.backoff)) if c.backoff else None,
        ("Inactive Threshold", human_seconds(c.inactive_threshold))
        if c.inactive_threshold else None,
        ("Headers Only", True) if c.headers_only else None,
        ("", "State"),
        ("Last Delivered Message", f"consumer sequence {info.delivered.consumer_seq}, "
         f"stream sequence {info.delivered.stream_seq}, "
         f"last delivery {ago(info.delivered.last_active)}"),
        ("Acknowledgment Floor", f"consumer sequence {info.ack_floor.consumer_seq}, "
         f"stream sequence {info.ack_floor.stream_seq}"),
        ("Outstanding Acks", human_count(info.num_ack_pending)),
        ("Redelivered Messages", human_count(info.num_redelivered)),
        ("Unprocessed Messages", human_count(info.num_pending)),
        ("Waiting Pulls", human_count(info.num_waiting)) if pull else None,
        ("Paused", True) if info.paused else None,
    ]
    title = (f"Information for Consumer {info.stream_name} > {info.name} "
             f"created {when(info.created)}")
    return columns(title, rows)


def _write(msg: JsMsg, args: argparse.Namespace, what: str) -> None:
    out = stdout_bytes()
    meta = msg.metadata
    if args.json:
        text = data_text(msg.data)
        record = {
            "subject": msg.subject, "stream_seq": meta.sequence.stream,
            "consumer_seq": meta.sequence.consumer, "delivered": meta.num_delivered,
            "pending": meta.num_pending,
            "time": datetime.fromtimestamp(meta.timestamp_ns / 1e9, UTC).isoformat(),
            "headers": headers_dict(msg.headers) or None, "data": text,
            "data_encoding": "utf-8" if text.encode() == msg.data else "base64",
            "outcome": what,
        }
        out.write(json.dumps(record).encode() + b"\n")
    elif args.raw:
        out.write(msg.data + b"\n")
    else:
        stamp = datetime.fromtimestamp(meta.timestamp_ns / 1e9, UTC).strftime("%H:%M:%S")
        parts = [(f"[{stamp}] subj: {msg.subject} / tries: {meta.num_delivered} / "
                  f"cons seq: {meta.sequence.consumer} / str seq: {meta.sequence.stream} / "
                  f"pending: {meta.num_pending}\n").encode()]
        hdrs = headers_dict(msg.headers)
        if hdrs:
            parts += [b"\nHeaders:\n", *(f"  {k}: {v}\n".encode("utf-8", "surrogateescape")
                                         for k, vs in hdrs.items() for v in vs)]
        parts += [b"\nData:\n", msg.data, b"\n\n"]
        if what:
            parts.append(f"{what}\n\n".encode())
        out.write(b"".join(parts))
    out.flush()


# ====================================================================== verbs
async def _ls(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    await js.stream_info(args.stream)  # a missing stream is an error, not "no consumers"
    if args.names or args.json:
        names = sorted(await js.consumer_names(args.stream).all())
        if args.json:
            print_json(names)
        elif names:
            print("\n".join(names), flush=True)
        return 0
    infos = sorted(await js.consumers(args.stream).all(), key=lambda i: i.name)
    if not infos:
        status(f"No consumers defined on stream {args.stream}")
        return 0
    rows = [[i.name, _kind(i), i.config.description or "", when(i.created),
             human_count(i.num_ack_pending), human_count(i.num_pending),
             ago(i.delivered.last_active)] for i in infos]
    print(table(["Name", "Kind", "Description", "Created", "Ack Pending", "Unprocessed",
                 "Last Delivery"], rows, right={4, 5}), flush=True)
    return 0


async def _info(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    info = await js.consumer_info(args.stream, args.consumer)
    if args.json:
        print_json(info.to_json())
    else:
        print(describe(info), flush=True)
    return 0


async def _add(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    cfg = consumer_config(args)
    info = await js.create_consumer(args.stream, cfg)
    if args.json:
        print_json(info.to_json())
    else:
        print(describe(info), flush=True)
    return 0


async def _rm(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    await js.consumer_info(args.stream, args.consumer)
    question = f"Really delete consumer {args.stream} > {args.consumer}"
    if not await confirm(reactor, question, args.force):
        return 0
    await js.delete_consumer(args.stream, args.consumer)
    status(f"Deleted consumer {args.stream} > {args.consumer}")
    return 0


async def _next(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    if sum((args.nak, args.term)) > 1:
        fail("give --nak or --term, not both", 2)
    info = await js.consumer_info(args.stream, args.consumer)
    if info.config.deliver_subject:
        fail(f"consumer {args.stream} > {args.consumer} is a push consumer: "
             "'next' takes from pull consumers")
    consumer = js.pull_consumer(args.stream, args.consumer)
    if info.config.ack_policy == "none":
        args.ack = False  # nothing to acknowledge
    got = 0
    while got < args.count:
        msgs = await consumer.fetch(args.count - got, expires=args.timeout)
        if not msgs:
            break
        for msg in msgs:
            got += 1
            _write(msg, args, await _settle(msg, args))
    if got == 0:
        fail(f"no message from {args.stream} > {args.consumer} within {args.timeout:g}s")
    if got < args.count:
        status(f"{got} of {args.count} messages came within {args.timeout:g}s")
    return 0


async def _settle(msg: JsMsg, args: argparse.Namespace) -> str:
    """Acknowledge, nak or term the message as the flags say; say what was done."""
    if args.nak:
        msg.nak()
        return "Negatively acknowledged message"
    if args.term:
        msg.term()
        return "Terminated message"
    if args.ack:
        await msg.ack_sync(timeout=args.timeout)
        return "Acknowledged message"
    return ""
