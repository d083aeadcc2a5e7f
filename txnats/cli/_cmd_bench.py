"""The ``bench`` command: its flags, the run (with the progress bar on a terminal) and
the result for people (``--json`` prints it as the workload returned it)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from typing import Any

from twisted.internet.interfaces import IReactorCore, IReactorTime

from txnats.cli._common import status
from txnats.cli._connection import connect_kwargs, servers
from txnats.cli._flags import Parser, Subcommands, add_command, count, positive_float, positive_int
from txnats.cli._progress import Bar
from txnats.cli.bench import MODES, WORKLOADS, Result, run_workload

__all__ = ["add_bench", "human", "run_bench", "start_bench_server"]


def _workload_list() -> str:
    """The workloads and what each measures, in two columns."""
    width = max(map(len, WORKLOADS)) + 2
    return "\n".join(f"  {name:<{width}}{what}" for name, what in WORKLOADS.items())


def add_bench(commands: Subcommands, conn: Parser) -> None:
    """The ``bench`` command's flags."""
    p = add_command(
        commands, "bench", "measure throughput and latency",
        "Run a benchmark workload, every role in this one process (like 'nats bench').\n"
        "Without --server (and without $NATS_URL) it starts its own nats-server.\n\n"
        f"Workloads:\n{_workload_list()}\n\n"
        "  txnats bench pub --msgs 1000000 --size 16\n"
        "  txnats bench pubsub --msgs 200000 --mode iter\n"
        "  txnats bench req --duration 10 --inflight 100 --json",
        conn,
    )
    p.add_argument(
        "workload", metavar="WORKLOAD", choices=list(WORKLOADS), help=" | ".join(WORKLOADS)
    )
    p.add_argument(
        "--msgs", type=positive_int, metavar="N",
        help="messages to publish (default: 100000; for req: run --duration instead)",
    )
    p.add_argument(
        "--size", type=count, metavar="S", help="payload bytes (default: 128; fanout: 16)"
    )
    p.add_argument(
        "--pubs", type=positive_int, default=1, metavar="P",
        help="publisher connections (default: %(default)s)",
    )
    p.add_argument(
        "--subs", type=positive_int, metavar="K",
        help="subscriber connections (default: 1; fanout: 5)",
    )
    p.add_argument(
        "--inflight", type=positive_int, default=1, metavar="M",
        help="req, micro: requests outstanding at once (default: %(default)s, sequential)",
    )
    p.add_argument(
        "--duration", type=positive_float, metavar="SECS",
        help="req, micro: run for SECS seconds (default: 5 unless --msgs is given)",
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


# ====================================================================== the result
def _rate(result: Result) -> str:
    return f"{result['msgs_per_sec']:,.0f}"


def _mb(result: Result) -> str:
    return f"{result['mb_per_sec']:,.2f} MB/sec"


def _took(result: Result) -> str:
    return f"{result['elapsed']:.3f} s"


def _human_pub(result: Result) -> str:
    pubs = result["pubs"]
    plain = " (plain loop)" if result.get("publish_loop") == "plain" else ""
    return (
        f"Pub stats: {_rate(result)} msgs/sec ~ {_mb(result)}{plain}\n"
        f"  {result['msgs']:,} msgs of {result['size']} B in {_took(result)}, "
        f"{pubs} publisher{'s' if pubs != 1 else ''}"
    )


def _human_req(result: Result) -> str:
    lat = result["latency_us"]
    return (
        f"Req stats: {_rate(result)} req/sec ~ {_mb(result)}\n"
        f"  {result['requests']:,} requests of {result['size']} B in {_took(result)}, "
        f"{result['inflight']} in flight\n"
        f"  latency: p50 {lat['p50']:,.0f} µs, p90 {lat['p90']:,.0f} µs, "
        f"p99 {lat['p99']:,.0f} µs, max {lat['max']:,.0f} µs"
    )


def _human_micro(result: Result) -> str:
    return "Micro stats (a txnats.micro endpoint): " + _human_req(result)[len("Req stats: "):]


def _human_js_pub(result: Result) -> str:
    return (
        f"JetStream publish_async stats: {_rate(result)} msgs/sec ~ {_mb(result)}\n"
        f"  {result['msgs']:,} msgs of {result['size']} B acknowledged in {_took(result)}, "
        f"at most {result['window']} unacknowledged"
    )


def _human_kv(result: Result) -> str:
    return (
        f"KV stats: put {result['put_ops_per_sec']:,.0f} ops/sec, "
        f"get {result['get_ops_per_sec']:,.0f} ops/sec\n"
        f"  {result['msgs']:,} puts then {result['msgs']:,} gets of {result['size']} B "
        f"over {result['keys']:,} keys in {_took(result)}"
    )


def _human_obj(result: Result) -> str:
    return (
        f"Object store stats: get {_mb(result)}, put {result['put_mb_per_sec']:,.2f} MB/sec\n"
        f"  {result['msgs']:,} gets of one {result['size']:,} B object in {_took(result)}"
    )


def _human_received(result: Result) -> str:
    """``sub``, ``pubsub`` and ``fanout``: what the subscribers received."""
    subs = result["subs"]
    lines = [
        f"Sub stats: {_rate(result)} msgs/sec ~ {_mb(result)} (received, all subscribers)",
        f"  {result['received']:,} msgs of {result['size']} B received by {subs} "
        f"subscriber{'s' if subs != 1 else ''} ({result['mode']}) in {_took(result)}",
    ]
    if "pub_msgs_per_sec" in result:
        lines.append(f"Pub stats: {result['pub_msgs_per_sec']:,.0f} msgs/sec")
    if result.get("dropped"):
        lines.append(f"  warning: {result['dropped']:,} messages dropped (slow consumer)")
    return "\n".join(lines)


#: How each workload's result reads; the others' are :func:`_human_received`.
_HUMAN: dict[str, Callable[[Result], str]] = {
    "pub": _human_pub,
    "req": _human_req,
    "micro": _human_micro,
    "js-pub": _human_js_pub,
    "kv": _human_kv,
    "obj": _human_obj,
}


def human(result: Result) -> str:
    """A workload's result for people: the rates, then what was measured."""
    return _HUMAN.get(result["workload"], _human_received)(result)


# ====================================================================== the run
def start_bench_server() -> Any:
    """Start a nats-server with JetStream for ``bench`` without a server; return it."""
    from txnats.testing import NatsServer

    return NatsServer(jetstream=True).start()


async def run_bench(reactor: IReactorCore, args: argparse.Namespace, embedded: str | None) -> int:
    """``txnats bench``: run the workload on ``embedded`` (the URL of the server it
    started) or the flags' servers, and print its result."""
    urls = [embedded] if embedded else servers(args)
    options = connect_kwargs(args)
    options.pop("name", None)
    clock: IReactorTime = reactor  # type: ignore[assignment]
    progress = None
    if not args.json and not args.no_progress and sys.stdout.isatty():
        progress = Bar(clock, sys.stdout)
    if args.workload == "sub":
        total = args.msgs if args.msgs is not None else 100_000
        ready: Callable[[], None] | None = lambda: status(  # noqa: E731
            f"Listening on [{args.subject}]; waiting for {total:,} messages"
        )
    else:
        ready = None
    if embedded and not args.json:
        status(f"Started nats-server on {embedded}")
    result = await run_workload(
        reactor, urls, args.workload, msgs=args.msgs, size=args.size, pubs=args.pubs,
        subs=args.subs, inflight=args.inflight, duration=args.duration, mode=args.mode,
        subject=args.subject, options=options, progress=progress, ready=ready,
    )
    if args.json:
        print(json.dumps(result, sort_keys=True), flush=True)
    else:
        print(human(result), flush=True)
    return 0
