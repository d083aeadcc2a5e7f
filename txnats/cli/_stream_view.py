"""``txnats stream view``: a stream's messages in order, through an ordered consumer,
from a sequence or a time to the last message stored when the view began."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from twisted.internet.interfaces import IReactorCore, IReactorTime

from txnats.cli._common import fail, status
from txnats.cli._flags import Parser, duration, positive_int
from txnats.cli._progress import stderr_bar
from txnats.cli._render import data_text, headers_dict, stdout_bytes, when
from txnats.errors import MsgNotFoundError, TimeoutError
from txnats.jetstream import JetStreamContext, JsMsg, OrderedMessages

__all__ = ["add_view_flags", "view"]

#: Headers the server adds to what it delivers, left out of the view (as ``nats`` does).
_SERVER_HEADERS = frozenset({
    "Nats-Subject", "Nats-Stream", "Nats-Sequence", "Nats-Time-Stamp", "Nats-Num-Pending",
    "Nats-Last-Sequence",
})


def add_view_flags(p: Parser) -> None:
    """``stream view``'s arguments and flags."""
    p.add_argument("stream", metavar="STREAM")
    p.add_argument("--id", type=positive_int, metavar="SEQ", help="start at sequence SEQ")
    p.add_argument("--since", type=duration, metavar="DURATION",
                   help="start with the messages stored since DURATION ago (1h, 2d)")
    p.add_argument("--subject", help="only the messages on SUBJECT (wildcards allowed)")
    p.add_argument("--count", type=positive_int, metavar="N", help="stop after N messages")
    p.add_argument("--raw", action="store_true", help="print only the data of each message")
    p.add_argument("-j", "--json", action="store_true",
                   help="print each message as a line of JSON")
    p.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="draw a progress bar on a terminal (default: yes)")


async def _start_seq(js: JetStreamContext, args: argparse.Namespace) -> int | None:
    """The sequence to start at (None: the first), or 0 for nothing to show."""
    if args.id is not None and args.since is not None:
        fail("give --id or --since, not both", 2)
    if args.since is None:
        first: int | None = args.id
        return first
    start = datetime.now(UTC) - timedelta(seconds=args.since)
    payload = {"start_time": start.isoformat().replace("+00:00", "Z")}
    if args.subject:
        payload["next_by_subj"] = args.subject
    try:
        found = await js.api_request(f"STREAM.MSG.GET.{args.stream}", payload)
    except MsgNotFoundError:
        return 0
    return int(found["message"]["seq"])


def _write(msg: JsMsg, args: argparse.Namespace) -> None:
    out = stdout_bytes()
    meta = msg.metadata
    if args.json:
        text = data_text(msg.data)
        record = {
            "seq": meta.sequence.stream, "subject": msg.subject,
            "time": datetime.fromtimestamp(meta.timestamp_ns / 1e9, UTC).isoformat(),
            "headers": {k: v for k, v in headers_dict(msg.headers).items()
                        if k not in _SERVER_HEADERS} or None,
            "data": text, "data_encoding": "utf-8" if text.encode() == msg.data else "base64",
        }
        out.write(json.dumps(record).encode() + b"\n")
    elif args.raw:
        out.write(msg.data + b"\n")
    else:
        stamp = when(datetime.fromtimestamp(meta.timestamp_ns / 1e9, UTC))
        parts = [f"[{meta.sequence.stream}] Subject: {msg.subject} Received: {stamp}\n".encode()]
        hdrs = [(k, v) for k, vs in headers_dict(msg.headers).items() for v in vs
                if k not in _SERVER_HEADERS]
        if hdrs:
            parts += [b"\n", *(f"  {k}: {v}\n".encode("utf-8", "surrogateescape")
                               for k, v in hdrs)]
        parts += [b"\n", msg.data, b"\n\n"]
        out.write(b"".join(parts))
    out.flush()


async def view(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    """``txnats stream view``: print the messages; a progress bar on stderr."""
    # With --subject, the counts per subject say at once whether any message matches
    # (else the first wait for one would have to time out).
    info = await js.stream_info(args.stream, args.subject)
    last = info.state.last_seq
    start = await _start_seq(js, args)
    matching = info.state.messages if not args.subject else sum(
        (info.state.subjects or {}).values())
    if matching == 0 or start == 0 or (start is not None and start > last):
        status(f"No messages to show in stream {args.stream}")
        return 0
    options: dict[str, Any] = {}
    if start is not None:
        options.update(deliver_policy="by_start_sequence", opt_start_seq=start)
    if args.subject:
        options["filter_subjects"] = [args.subject]
    reader = await js.ordered_consumer(args.stream, None, **options)
    assert isinstance(reader, OrderedMessages)
    try:
        shown = await _show_all(reactor, reader, args, last)
    finally:
        reader.stop()
    if shown == 0:
        status(f"No messages to show in stream {args.stream}")
    elif not args.json and not args.raw:
        status(f"Reached the end: {shown:,} message{'s' if shown != 1 else ''} shown")
    return 0


async def _show_all(
    reactor: IReactorCore, reader: OrderedMessages, args: argparse.Namespace, last: int
) -> int:
    """Print messages until the last one stored when the view began (or ``--count``);
    return how many were printed."""
    clock: IReactorTime = reactor  # type: ignore[assignment]
    shown, total = 0, [0]
    bar = stderr_bar(clock, args.progress and not args.json, output_on_stdout=True)
    if bar is not None:
        bar.begin("view", lambda: total[0] or 1, lambda: shown)
    try:
        while args.count is None or shown < args.count:
            try:
                msg = await reader.next_msg(timeout=js_wait(args))
            except TimeoutError:  # nothing (more) on the filter up to the end
                break
            meta = msg.metadata
            shown += 1
            total[0] = shown + meta.num_pending if args.count is None else args.count
            _write(msg, args)
            if meta.sequence.stream >= last or meta.num_pending == 0:
                break
    finally:
        if bar is not None:
            bar.end()
    return shown


def js_wait(args: argparse.Namespace) -> float:
    """How long to wait for the next message before taking the stream to be read."""
    return float(getattr(args, "timeout", 5.0))
