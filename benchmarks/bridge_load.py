"""HTTP load on ``twistd nats-bridge``: N publishes per second, delivered, timed, and its
memory watched; and the same load on a ``twisted.web`` resource that does nothing.

    python benchmarks/bridge_load.py --rate 2000 --seconds 10
    python benchmarks/bridge_load.py --only ceiling          # without the bridge
    python benchmarks/bridge_load.py --serve-ceiling 8081    # just the no-op server

Starts a ``nats-server``, the bridge as a subprocess (``twistd -n nats-bridge --nats URL
--listen tcp:PORT:interface=127.0.0.1``) and a NATS subscriber in this process; then
sends ``POST /v1/publish/load.test`` at a fixed rate (open loop: the schedule does not
wait for answers) over keep-alive connections, each request written whole in one
``write`` (requests pipeline on a connection when answers lag). Every body carries its
number, so the subscriber counts distinct deliveries. The bridge's RSS is read from
``/proc/<pid>/status`` every 0.25 s. Then the same load goes to the ceiling server
(another subprocess: ``twisted.web``, one resource answering 202 with an empty body),
which measures what Twisted's HTTP layer alone costs on this machine.

Latency is from the write of a request to the end of its response. The achieved rate
is answers divided by the time from the first request to the last answer. Prints one
JSON object; the exit status is 1 if a run could not be made.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import tempfile
import time
from collections import deque
from typing import Any

from twisted.internet import defer, protocol, task
from twisted.internet.endpoints import TCP4ClientEndpoint

SUBJECT = "load.test"
#: How often the schedule sends what is due, and the RSS sampling period.
TICK = 0.002
RSS_EVERY = 0.25


# ============================================================================ the no-op server
def serve_ceiling(port: int) -> None:
    """Run the ceiling server: ``twisted.web``, a 202 with no body for every POST."""
    from twisted.internet import reactor
    from twisted.web import resource as web_resource
    from twisted.web import server

    class Nothing(web_resource.Resource):
        isLeaf = True

        def render_POST(self, request: Any) -> bytes:
            request.content.read()
            request.setResponseCode(202)
            return b""

    site = server.Site(Nothing())
    site.noisy = False
    reactor.listenTCP(port, site, interface="127.0.0.1")  # type: ignore[attr-defined]
    reactor.run()  # type: ignore[attr-defined]


def warnings_only() -> Any:
    """A twistd log observer factory (``--logger bridge_load.warnings_only``) keeping
    warnings and errors only: ``--quiet-bridge`` measures the bridge without its
    per-request log lines."""
    from twisted.logger import (
        FilteringLogObserver,
        LogLevel,
        LogLevelFilterPredicate,
        textFileLogObserver,
    )

    return FilteringLogObserver(
        textFileLogObserver(sys.stdout), [LogLevelFilterPredicate(LogLevel.warn)]
    )


# ============================================================================ the load
class _Conn(protocol.Protocol):
    """One keep-alive connection: writes requests, reads answers in order."""

    def __init__(self, load: Load) -> None:
        self.load = load
        self.sent: deque[float] = deque()
        self.buf = b""

    def connectionMade(self) -> None:
        self.transport.setTcpNoDelay(True)  # type: ignore[attr-defined]

    def send(self, data: bytes) -> None:
        self.sent.append(time.perf_counter())
        self.transport.write(data)  # type: ignore[union-attr]

    def dataReceived(self, data: bytes) -> None:
        buf = self.buf + data
        while True:
            end = buf.find(b"\r\n\r\n")
            if end < 0:
                break
            head = buf[:end]
            length = 0
            i = head.find(b"\r\nContent-Length:")
            if i < 0:
                i = head.lower().find(b"\r\ncontent-length:")
            if i >= 0:
                j = head.find(b"\r\n", i + 2)
                length = int(head[i + 17: j if j > 0 else None])
            if len(buf) < end + 4 + length:
                break
            status = int(head[9:12])
            buf = buf[end + 4 + length:]
            self.load.answered(status, time.perf_counter() - self.sent.popleft())
        self.buf = buf

    def connectionLost(self, reason: Any) -> None:
        self.load.lost += len(self.sent)
        self.sent.clear()


class Load:
    """``rate`` requests per second for ``seconds`` over ``conns`` connections."""

    def __init__(self, reactor: Any, port: int, rate: int, seconds: float, conns: int,
                 size: int) -> None:
        self.reactor = reactor
        self.port = port
        self.rate = rate
        self.total = int(rate * seconds)
        self.conns_n = conns
        self.size = size
        self.conns: list[_Conn] = []
        self.latencies: list[float] = []
        self.statuses: dict[int, int] = {}
        self.sent = 0
        self.lost = 0
        self.first = 0.0
        self.last = 0.0
        self.done: defer.Deferred[None] = defer.Deferred()

    def request(self, i: int) -> bytes:
        body = b"%08d" % i + b"x" * max(0, self.size - 8)
        return (
            b"POST /v1/publish/%s HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n%s"
            % (SUBJECT.encode(), len(body), body)
        )

    async def connect(self) -> None:
        ep = TCP4ClientEndpoint(self.reactor, "127.0.0.1", self.port)
        for _ in range(self.conns_n):
            factory = protocol.Factory.forProtocol(lambda: _Conn(self))
            self.conns.append(await ep.connect(factory))

    def answered(self, status: int, latency: float) -> None:
        self.statuses[status] = self.statuses.get(status, 0) + 1
        self.latencies.append(latency)
        if len(self.latencies) + self.lost >= self.total and not self.done.called:
            self.last = time.perf_counter()
            self.done.callback(None)

    def tick(self) -> None:
        due = min(self.total, int((time.perf_counter() - self.first) * self.rate) + 1)
        conns, n = self.conns, len(self.conns)
        while self.sent < due:
            conns[self.sent % n].send(self.request(self.sent))
            self.sent += 1
        if self.sent >= self.total:
            self.loop.stop()

    async def run(self) -> dict[str, Any]:
        await self.connect()
        cpu0 = resource.getrusage(resource.RUSAGE_SELF)
        self.first = time.perf_counter()
        self.loop = task.LoopingCall(self.tick)
        self.loop.clock = self.reactor
        self.loop.start(TICK)
        await self.done.addTimeout(self.total / self.rate + 30, self.reactor)
        cpu1 = resource.getrusage(resource.RUSAGE_SELF)
        for c in self.conns:
            c.transport.loseConnection()  # type: ignore[union-attr]
        lat = sorted(self.latencies)
        elapsed = self.last - self.first

        def pct(p: float) -> float:
            return round(lat[min(len(lat) - 1, int(p * len(lat)))] * 1000, 3)

        return {
            "requests": self.total,
            "answered": len(lat),
            "statuses": {str(k): v for k, v in sorted(self.statuses.items())},
            "lost_connections_requests": self.lost,
            "seconds": round(elapsed, 3),
            "achieved_rate": round(len(lat) / elapsed, 1),
            "p50_ms": pct(0.50),
            "p99_ms": pct(0.99),
            "max_ms": round(lat[-1] * 1000, 3),
            "generator_cpu_s": round(
                cpu1.ru_utime + cpu1.ru_stime - cpu0.ru_utime - cpu0.ru_stime, 2
            ),
        }


# ============================================================================ processes
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def wait_listening(reactor: Any, port: int, proc: subprocess.Popen[bytes],
                         what: str, seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        await task.deferLater(reactor, 0.05, lambda: None)
    raise RuntimeError(f"{what} did not listen on {port} within {seconds}s")


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process so far (``/proc/<pid>/stat``)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def measured(load: Load, pid: int) -> dict[str, Any]:
    """Run ``load``; add the server process's CPU time per request."""
    before = cpu_seconds(pid)
    result = await load.run()
    used = cpu_seconds(pid) - before
    result["server_cpu_s"] = round(used, 2)
    result["server_cpu_ms_per_request"] = round(used * 1000 / load.total, 3)
    return result


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


