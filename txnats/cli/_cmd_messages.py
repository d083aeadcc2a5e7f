"""The client commands ``pub``, ``sub``, ``req`` and ``reply``: each one's flags
(``add_*``) and what it does (``run_*``), with the helpers they share to fill in
templates and print messages."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import IO

from twisted.internet.interfaces import IReactorCore, IReactorTime

from txnats.cli._common import duration, fail, one_line, sleep, status
from txnats.cli._connection import connect_to
from txnats.cli._flags import (
    DATA_HELP,
    Parser,
    Subcommands,
    add_command,
    header,
    positive_float,
    positive_int,
)
from txnats.cli.bench import HIGH_WATER
from txnats.errors import ConnectionClosedError, NatsError
from txnats.protocol.events import Msg
from txnats.protocol.headers import Headers

__all__ = [
    "add_pub",
    "add_reply",
    "add_req",
    "add_sub",
    "run_pub",
    "run_reply",
    "run_req",
    "run_sub",
]


# ====================================================================== flags
def add_pub(commands: Subcommands, conn: Parser) -> None:
    """The ``pub`` command's flags."""
    p = add_command(
        commands, "pub", "publish messages",
        "Publish DATA to SUBJECT, --count times, then flush (wait until the server\n"
        "has them).\n\n"
        "  txnats pub greet.joe hello\n"
        "  txnats pub orders.new 'order {{Count}}' --count 10 -H X-Trace:abc",
        conn,
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject to publish to")
    p.add_argument("data", metavar="DATA", nargs="?", default="", help=DATA_HELP)
    p.add_argument("--stdin", action="store_true", help="read DATA from standard input")
    p.add_argument(
        "--count", type=positive_int, default=1, metavar="N",
        help="how many messages to publish (default: %(default)s)",
    )
    p.add_argument(
        "-H", "--header", type=header, action="append", default=[], metavar="K:V",
        help="a header; repeat for several (and for several values of one name)",
    )
    p.add_argument("--reply", metavar="R", help="the reply subject to send with each message")
    p.add_argument(
        "--sleep", type=positive_float, metavar="SECS", help="pause between messages"
    )


def add_sub(commands: Subcommands, conn: Parser) -> None:
    """The ``sub`` command's flags."""
    p = add_command(
        commands, "sub", "print the messages of a subject",
        "Subscribe to SUBJECT (wildcards allowed) and print each message: its\n"
        "subject and reply subject, its headers, and its data. Prints\n"
        "'Listening on [SUBJECT]' on stderr once the server has the subscription.\n\n"
        "  txnats sub 'greet.>'\n"
        "  txnats sub jobs --queue workers --count 1",
        conn,
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject (wildcards allowed)")
    p.add_argument("--queue", metavar="Q", help="join queue group Q")
    p.add_argument(
        "--count", type=positive_int, metavar="N", help="exit after N messages (default: never)"
    )
    p.add_argument("--raw", action="store_true", help="print only the data of each message")


def add_req(commands: Subcommands, conn: Parser) -> None:
    """The ``req`` command's flags."""
    p = add_command(
        commands, "req", "make a request and print the reply",
        "Publish DATA to SUBJECT with a reply inbox and print the first response\n"
        "(headers, then data). Fails if nobody answers within --timeout, or at once\n"
        "if nobody subscribes to SUBJECT (no responders).\n\n"
        "  txnats req svc.echo 'hi there' --timeout 2",
        conn,
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject to send the request to")
    p.add_argument("data", metavar="DATA", nargs="?", default="", help=DATA_HELP)
    p.add_argument("--stdin", action="store_true", help="read DATA from standard input")
    p.add_argument(
        "--timeout", type=positive_float, default=2.0, metavar="T",
        help="seconds to wait for the response (default: %(default)s)",
    )
    p.add_argument(
        "-H", "--header", type=header, action="append", default=[], metavar="K:V",
        help="a header; repeat for several",
    )
    p.add_argument("--raw", action="store_true", help="print only the data of the response")


def add_reply(commands: Subcommands, conn: Parser) -> None:
    """The ``reply`` command's flags."""
    p = add_command(
        commands, "reply", "answer requests",
        "Subscribe to SUBJECT and answer every request: with RESPONSE if given\n"
        "({{Count}} is replaced by the request number, {{Request}} by its data),\n"
        "otherwise with the request's own data and headers (echo).\n\n"
        "  txnats reply svc.echo\n"
        "  txnats reply svc.time 'pong {{Count}}' --queue workers",
        conn,
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject to serve")
    p.add_argument(
        "response", metavar="RESPONSE", nargs="?", default=None,
        help="the response (default: echo the request)",
    )
    p.add_argument("--queue", metavar="Q", help="join queue group Q")
    p.add_argument(
        "--count", type=positive_int, metavar="N", help="exit after N requests (default: never)"
    )


# ====================================================================== helpers
def _read_data(args: argparse.Namespace) -> bytes:
    if args.stdin:
        if args.data:
            fail("give DATA or --stdin, not both", 2)
        return sys.stdin.buffer.read()
    data: bytes = os.fsencode(args.data)
    return data


def _fill(template: bytes, count: int, request: bytes = b"") -> bytes:
    if b"{{" not in template:
        return template
    n = str(count).encode()
    for key in (b"{{Count}}", b"{{.Count}}"):
        template = template.replace(key, n)
    for key in (b"{{Request}}", b"{{.Request}}"):
        template = template.replace(key, request)
    return template


def _headers(pairs: list[tuple[str, str]], count: int) -> Headers | None:
    if not pairs:
        return None
    headers = Headers()
    for name, value in pairs:
        headers.add(name, value.replace("{{Count}}", str(count)).replace("{{.Count}}", str(count)))
    return headers


def _stdout() -> IO[bytes]:
    return sys.stdout.buffer


def _write_msg(out: IO[bytes], n: int | None, msg: Msg, raw: bool) -> None:
    """Print a message: for ``sub`` (``n`` given) a line naming it, then its headers and
    a blank line (if it has headers), then its data; with ``raw`` the data alone."""
    parts: list[bytes] = []
    if not raw:
        if n is not None:
            head = f'[#{n}] Received on "{msg.subject}"'
            if msg.reply:
                head += f' with reply "{msg.reply}"'
            parts.append(head.encode() + b"\n")
        hdrs = msg.headers
        if hdrs is not None:
            if hdrs.status:
                line = f"NATS/1.0 {hdrs.status} {hdrs.description or ''}".rstrip()
                parts.append(line.encode() + b"\n")
            for name, value in hdrs.multi_items():
                parts.append(f"{name}: {value}\n".encode("utf-8", "surrogateescape"))
            parts.append(b"\n")
    parts.append(msg.data)
    parts.append(b"\n\n" if n is not None and not raw else b"\n")
    out.write(b"".join(parts))
    out.flush()


# ====================================================================== commands
async def run_pub(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats pub``: publish, flush, and say how much was published."""
    data = _read_data(args)
    clock: IReactorTime = reactor  # type: ignore[assignment]
    nc = await connect_to(reactor, args)
    try:
        total = 0
        for i in range(1, args.count + 1):
            body = _fill(data, i)
            nc.publish(args.subject, body, args.reply, _headers(args.header, i))
            total += len(body)
            if nc.pending_bytes > HIGH_WATER:
                await nc.wait_for_room()
            if args.sleep and i < args.count:
                await sleep(clock, args.sleep)
        await nc.flush(max(10.0, args.connect_timeout))
    finally:
        await nc.close()
    what = "1 message" if args.count == 1 else f"{args.count} messages"
    status(f'Published {what} ({total} bytes) to "{args.subject}"')
    return 0


async def run_sub(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats sub``: print every message until ``--count`` or Ctrl-C."""
    nc = await connect_to(reactor, args)
    try:
        sub = nc.subscribe(args.subject, queue=args.queue, max_msgs=args.count)
        await nc.flush(max(10.0, args.connect_timeout))
        queue = f" in queue group [{args.queue}]" if args.queue else ""
        status(f"Listening on [{args.subject}]{queue}")
        out = _stdout()
        n = 0
        async for msg in sub:
            n += 1
            _write_msg(out, n, msg, args.raw)
        if args.count is None or n < args.count:
            raise ConnectionClosedError(f"subscription ended after {n} messages: connection closed")
    finally:
        await nc.close()
    return 0


async def run_req(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats req``: one request; print its response."""
    data = _read_data(args)
    nc = await connect_to(reactor, args)
    try:
        status(f'Sending request on "{args.subject}"')
        start = time.perf_counter()
        msg = await nc.request(args.subject, _fill(data, 1), args.timeout, _headers(args.header, 1))
        rtt = time.perf_counter() - start
        status(f"Received with rtt {duration(rtt)}")
        _write_msg(_stdout(), None, msg, bool(args.raw))
    finally:
        await nc.close()
    return 0


async def run_reply(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats reply``: answer every request until ``--count`` or Ctrl-C."""
    nc = await connect_to(reactor, args)
    count = [0]
    template = None if args.response is None else os.fsencode(args.response)

    def answer(msg: Msg) -> None:
        count[0] += 1
        n = count[0]
        if not msg.reply:
            status(f'[#{n}] Received on "{msg.subject}" without a reply subject; ignored')
            return
        try:
            if template is None:
                msg.respond(msg.data, msg.headers)
            else:
                msg.respond(_fill(template, n, msg.data))
        except NatsError as e:
            status(f'[#{n}] Received on "{msg.subject}", cannot answer: {one_line(e)}')
            return
        status(f'[#{n}] Received on "{msg.subject}", answered')

    try:
        sub = nc.subscribe(args.subject, answer, queue=args.queue, max_msgs=args.count)
        await nc.flush(max(10.0, args.connect_timeout))
        queue = f" in queue group [{args.queue}]" if args.queue else ""
        status(f"Listening on [{args.subject}]{queue}")
        await sub.when_ended()
        if nc.is_closed:
            raise ConnectionClosedError(f"connection closed after {count[0]} requests")
        await nc.flush(max(10.0, args.connect_timeout))
    finally:
        await nc.close()
    return 0
