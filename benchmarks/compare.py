"""txnats against nats-py, side by side, on one shared nats-server.

Each workload runs alternately through txnats (``python -m txnats bench ... --json``)
and nats-py (``python benchmarks/natspy_bench.py ... --json``, on asyncio and, when
uvloop is installed, on uvloop), every run in a fresh subprocess, against ONE embedded
nats-server started here. For pub it also measures a pure-Python ceiling: a raw socket
loop that does the CONNECT handshake, encodes every PUB with bytes ``%`` formatting,
sends in 64 KiB chunks, and ends with PING/PONG. Next to the cooperative pub 16 B row
(publish, and wait for room every ~1 MiB) is a plain-loop row: every publish in one
loop that never yields, then one flush. It prints the medians of ``--runs`` runs and
the ratios txnats / nats-py, with the date, the machine and the versions::

    python benchmarks/compare.py                 # the full suite, 5 runs (minutes)
    python benchmarks/compare.py --quick         # tiny counts, 1 run: a smoke test
    python benchmarks/compare.py --markdown      # tables for a README (or --rst)
    python benchmarks/compare.py --only pub-16,req-seq --runs 3

Progress goes to stderr, the report to stdout. A run that fails does not stop the
others: its cell reads ``FAILED (SomeError)`` and the report ends with every failed
run's error line. The exit status is 1 if any run failed.
"""

from __future__ import annotations

import argparse
import datetime
import importlib.metadata
import importlib.util
import json
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
NATSPY = HERE / "natspy_bench.py"

TXNATS = "txnats"
NATSPY_ASYNCIO = "nats-py (asyncio)"
NATSPY_UVLOOP = "nats-py (uvloop)"
CEILING = "pure-Python ceiling"


@dataclass(frozen=True)
class Row:
    """One line of the table: a workload with its parameters for both clients."""

    key: str
    label: str
    txnats: tuple[str, ...]
    natspy: tuple[str, ...]
    unit: str = "msg/s"
    ceiling: tuple[int, int] | None = None  # (msgs, size) for the raw-socket ceiling
    metric: str = "msgs_per_sec"  # the result field the row reports