async def against_bridge(reactor: Any, args: argparse.Namespace, url: str) -> dict[str, Any]:
    import txnats

    port = free_port()
    twistd = os.path.join(os.path.dirname(sys.executable), "twistd")
    log = tempfile.NamedTemporaryFile(prefix="bridge-load-", suffix=".log", delete=False)
    extra = args.twistd_args.split()
    env = dict(os.environ)
    if args.quiet_bridge:
        extra.append("--logger=bridge_load.warnings_only")
        here = os.path.dirname(os.path.abspath(__file__))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [here, env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [twistd, "-n", "--pidfile=", *extra, "nats-bridge", "--nats", url,
         "--listen", f"tcp:{port}:interface=127.0.0.1"],
        stdout=log, stderr=subprocess.STDOUT, cwd=tempfile.gettempdir(), env=env,
    )
    nc = None
    try:
        await wait_listening(reactor, port, proc, "the bridge")
        nc = await txnats.connect(reactor, url, name="bridge-load-sub")
        seen: set[bytes] = set()
        count = [0]

        def got(msg: txnats.Msg) -> None:
            count[0] += 1
            seen.add(msg.data[:8])

        nc.subscribe(SUBJECT, got, pending_msgs_limit=1_000_000)
        await nc.flush()
        rss: list[tuple[float, int]] = []
        load = Load(reactor, port, args.rate, args.seconds, args.conns, args.size)

        def sample() -> None:
            if load.first:
                rss.append((time.perf_counter() - load.first, rss_kib(proc.pid)))

        sampler = task.LoopingCall(sample)
        sampler.clock = reactor
        sampler.start(RSS_EVERY)
        result = await measured(load, proc.pid)
        sampler.stop()
        deadline = time.monotonic() + 15
        while len(seen) < load.total and time.monotonic() < deadline:
            await task.deferLater(reactor, 0.05, lambda: None)
        result["delivered"] = len(seen)
        result["deliveries"] = count[0]
        result["rss_kib"] = rss_summary(rss)
        return result
    finally:
        if nc is not None:
            await nc.close()
        stop(proc)
        log.close()
        if proc.returncode not in (0, None) and args.verbose:
            sys.stderr.write(open(log.name).read())
        os.unlink(log.name)


