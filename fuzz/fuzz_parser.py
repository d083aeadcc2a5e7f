#!/usr/bin/env python3
"""Coverage-guided fuzzing of txnats' server -> client parser.

    python fuzz/fuzz_parser.py -max_total_time=60            # atheris (libFuzzer)
    python fuzz/fuzz_parser.py -max_total_time=60 corpus/    # ... keeping a corpus
    python fuzz/fuzz_parser.py --no-atheris -max_total_time=60   # plain random mutation

Each input is a byte stream from a "server". Its first byte picks the parser limits
(default, or tiny ones so the limit paths are reached) and seeds the split points; the
rest is fed to ``Parser.feed`` in pieces. The harness fails (a crash for libFuzzer, exit
status 1 in the plain mode) when:

- anything but ``ProtocolError`` leaves ``Parser.feed``, or a ``ProtocolError`` is the
  parser's catch-all for an internal fault ("parser fault: ...");
- ``Parser.buffered`` grows past the control-line limit plus the pending payload plus
  the chunk just fed;
- a failed parser accepts more input;
- feeding the stream whole and feeding it in pieces give different events or a
  different verdict.

Without atheris (or with ``--no-atheris``) the same checks run over random mutations of
valid frames and random bytes until ``-max_total_time`` seconds or ``-runs`` inputs.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import sys
import time
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir))

from txnats.errors import ProtocolError
from txnats.protocol import headers as _headers_mod
from txnats.protocol import parser as _parser_mod
from txnats.protocol.events import OK, PING, PONG, Err, Info, Msg

Parser = _parser_mod.Parser


def _hmsg(args: bytes, header: bytes, payload: bytes) -> bytes:
    """``HMSG <args> <hdr len> <total len>`` with the sizes computed."""
    total = len(header) + len(payload)
    return b"HMSG %s %d %d\r\n%s%s\r\n" % (args, len(header), total, header, payload)


SEEDS = [
    b"PING\r\n",
    b"PONG\r\n",
    b"+OK\r\n",
    b"-ERR 'Authorization Violation'\r\n",
    b'-ERR Permissions Violation for Subscription to foo using queue "q"\r\n',
    b"MSG foo 1 5\r\nhello\r\n",
    b"MSG a.b 12 _INBOX.x 0\r\n\r\n",
    _hmsg(b"h 2", b"NATS/1.0\r\nA: b\r\n\r\n", b"hi"),
    _hmsg(b"_INBOX.r 9", b"NATS/1.0 503\r\n\r\n", b""),
    _hmsg(b"js 3 $JS.FC.x", b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\n\r\n", b""),
    b'INFO {"server_id":"N","max_payload":1048576,"proto":1,"headers":true,'
    b'"connect_urls":["10.0.0.1:4222"],"nonce":"abc"}\r\n',
]
SPLICES = [
    b"\r\n",
    b"\r",
    b"\n",
    b" ",
    b"\t",
    b"\x00",
    b"\xff",
    b"-1",
    b"0",
    b"99999999999",
    b"MSG",
    b"HMSG",
    b"INFO",
    b"-ERR",
    b"NATS/1.0",
    b":",
    b"'",
    b"{",
    b"[",
    b"\r\n\r\n",
]


def _norm(ev: object) -> tuple[Any, ...]:
    if isinstance(ev, Msg):
        hdr = None
        if ev.headers is not None:
            hdr = (ev.headers.status, ev.headers.description, tuple(ev.headers.multi_items()))
        return ("MSG", ev.subject, ev.sid, ev.reply, ev.data, hdr)
    if isinstance(ev, Info):
        return ("INFO", json.dumps(ev.options, sort_keys=True, default=repr))
    if isinstance(ev, Err):
        return ("ERR", ev.message)
    if ev is PING or ev is PONG or ev is OK:
        return (type(ev).__name__,)
    raise AssertionError(f"unknown event type {type(ev).__name__}")


def _bound(parser: Any, chunk_len: int) -> int:
    pending = parser._pending
    return parser.max_control_line + 2 + (pending[4] + 2 if pending else 0) + chunk_len


def _run(stream: bytes, pieces: list[bytes], small: bool) -> tuple[list[Any], bool]:
    parser = Parser(max_control_line=64, max_payload=256) if small else Parser()
    events: list[Any] = []
    for piece in pieces:
        try:
            events.extend(parser.feed(piece))
        except ProtocolError as e:
            if str(e).startswith("parser fault"):
                raise AssertionError(f"internal error reported as ProtocolError: {e}") from e
            events.extend(e.events)
            try:
                parser.feed(b"PING\r\n")
            except ProtocolError:
                pass
            else:
                raise AssertionError("a failed parser accepted more input") from None
            return [_norm(ev) for ev in events], True
        if parser.buffered > _bound(parser, len(piece)):
            raise AssertionError(f"parser holds {parser.buffered} bytes, past its bound")
    return [_norm(ev) for ev in events], False


def check(data: bytes) -> None:
    """The property, for one input (raises AssertionError or the escaping exception)."""
    if not data:
        return
    control, stream = data[0], data[1:]
    small = bool(control & 1)
    rng = random.Random(control >> 1)
    cuts = sorted({rng.randint(0, len(stream)) for _ in range(rng.randint(0, 8))})
    pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
    whole = _run(stream, [stream], small)
    split = _run(stream, pieces, small)
    if whole != split:
        raise AssertionError(f"whole vs split differ: {whole!r} != {split!r}")


# ---------------------------------------------------------------------- plain mode
def _mutate(data: bytes, rng: random.Random) -> bytes:
    buf = bytearray(data)
    for _ in range(rng.randint(1, 5)):
        op = rng.randrange(8)
        pos = rng.randint(0, len(buf))
        if op == 0 and buf:
            buf[rng.randrange(len(buf))] ^= 1 << rng.randrange(8)
        elif op == 1:
            buf[pos:pos] = rng.choice(SPLICES)
        elif op == 2:
            del buf[pos : pos + rng.randint(1, 8)]
        elif op == 3:
            buf[pos:pos] = buf[pos : pos + rng.randint(1, 32)]
        elif op == 4:
            nums = [m.span() for m in re.finditer(rb"\d+", bytes(buf))]
            if nums:
                a, b = rng.choice(nums)
                buf[a:b] = rng.choice([b"0", b"1", b"-3", b"65536", b"99999999999", b"007"])
        elif op == 5:
            del buf[pos:]
        elif op == 6:
            buf[pos:pos] = rng.randbytes(rng.randint(1, 8))
        else:
            buf += rng.choice(SEEDS)
    return bytes(buf)


def _option(argv: list[str], name: str, default: int) -> int:
    for arg in argv:
        if arg.startswith(f"-{name}="):
            return int(arg.split("=", 1)[1])
    return default


def _save_crash(data: bytes) -> str:
    path = f"crash-{hashlib.sha1(data).hexdigest()}"
    with open(path, "wb") as f:
        f.write(data)
    return path


def plain_main(argv: list[str]) -> int:
    max_time = _option(argv, "max_total_time", 60)
    max_runs = _option(argv, "runs", -1)
    seed = _option(argv, "seed", int(time.time()))
    rng = random.Random(seed)
    print(f"plain random-mutation mode (no atheris): seed={seed} max_total_time={max_time}s")
    corpus = list(SEEDS)
    start = time.monotonic()
    runs = 0
    while (max_runs < 0 or runs < max_runs) and time.monotonic() - start < max_time:
        r = rng.random()
        if r < 0.15:
            body = rng.randbytes(rng.randint(0, 300))
        else:
            base = b"".join(rng.choice(corpus) for _ in range(rng.randint(1, 4)))
            body = _mutate(base, rng)
        data = bytes([rng.randrange(256)]) + body
        try:
            check(data)
        except Exception as e:
            path = _save_crash(data)
            print(f"FAILURE after {runs} inputs: {type(e).__name__}: {e}\n  input saved to {path}")
            return 1
        runs += 1
        if runs % 50_000 == 0:
            print(f"#{runs} inputs, {time.monotonic() - start:.0f}s")
    elapsed = time.monotonic() - start
    print(f"Done: {runs} inputs in {elapsed:.1f}s, 0 failures")
    return 0


# ---------------------------------------------------------------------- atheris mode
def atheris_main(argv: list[str]) -> int:
    import atheris

    # Instrument only the code under test (not Twisted, which txnats also imports).
    for name in ("feed", "_parse", "_take_pending", "_control", "_line", "_msg_line"):
        setattr(Parser, name, atheris.instrument_func(getattr(Parser, name)))
    for name in ("validate_info", "_size", "_text"):
        setattr(_parser_mod, name, atheris.instrument_func(getattr(_parser_mod, name)))
    _parser_mod.parse_headers = atheris.instrument_func(_headers_mod.parse_headers)

    def test_one_input(data: bytes) -> None:
        check(data)

    # A corpus directory given on the command line gets the seeds on first use.
    for arg in argv[1:]:
        if not arg.startswith("-") and os.path.isdir(arg) and not os.listdir(arg):
            for i, s in enumerate(SEEDS):
                with open(os.path.join(arg, f"seed-{i}"), "wb") as f:
                    f.write(b"\x00" + s)
    atheris.Setup(argv, test_one_input)
    atheris.Fuzz()
    return 0


def main() -> int:
    argv = list(sys.argv)
    plain = "--no-atheris" in argv
    argv = [a for a in argv if a != "--no-atheris"]
    if not plain:
        try:
            import atheris  # noqa: F401
        except ImportError:
            print("atheris is not installed (pip install atheris): using the plain mode")
            plain = True
    return plain_main(argv) if plain else atheris_main(argv)


if __name__ == "__main__":
    sys.exit(main())
