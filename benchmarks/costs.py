"""What one operation costs the client itself: no socket, no server, no other process.

A :class:`txnats.Client` runs on a ``MemoryReactorClock`` against the fake server of
:mod:`txnats.testing.fakes`: the bytes it writes are thrown away, the bytes it reads are
prebuilt frames fed to its protocol, and the reactor's turns are run by hand. What is
left is the client's own work (encoding, parsing, dispatch, turns, Deferreds), so the
figures do not move with the machine's load when counted as instructions:

    python benchmarks/costs.py --callgrind            # instructions per operation
    python benchmarks/costs.py publish --ops 200000   # wall time per operation

``--callgrind`` runs each workload under ``valgrind --tool=callgrind`` twice (with
``--ops`` operations and with none) and prints the difference divided by ``--ops``:
the instructions of one operation, setup excluded. The same total comes out run after
run on one machine, whatever else it is doing, so two trees can be compared to a
fraction of a percent (run it in each, with the same Python).

Workloads: ``publish`` (128 B, no reply), ``publish-headers`` (128 B with one header),
``deliver`` (a handler subscription), ``iter`` (``async for``), ``next``
(``await sub.next_msg()``), ``request`` (a request and its reply, one at a time).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from random import Random

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from twisted.internet.defer import Deferred  # noqa: E402
from twisted.internet.testing import MemoryReactorClock  # noqa: E402

from txnats import Client, Msg, Options  # noqa: E402
from txnats.testing import ServerSide  # noqa: E402

WORKLOADS = ["publish", "publish-headers", "deliver", "iter", "next", "request"]
PAYLOAD = b"x" * 128
#: Frames fed to the client per read (about 64 KiB of MSG frames).
PER_READ = 400


def connected() -> tuple[MemoryReactorClock, Client, ServerSide]:
    clock = MemoryReactorClock()
    client = Client(clock, ["tcp:host=127.0.0.1:port=4222"], Options(), rng=Random(1))
    client.start()
    clock.advance(0)
    server = ServerSide(clock)
    server.send(b'INFO {"server_id":"S","max_payload":1048576,"headers":true,"proto":1}\r\n')
    server.send(b"PONG\r\n")
    clock.advance(0)
    server.reset()
    return clock, client, server


def turns(clock: MemoryReactorClock, server: ServerSide) -> None:
    clock.advance(0)
    server.transport.reset()


def publish(ops: int, headers: bool = False) -> None:
    clock, client, server = connected()
    hdrs = {"Trace": "1"} if headers else None
    pub = client.publish
    for i in range(ops):
        pub("bench.subject", PAYLOAD, headers=hdrs)
        if i % 1000 == 999:
            turns(clock, server)
    turns(clock, server)


def feed(clock: MemoryReactorClock, server: ServerSide, sid: int, ops: int) -> None:
    frame = b"MSG bench.subject %d 128\r\n%s\r\n" % (sid, PAYLOAD)
    chunk = frame * PER_READ
    left = ops
    while left:
        n = min(left, PER_READ)
        server.send(chunk if n == PER_READ else frame * n)
        clock.advance(0)
        left -= n


def deliver(ops: int) -> None:
    clock, client, server = connected()
    seen = [0]

    def handler(msg: Msg) -> None:
        seen[0] += 1

    sub = client.subscribe("bench.subject", handler)
    feed(clock, server, sub.sid, ops)
    assert seen[0] == ops, seen


def read(ops: int, how: str) -> None:
    clock, client, server = connected()
    sub = client.subscribe("bench.subject", pending_msgs_limit=ops + 1)
    got = [0]

    async def reader() -> None:
        if ops == 0:
            return
        if how == "iter":
            async for _ in sub:
                got[0] += 1
                if got[0] == ops:
                    return
        else:
            for _ in range(ops):
                await sub.next_msg(timeout=None)
                got[0] += 1

    done = Deferred.fromCoroutine(reader())
    feed(clock, server, sub.sid, ops)
    clock.advance(0)
    assert got[0] == ops and done.called, got


def request(ops: int) -> None:
    clock, client, server = connected()
    answered = [0]
    client.request("bench.svc", b"warm-up", timeout=None).addErrback(lambda f: None)
    clock.advance(0)
    wire = server.transport.value()
    inbox = re.search(rb"SUB (\S+)\.\* (\d+)\r\n", wire)
    assert inbox is not None, wire
    prefix, sid = inbox.group(1), int(inbox.group(2))
    reply_fmt = b"MSG " + prefix + b".%x " + b"%d 2\r\nok\r\n" % sid
    server.transport.reset()
    count = answered.__setitem__
    for i in range(ops):
        d = client.request("bench.svc", PAYLOAD, timeout=5.0)
        d.addCallback(lambda _, i=i: count(0, i + 1))
        clock.advance(0)
        server.transport.reset()
        server.send(reply_fmt % (i + 2))
        clock.advance(0)
    assert answered[0] == ops, answered


RUN: dict[str, Callable[[int], None]] = {
    "publish": publish,
    "publish-headers": lambda ops: publish(ops, headers=True),
    "deliver": deliver,
    "iter": lambda ops: read(ops, "iter"),
    "next": lambda ops: read(ops, "next"),
    "request": request,
}


def instructions(workload: str, ops: int) -> int:
    """The instructions callgrind counts for one run of ``workload``."""
    out = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
         sys.executable, __file__, workload, "--ops", str(ops)],
        capture_output=True, text=True, check=True,
        env=dict(os.environ, PYTHONHASHSEED="0"),
    ).stderr
    m = re.search(r"Collected : (\d+)", out)
    if m is None:
        raise SystemExit(f"no callgrind total in:\n{out}")
    return int(m.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("workload", nargs="?", choices=WORKLOADS)
    parser.add_argument("--ops", type=int, default=20_000)
    parser.add_argument("--callgrind", action="store_true",
                        help="instructions per operation, for each workload (or the one given)")
    args = parser.parse_args()
    if args.callgrind:
        for workload in [args.workload] if args.workload else WORKLOADS:
            total = instructions(workload, args.ops)
            base = instructions(workload, 0)
            print(f"{workload:16} {(total - base) / args.ops:10,.0f} instructions/op"
                  f"  ({args.ops} ops)", flush=True)
        return
    if args.workload is None:
        parser.error("give a workload, or --callgrind")
    start = time.perf_counter()
    RUN[args.workload](args.ops)
    if args.ops and os.environ.get("COSTS_QUIET") is None:
        took = time.perf_counter() - start
        print(f"{args.workload}: {took / args.ops * 1e6:.2f} us/op ({args.ops} ops)")


if __name__ == "__main__":
    main()