def rss_summary(samples: list[tuple[float, int]]) -> dict[str, Any]:
    """RSS at the 2nd second and at the end, the growth between, and the peak."""
    if not samples:
        return {}
    after2 = [kib for t, kib in samples if t >= 2.0] or [samples[-1][1]]
    return {
        "at_2s": after2[0],
        "end": samples[-1][1],
        "growth_2s_to_end": samples[-1][1] - after2[0],
        "peak": max(kib for _, kib in samples),
        "samples": len(samples),
    }


async def against_ceiling(reactor: Any, args: argparse.Namespace) -> dict[str, Any]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--serve-ceiling", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        await wait_listening(reactor, port, proc, "the ceiling server")
        load = Load(reactor, port, args.rate, args.seconds, args.conns, args.size)
        return await measured(load, proc.pid)
    finally:
        stop(proc)


async def main(reactor: Any, args: argparse.Namespace) -> None:
    out: dict[str, Any] = {
        "rate": args.rate, "seconds": args.seconds, "conns": args.conns, "size": args.size,
        "cpus": os.cpu_count(), "loadavg_before": os.getloadavg()[0],
        "bridge_log": "warnings only" if args.quiet_bridge else "default",
    }
    if args.only in (None, "bridge"):
        from txnats.testing import NatsServer

        if args.nats:
            out["bridge"] = await against_bridge(reactor, args, args.nats)
        else:
            with NatsServer() as server:
                out["bridge"] = await against_bridge(reactor, args, server.url)
    if args.only in (None, "ceiling"):
        out["ceiling"] = await against_ceiling(reactor, args)
    out["loadavg_after"] = os.getloadavg()[0]
    print(json.dumps(out))


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rate", type=int, default=2000, help="requests per second")
    p.add_argument("--seconds", type=float, default=10.0)
    p.add_argument("--conns", type=int, default=8, help="keep-alive connections")
    p.add_argument("--size", type=int, default=64, help="body bytes")
    p.add_argument("--only", choices=("bridge", "ceiling"))
    p.add_argument("--nats", help="use this NATS server instead of starting one")
    p.add_argument("--serve-ceiling", type=int, metavar="PORT", help="only run the no-op server")
    p.add_argument("--twistd-args", default="", metavar="ARGS",
                   help="more twistd options, e.g. '--profile=bridge.prof --profiler=cprofile "
                   "--savestats' to profile the bridge")
    p.add_argument("--quiet-bridge", action="store_true",
                   help="run the bridge logging warnings only (no line per request)")
    p.add_argument("--verbose", action="store_true", help="the bridge's log if it failed")
    return p.parse_args(argv)


if __name__ == "__main__":
    ns = parse()
    if ns.serve_ceiling:
        serve_ceiling(ns.serve_ceiling)
    else:
        task.react(lambda r: defer.ensureDeferred(main(r, ns)))