def suite(quick: bool) -> list[Row]:
    """The workloads of issue #5, or tiny versions of them with ``quick``."""
    big = 2_000 if quick else 1_000_000
    mid = 2_000 if quick else 200_000
    fan = 1_000 if quick else 100_000
    dur = "0.3" if quick else "10"
    rows = []
    for size in (16, 128):
        args = ("pub", "--msgs", str(big), "--size", str(size))
        rows.append(
            Row(f"pub-{size}", f"pub {big:,} x {size} B", args, args, ceiling=(big, size))
        )
        if size == 16:
            # Every publish() in one loop that never yields, then one flush: 1M x 16 B
            # is ~39 MB of frames sent while the event loop never runs.
            args = ("pub-plain", "--msgs", str(big), "--size", str(size))
            rows.append(Row(f"pub-{size}-plain", f"pub {big:,} x {size} B, plain loop",
                            args, args))
    for mode, py_mode in (("handler", "cb"), ("iter", "iter"), ("next", "next")):
        args = ("pubsub", "--msgs", str(mid), "--size", "128")
        rows.append(
            Row(
                f"pubsub-{mode}",
                f"pub/sub {mid:,} x 128 B, {mode} / {py_mode}",
                (*args, "--mode", mode),
                (*args, "--mode", py_mode),
            )
        )
    seq = ("req", "--duration", dur, "--size", "128")
    rows.append(Row("req-seq", f"request/reply sequential, {dur} s", seq, seq, "req/s"))
    win = (*seq, "--inflight", "100")
    rows.append(Row("req-100", f"request/reply 100 in flight, {dur} s", win, win, "req/s"))
    micro = ("micro", *seq[1:])
    rows.append(Row("micro-seq", f"service endpoint sequential, {dur} s", micro, micro, "req/s"))
    micro = (*micro, "--inflight", "100")
    rows.append(Row("micro-100", f"service endpoint 100 in flight, {dur} s", micro, micro,
                    "req/s"))
    args = ("fanout", "--msgs", str(fan), "--size", "16", "--subs", "5")
    rows.append(Row("fanout", f"fan-out 1 -> 5, {fan:,} x 16 B", args, args))
    js = 2_000 if quick else 100_000
    args = ("js-pub", "--msgs", str(js), "--size", "128")
    rows.append(Row("js-pub", f"JetStream publish_async {js:,} x 128 B", args, args))
    # Draining a pull consumer: txnats consume() against nats-py's fetch(1000) loop.
    n = 2_000 if quick else 50_000
    args = ("consume", "--msgs", str(n), "--size", "128")
    rows.append(Row("js-consume", f"JetStream consume {n:,} x 128 B (nats-py: fetch loop)",
                    args, args))
    ops = 300 if quick else 10_000
    args = ("kv", "--msgs", str(ops), "--size", "128")
    rows.append(Row("kv-put", f"KV put {ops:,} x 128 B, sequential", args, args, "ops/s",
                    metric="put_ops_per_sec"))
    rows.append(Row("kv-get", f"KV get {ops:,} x 128 B, sequential", args, args, "ops/s",
                    metric="get_ops_per_sec"))
    # One put and one get per run; the put and get rows of a size share that run.
    for mib in (64, 256):
        size = (1 << 20) * (mib // 64) if quick else mib << 20
        args = ("obj", "--msgs", "1", "--size", str(size))
        rows.append(Row(f"obj-put-{mib}", f"object put {size >> 20} MiB", args, args,
                        "MiB/s", metric="put_mb_per_sec"))
        rows.append(Row(f"obj-get-{mib}", f"object get {size >> 20} MiB (txnats streams)",
                        args, args, "MiB/s", metric="mb_per_sec"))
    return rows


# ====================================================================== the ceiling
def _read_until(sock: socket.socket, marker: bytes, data: bytes = b"") -> bytes:
    while marker not in data:
        if b"-ERR" in data:
            raise RuntimeError(data.decode("utf-8", "replace").strip())
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError("server closed the connection")
        data += chunk
    return data


def pure_python_pub(
    url: str, msgs: int, size: int, subject: str = "txnats.bench"
) -> dict[str, Any]:
    """Publish ``msgs`` messages with a bare socket: the most plain Python can do."""
    parts = urlsplit(url if "://" in url else f"nats://{url}")
    host, port = parts.hostname or "127.0.0.1", parts.port or 4222
    with socket.create_connection((host, port), timeout=60) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        _read_until(sock, b"\r\n")  # INFO
        connect = {"verbose": False, "pedantic": False, "lang": "python-raw", "version": "0",
                   "protocol": 1, "headers": False, "name": "pure-python-ceiling"}
        sock.sendall(b"CONNECT " + json.dumps(connect).encode() + b"\r\nPING\r\n")
        _read_until(sock, b"PONG\r\n")
        subj = subject.encode()
        payload = b"x" * size
        buf = bytearray()
        send = sock.sendall
        start = time.perf_counter()
        for _ in range(msgs):
            buf += b"PUB %s %d\r\n%s\r\n" % (subj, size, payload)
            if len(buf) >= 65536:
                send(buf)
                buf.clear()
        buf += b"PING\r\n"
        send(buf)
        _read_until(sock, b"PONG\r\n")
        elapsed = max(time.perf_counter() - start, 1e-9)
    return {
        "client": "pure-python", "workload": "pub", "msgs": msgs, "size": size,
        "elapsed": round(elapsed, 6), "msgs_per_sec": round(msgs / elapsed, 1),
        "mb_per_sec": round(msgs * size / elapsed / (1024 * 1024), 2),
    }


# ====================================================================== running
@dataclass
class Cell:
    """The results of one client on one row, over the runs."""

    results: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def median(self, key: str = "msgs_per_sec") -> float | None:
        values = [r[key] for r in self.results if key in r]
        return statistics.median(values) if values else None

    def median_latency(self, pct: str) -> float | None:
        values = [r["latency_us"][pct] for r in self.results if "latency_us" in r]
        return statistics.median(values) if values else None


def _command(client: str, row: Row, url: str) -> list[str]:
    if client == TXNATS:
        return [sys.executable, "-m", "txnats", "bench", *row.txnats, "--server", url, "--json"]
    if client == CEILING:
        assert row.ceiling is not None
        msgs, size = row.ceiling
        return [sys.executable, str(Path(__file__).resolve()), "--ceiling-worker", url,
                str(msgs), str(size)]
    cmd = [sys.executable, str(NATSPY), *row.natspy, "--server", url, "--json"]
    if client == NATSPY_UVLOOP:
        cmd.append("--uvloop")
    return cmd


def run_one(client: str, row: Row, url: str, timeout: float) -> dict[str, Any]:
    """Run one workload once in a fresh subprocess and return its JSON result."""
    env = dict(os.environ)
    env.pop("NATS_URL", None)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run(
        _command(client, row, url), capture_output=True, text=True, timeout=timeout,
        cwd=ROOT, env=env, stdin=subprocess.DEVNULL,
    )
    if proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[-1]
        raise RuntimeError(err)
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise RuntimeError("no output")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def clients_for(row: Row, uvloop: bool) -> list[str]:
    names = [TXNATS, NATSPY_ASYNCIO]
    if uvloop:
        names.append(NATSPY_UVLOOP)
    if row.ceiling is not None:
        names.append(CEILING)
    return names


def run_suite(
    rows: Sequence[Row], url: str, runs: int, uvloop: bool, timeout: float
) -> dict[str, dict[str, Cell]]:
    """Every row, ``runs`` times, the clients alternating (the first one rotates)."""
    cells: dict[str, dict[str, Cell]] = {r.key: {} for r in rows}
    for run in range(runs):
        # Rows with the same workload and arguments (kv-put and kv-get, obj-put-N and
        # obj-get-N) read their figures from one run of it per client.
        done: dict[tuple[str, tuple[str, ...]], dict[str, Any] | Exception] = {}
        for row in rows:
            names = clients_for(row, uvloop)
            shift = run % len(names)
            for client in names[shift:] + names[:shift]:
                cell = cells[row.key].setdefault(client, Cell())
                tag = f"[{run + 1}/{runs}] {row.key:<15} {client:<20}"
                same = (client, row.txnats if client == TXNATS else row.natspy)
                try:
                    earlier = done.get(same)
                    if isinstance(earlier, Exception):
                        raise earlier
                    result = earlier if earlier is not None else run_one(
                        client, row, url, timeout
                    )
                    done[same] = result
                except (RuntimeError, subprocess.TimeoutExpired, ValueError) as e:
                    done[same] = e
                    cell.errors.append(str(e))
                    print(f"{tag} FAILED: {e}", file=sys.stderr, flush=True)
                    continue
                cell.results.append(result)
                print(f"{tag} {result[row.metric]:>12,.1f} {row.unit}", file=sys.stderr,
                      flush=True)
    return cells


# ====================================================================== reporting
def versions() -> dict[str, str]:
    def dist(name: str) -> str:
        try:
            return importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            return "not installed"

    import txnats
    from txnats.testing import find_nats_server

    try:
        out = subprocess.run(
            [find_nats_server(), "--version"], capture_output=True, text=True, timeout=10
        ).stdout.strip()
        server = out.split()[-1].lstrip("v") if out else "unknown"
    except Exception:
        server = "unknown"
    return {
        "txnats": txnats.__version__,
        "nats-py": dist("nats-py"),
        "uvloop": dist("uvloop"),
        "nats-server": server,
        "Twisted": dist("Twisted"),
    }


def machine() -> dict[str, str]:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "nproc": str(os.cpu_count()),
        "cpu": cpu,
        "python": f"{platform.python_implementation()} {platform.python_version()}",
        "os": platform.platform(terse=True),
    }


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


_ERROR_NAME = re.compile(r"\b([A-Z]\w*(?:Error|Exception|Expired))\b")


def _failure(error: str) -> str:
    """A short name for a failed run's error line, for a table cell."""
    found = _ERROR_NAME.search(error)
    return f"FAILED ({found.group(1)})" if found else "FAILED"


def _value(cell: Cell, metric: str) -> str:
    """The cell's median, or, if every run failed, what they failed with."""
    value = cell.median(metric)
    if value is None and cell.errors:
        return _failure(cell.errors[-1])
    return _num(value)


def _ratio(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


def tables(
    rows: Sequence[Row], cells: dict[str, dict[str, Cell]], uvloop: bool
) -> list[tuple[str, list[str], list[list[str]]]]:
    """The report's tables: (title, headers, rows of cells)."""
    head = ["Workload", "Unit", TXNATS, NATSPY_ASYNCIO]
    if uvloop:
        head.append(NATSPY_UVLOOP)
    head.append("txnats / nats-py")
    if uvloop:
        head.append("txnats / nats-py (uvloop)")
    main = []
    latency = []
    ceiling = []
    for row in rows:
        c = cells[row.key]
        tx = c.get(TXNATS, Cell()).median(row.metric)
        py = c.get(NATSPY_ASYNCIO, Cell()).median(row.metric)
        uv = c.get(NATSPY_UVLOOP, Cell()).median(row.metric)
        line = [row.label, row.unit, _value(c.get(TXNATS, Cell()), row.metric),
                _value(c.get(NATSPY_ASYNCIO, Cell()), row.metric)]
        if uvloop:
            line.append(_value(c.get(NATSPY_UVLOOP, Cell()), row.metric))
        line.append(_ratio(tx, py))
        if uvloop:
            line.append(_ratio(tx, uv))
        main.append(line)
        if row.unit == "req/s":
            lat = [row.label]
            for client in (TXNATS, NATSPY_ASYNCIO, NATSPY_UVLOOP if uvloop else None):
                if client is None:
                    continue
                cell = c.get(client, Cell())
                p50, p99 = cell.median_latency("p50"), cell.median_latency("p99")
                lat.append(f"{_num(p50)} / {_num(p99)}")
            latency.append(lat)
        if row.ceiling is not None:
            ceil = c.get(CEILING, Cell()).median()
            ceiling.append([row.label, _num(ceil), _num(tx), _pct(tx, ceil)])
    out = [("Throughput (median of runs)", head, main)]
    if latency:
        lat_head = ["Workload", "txnats p50 / p99 (µs)", "nats-py asyncio p50 / p99 (µs)"]
        if uvloop:
            lat_head.append("nats-py uvloop p50 / p99 (µs)")
        out.append(("Request latency (median of runs)", lat_head, latency))
    if ceiling:
        out.append((
            "Pure-Python ceiling for pub (raw socket, bytes %-formatting, 64 KiB writes)",
            ["Workload", "ceiling msg/s", "txnats msg/s", "txnats / ceiling"],
            ceiling,
        ))
    return out


def _pct(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None or b == 0 else f"{100 * a / b:.0f}%"


def render(title: str, head: list[str], body: list[list[str]], fmt: str) -> str:
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]

    def line(cells: list[str], sep: str = "  ") -> str:
        out = []
        for i, text in enumerate(cells):
            out.append(text.ljust(widths[i]) if i == 0 else text.rjust(widths[i]))
        return sep.join(out).rstrip()

    if fmt == "markdown":
        rows = [f"| {' | '.join(head)} |", "|" + "|".join(
            ":---" if i == 0 else "---:" for i in range(len(head))) + "|"]
        rows += [f"| {' | '.join(r)} |" for r in body]
        return f"**{title}**\n\n" + "\n".join(rows)
    if fmt == "rst":
        rule = "  ".join("=" * w for w in widths)
        text = [rule, line(head), rule, *(line(r) for r in body), rule]
        return f"{title}\n\n" + "\n".join(text)
    rule = "  ".join("-" * w for w in widths)
    return f"{title}\n" + "\n".join([line(head), rule, *(line(r) for r in body)])


def report(
    rows: Sequence[Row],
    cells: dict[str, dict[str, Cell]],
    uvloop: bool,
    runs: int,
    quick: bool,
    fmt: str,
) -> str:
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    mach = machine()
    vers = versions()
    facts = [
        ("date", now),
        ("machine", f"{mach['nproc']} CPUs ({mach['cpu']}), {mach['os']}"),
        ("python", mach["python"]),
        ("versions", ", ".join(f"{k} {v}" for k, v in vers.items())),
        ("runs", f"{runs} per client and workload{' (quick mode)' if quick else ''}; "
                 "medians; each run a fresh process; one shared nats-server"),
    ]
    if fmt == "markdown":
        head = "\n".join(f"- **{k}**: {v}" for k, v in facts)
    elif fmt == "rst":
        head = "\n".join(f":{k}: {v}" for k, v in facts)
    else:
        width = max(len(k) for k, _ in facts)
        head = "\n".join(f"{k.ljust(width)}  {v}" for k, v in facts)
    parts = [head]
    for title, table_head, body in tables(rows, cells, uvloop):
        parts.append(render(title, table_head, body, fmt))
    failed = failures(rows, cells)
    if failed:
        parts.append(render_failures(failed, fmt))
    return "\n\n".join(parts) + "\n"


def failures(
    rows: Sequence[Row], cells: dict[str, dict[str, Cell]]
) -> list[tuple[str, str, str]]:
    """Every failed run: (row label, client, its error line), in table order."""
    out = []
    for row in rows:
        for client, cell in cells[row.key].items():
            out.extend((row.label, client, error) for error in cell.errors)
    return out


def render_failures(failed: Sequence[tuple[str, str, str]], fmt: str) -> str:
    """The failed runs as a list under the tables, each with its error line."""
    title = f"Failed runs ({len(failed)})"
    if fmt == "markdown":
        lines = [f"- {label}, {client}: `{error}`" for label, client, error in failed]
        return f"**{title}**\n\n" + "\n".join(lines)
    lines = [f"- {label}, {client}: {error}" for label, client, error in failed]
    if fmt == "rst":
        return f"{title}\n\n" + "\n".join(lines)
    return f"{title}\n" + "\n".join(lines)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark txnats against nats-py on one shared embedded nats-server.",
    )
    parser.add_argument("--runs", type=int, default=None, help="runs per workload (default 5)")
    parser.add_argument("--quick", action="store_true", help="tiny message counts, 1 run (CI)")
    fmt = parser.add_mutually_exclusive_group()
    fmt.add_argument("--markdown", action="store_true", help="print Markdown tables")
    fmt.add_argument("--rst", action="store_true", help="print reStructuredText tables")
    parser.add_argument(
        "--only", metavar="KEYS",
        help="comma-separated workload keys: " + ", ".join(r.key for r in suite(False)),
    )
    parser.add_argument("--server", metavar="URL", help="use this server, not an embedded one")
    parser.add_argument("--no-uvloop", action="store_true", help="skip nats-py on uvloop")
    parser.add_argument("--json-out", metavar="FILE", help="also write every raw result here")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per run (default 600; quick 60)"
    )
    parser.add_argument("--ceiling-worker", nargs=3, metavar=("URL", "MSGS", "SIZE"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.runs is None:
        args.runs = 1 if args.quick else 5
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.timeout is None:
        args.timeout = 60.0 if args.quick else 600.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.ceiling_worker:
        url, msgs, size = args.ceiling_worker
        print(json.dumps(pure_python_pub(url, int(msgs), int(size))), flush=True)
        return 0
    rows = suite(args.quick)
    if args.only:
        keys = {k.strip() for k in args.only.split(",") if k.strip()}
        unknown = keys - {r.key for r in rows}
        if unknown:
            print(f"compare.py: error: unknown workload(s): {', '.join(sorted(unknown))}",
                  file=sys.stderr)
            return 2
        rows = [r for r in rows if r.key in keys]
    uvloop = not args.no_uvloop and importlib.util.find_spec("uvloop") is not None
    fmt = "markdown" if args.markdown else "rst" if args.rst else "text"

    sys.path.insert(0, str(ROOT))
    from txnats.testing import NatsServer

    server = None
    if args.server:
        url = args.server
    else:
        server = NatsServer(jetstream=True).start()
        url = server.url
    try:
        print(f"nats-server on {url}", file=sys.stderr, flush=True)
        cells = run_suite(rows, url, args.runs, uvloop, args.timeout)
    finally:
        if server is not None:
            server.stop()
    if args.json_out:
        raw = {k: {c: cell.results for c, cell in v.items()} for k, v in cells.items()}
        Path(args.json_out).write_text(json.dumps(raw, indent=1, sort_keys=True))
    print(report(rows, cells, uvloop, args.runs, args.quick, fmt), end="", flush=True)
    failed = sum(len(cell.errors) for v in cells.values() for cell in v.values())
    if failed:
        print(f"compare.py: {failed} run(s) failed", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
