"""Hostile input, both ways.

Inbound: a named table of hostile server inputs is fed (a) to the sans-IO ``Parser``
and (b) to a ``NatsProtocol`` on a ``StringTransport`` after a completed handshake.
Each case yields exactly its expected events, or exactly one ``ProtocolError`` and an
aborted connection; ``parser.buffered`` stays within its bounds throughout. Every case
is fed as listed, as one chunk and one byte at a time, with the same outcome.

Then Hypothesis: over 100,000 inputs (raw bytes, and structure-aware mutations of valid
frame sequences, each fed with random split points) nothing but ``ProtocolError`` ever
leaves ``Parser.feed``. To keep that under a minute on two cores, each Hypothesis example
draws a seed and derives many cheap mutations from it; the real count of inputs is
checked.

Outbound: Hypothesis over subjects, replies, queues, header names and values drawn
from text with space, tab, CR, LF, NUL and non-ASCII: invalid input raises with 0
bytes written by ``Client.publish``/``subscribe``; valid input round-trips.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from twisted.internet.error import ConnectionLost
from twisted.internet.testing import MemoryReactorClock, StringTransport
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txnats import Client, Options
from txnats.connection import NatsProtocol
from txnats.errors import (
    AuthorizationError,
    BadHeaderError,
    BadSubjectError,
    ConnectError,
    MalformedHeadersError,
    NatsError,
    ProtocolError,
    ServerError,
    StaleConnectionError,
)
from txnats.protocol.events import OK, PING, PONG, BadHeaders, Err, Info, Msg
from txnats.protocol.headers import Headers, parse_headers
from txnats.protocol.parser import DEFAULT_MAX_CONTROL_LINE, HARD_MAX_PAYLOAD, Parser
from txnats.testing import FakeHandler

from .support import wire
from .support.wire import info_line

MAX_PAYLOAD = 1024 * 1024
#: What NatsProtocol allows inbound after an INFO announcing MAX_PAYLOAD.
INBOUND_LIMIT = MAX_PAYLOAD + 64 * 1024
LINE = DEFAULT_MAX_CONTROL_LINE
CHUNK = 64 * 1024

#: The INFO of these tests (as bytes: ``info_line(INFO, ...)``).
INFO: dict[str, Any] = {**wire.INFO, "server_id": "NHOSTILE", "max_payload": MAX_PAYLOAD}


# ---------------------------------------------------------------------- event helpers
def norm(ev: object) -> tuple[Any, ...]:
    """A comparable form of one parser event."""
    if isinstance(ev, Msg):
        hdr: tuple[Any, ...] | None = None
        if ev.headers is not None and ev.headers.raw is not None:
            hdr = ("RAW", ev.headers.raw, tuple(ev.headers.multi_items()), ev.headers.status)
        elif ev.headers is not None:
            hdr = (ev.headers.status, ev.headers.description, tuple(ev.headers.multi_items()))
        return ("MSG", ev.subject, ev.sid, ev.reply, ev.data, hdr)
    if isinstance(ev, BadHeaders):
        return ("BAD-HEADERS", ev.subject, ev.sid)
    if isinstance(ev, Info):
        return ("INFO", json.dumps(ev.options, sort_keys=True))
    if isinstance(ev, Err):
        return ("ERR", ev.message)
    if ev is PING:
        return ("PING",)
    if ev is PONG:
        return ("PONG",)
    if ev is OK:
        return ("OK",)
    raise AssertionError(f"unknown event {ev!r}")


def M(
    subject: str,
    sid: int,
    data: bytes,
    reply: str | None = None,
    headers: tuple[int | None, str | None, tuple[tuple[str, str], ...]] | None = None,
) -> tuple[Any, ...]:
    return ("MSG", subject, sid, reply, data, headers)


def U(subject: str, sid: int, block: bytes, data: bytes = b"") -> list[tuple[Any, ...]]:
    """A message whose header block does not parse: delivered unparsed, then reported."""
    return [
        ("MSG", subject, sid, None, data, ("RAW", block, (), None)),
        ("BAD-HEADERS", subject, sid),
    ]


def E(message: str) -> tuple[Any, ...]:
    return ("ERR", message)


def I(**fields: Any) -> tuple[Any, ...]:  # noqa: E743
    return ("INFO", json.dumps({**INFO, **fields}, sort_keys=True))


P, PO, OKE = ("PING",), ("PONG",), ("OK",)


def hmsg(subject: bytes, sid: bytes, header: bytes, payload: bytes, reply: bytes = b"") -> bytes:
    rep = reply + b" " if reply else b""
    return b"HMSG %s %s %s%d %d\r\n%s%s\r\n" % (
        subject,
        sid,
        rep,
        len(header),
        len(header) + len(payload),
        header,
        payload,
    )


# ---------------------------------------------------------------------- the table
@dataclass
class Case:
    """One hostile input: its chunks, and what must come of it."""

    name: str
    chunks: Sequence[bytes]
    #: The events (normalized) before the end, or before the ProtocolError.
    events: list[tuple[Any, ...]] = field(default_factory=list)
    #: True: exactly one ProtocolError, and an aborted connection.
    error: bool = False
    #: max_payload announced in INFO (the parser gets the same limit as the protocol).
    max_payload: int = MAX_PAYLOAD
    #: For -ERR: the error type the protocol closes with (None: connection stays open).
    closes_with: type[NatsError] | None = None
    #: The input ends inside a frame (a PING after it is not a frame of its own).
    incomplete: bool = False

    @property
    def data(self) -> bytes:
        return b"".join(self.chunks)

    def parser(self) -> Parser:
        return Parser(max_payload=min(self.max_payload + 64 * 1024, HARD_MAX_PAYLOAD))


FATAL_ERRS: list[tuple[str, type[NatsError]]] = [
    ("Unknown Protocol Operation", ServerError),
    ("Attempted To Connect To Route Port", ServerError),
    ("Authorization Violation", AuthorizationError),
    ("Authorization Timeout", AuthorizationError),
    ("Invalid Client Protocol", ServerError),
    ("Maximum Control Line Exceeded", ServerError),
    ("Parser Error", ServerError),
    ("Secure Connection - TLS Required", ServerError),
    ("Stale Connection", StaleConnectionError),
    ("Maximum Connections Exceeded", ServerError),
    ("Slow Consumer", ServerError),
    ("Maximum Payload Violation", ServerError),
    ("User/Account Authentication Expired", AuthorizationError),
]
SURVIVABLE_ERRS = [
    "Invalid Subject",
    "Permissions Violation for Subscription to foo.bar",
    'Permissions Violation for Subscription to foo.bar using queue "q"',
    "Permissions Violation for Publish to foo.bar",
    "maximum subscriptions exceeded",
]

MSG1 = b"MSG foo 1 5\r\nhello\r\n"
HDR = b"NATS/1.0\r\nA: b\r\n\r\n"


def _cases() -> list[Case]:
    C = Case

    def bad_block(name: str, block: bytes) -> Case:
        """A message on ``a`` whose header block does not parse."""
        return C(name, [hmsg(b"a", b"1", block, b"")], events=U("a", 1, block))
    cases = [
        # ---- split frames and other valid-but-awkward framing
        C("split_msg_each_byte", [bytes([b]) for b in MSG1], [M("foo", 1, b"hello")]),
        C(
            "split_hmsg_each_byte",
            [bytes([b]) for b in hmsg(b"h", b"2", HDR, b"hi")],
            [M("h", 2, b"hi", None, (None, None, (("A", "b"),)))],
        ),
        C("split_between_cr_and_lf", [b"PING\r", b"\nPONG\r\n"], [P, PO]),
        C("split_payload_trailer", [b"MSG a 1 3\r\nabc\r", b"\n"], [M("a", 1, b"abc")]),
        C("split_info_mid_json", [info_line(INFO)[:20], info_line(INFO)[20:]], [I()]),
        C(
            "many_frames_one_chunk",
            [b"PING\r\nPONG\r\n+OK\r\n" + MSG1],
            [P, PO, OKE, M("foo", 1, b"hello")],
        ),
        C("payload_is_crlfs", [b"MSG a 1 4\r\n\r\n\r\n\r\n"], [M("a", 1, b"\r\n\r\n")]),
        C("payload_holds_a_frame", [b"MSG a 1 6\r\nPING\r\n\r\n"], [M("a", 1, b"PING\r\n")]),
        C("empty_payload", [b"MSG a 1 0\r\n\r\n"], [M("a", 1, b"")]),
        C("lowercase_ops", [b"ping\r\nmsg a 1 1\r\nx\r\n"], [P, M("a", 1, b"x")]),
        C("tabs_and_runs_of_spaces", [b"MSG\ta  1\t 2\r\nhi\r\n"], [M("a", 1, b"hi")]),
        C("msg_with_reply", [b"MSG a 1 r.x 1\r\nx\r\n"], [M("a", 1, b"x", "r.x")]),
        C("incomplete_payload_waits", [b"MSG a 1 5\r\nhel"], [], incomplete=True),
        C("incomplete_line_waits", [b"PIN"], [], incomplete=True),
        # ---- unknown or misused operations
        C("unknown_op", [b"FOO bar\r\n"], error=True),
        C("client_op_pub", [b"PUB a 1\r\nx\r\n"], error=True),
        C("client_op_sub", [b"SUB a 1\r\n"], error=True),
        C("client_op_connect", [b"CONNECT {}\r\n"], error=True),
        C("empty_line", [b"\r\n"], error=True),
        C("whitespace_line", [b"  \t \r\n"], error=True),
        C("op_prefix_pingx", [b"PINGX\r\n"], error=True),
        C("ping_with_args", [b"PING now\r\n"], error=True),
        C("pong_with_args", [b"PONG 1\r\n"], error=True),
        C("ok_with_args", [b"+OK fine\r\n"], error=True),
        C("binary_op", [b"\x00\x01\x02\xff\r\n"], error=True),
        C("http_response", [b"HTTP/1.1 400 Bad Request\r\n"], error=True),
        C(
            "valid_then_unknown",
            [b"PING\r\n" + MSG1 + b"NOPE\r\n"],
            [P, M("foo", 1, b"hello")],
            error=True,
        ),
        # ---- MSG / HMSG arity and sids
        C("msg_two_args", [b"MSG a 1\r\n"], error=True),
        C("msg_one_arg", [b"MSG a\r\n"], error=True),
        C("msg_no_args", [b"MSG\r\n"], error=True),
        C("msg_five_args", [b"MSG a 1 r x 5\r\nhello\r\n"], error=True),
        C("hmsg_three_args", [b"HMSG a 1 12\r\n"], error=True),
        C("hmsg_six_args", [b"HMSG a 1 r s 12 12\r\n"], error=True),
        C("msg_sid_not_numeric", [b"MSG a b 1\r\nx\r\n"], error=True),
        C("msg_sid_negative", [b"MSG a -1 1\r\nx\r\n"], error=True),
        C("msg_sid_huge", [b"MSG a " + b"9" * 30 + b" 1\r\nx\r\n"], error=True),
        # ---- sizes
        C("size_not_numeric", [b"MSG a 1 abc\r\n"], error=True),
        C("size_negative", [b"MSG a 1 -5\r\nhello\r\n"], error=True),
        C("size_plus_sign", [b"MSG a 1 +5\r\nhello\r\n"], error=True),
        C("size_float", [b"MSG a 1 5.0\r\nhello\r\n"], error=True),
        C("size_hex", [b"MSG a 1 0x5\r\nhello\r\n"], error=True),
        C("size_unicode_digit", ["MSG a 1 \u0665\r\nhello\r\n".encode()], error=True),
        C("size_huge_20_digits", [b"MSG a 1 99999999999999999999\r\n"], error=True),
        C("size_leading_zeros", [b"MSG a 1 007\r\nabcdefg\r\n"], [M("a", 1, b"abcdefg")]),
        C("size_leading_zeros_11_digits", [b"MSG a 1 00000000005\r\nhello\r\n"], error=True),
        C("size_over_max_payload", [b"MSG a 1 %d\r\n" % (INBOUND_LIMIT + 1)], error=True),
        C(
            "size_over_hard_cap",
            [b"MSG a 1 %d\r\n" % (HARD_MAX_PAYLOAD + 1)],
            error=True,
            max_payload=2**40,
        ),
        C("hmsg_total_over_max_payload", [b"HMSG a 1 12 %d\r\n" % (INBOUND_LIMIT + 1)], error=True),
        C("hmsg_header_bigger_than_total", [b"HMSG a 1 20 10\r\n"], error=True),
        C("hmsg_header_too_short", [b"HMSG a 1 5 5\r\nhello\r\n"], events=U("a", 1, b"hello")),
        C("hmsg_header_size_not_numeric", [b"HMSG a 1 x 12\r\n"], error=True),
        C("payload_shorter_than_size", [b"MSG a 1 5\r\nabc\r\nPING\r\n"], error=True),
        C("payload_longer_than_size", [b"MSG a 1 2\r\nabc\r\n"], error=True),
        # ---- CR / LF
        C("bare_lf_terminator", [b"PING\nPONG\r\n"], error=True),
        C("bare_cr_in_line", [b"PING\rPONG\r\n"], error=True),
        C("lf_only_line", [b"\n\r\n"], error=True),
        C("payload_then_lf_only", [b"MSG a 1 1\r\nx\nPING\r\n"], error=True),
        C("payload_then_garbage", [b"MSG a 1 1\r\nxXY"], error=True),
        C("bare_cr_in_subject", [b"MSG a\rb 1 1\r\nx\r\n"], error=True),
        # ---- over-long control lines
        C("line_over_limit_no_crlf", [b"A" * (LINE + 1)], error=True),
        C("line_over_limit_with_crlf", [b"-ERR '" + b"e" * LINE + b"'\r\n"], error=True),
        C("line_over_limit_in_1k_chunks", [b"X" * 1024] * (LINE // 1024 + 1), error=True),
        C(
            "line_at_limit_then_cr",
            [b"-ERR " + b"e" * (LINE - 5) + b"\r", b"\n"],
            [E("e" * (LINE - 5))],
            closes_with=ServerError,
        ),
        C(
            "info_over_limit",
            [b'INFO {"connect_urls": [' + b'"h:1",' * (LINE // 6) + b"]}\r\n"],
            error=True,
        ),
        # ---- malformed header blocks
        bad_block("hdr_wrong_version", b"HTTP/1.0\r\n\r\n"),
        bad_block("hdr_no_blank_line", b"NATS/1.0\r\nA: b\r\n"),
        bad_block("hdr_line_without_colon", b"NATS/1.0\r\nNoColon\r\n\r\n"),
        bad_block("hdr_name_with_space", b"NATS/1.0\r\nBad Name: v\r\n\r\n"),
        bad_block("hdr_empty_name", b"NATS/1.0\r\n: v\r\n\r\n"),
        bad_block("hdr_bad_status", b"NATS/1.0 5x3\r\n\r\n"),
        bad_block("hdr_four_digit_status", b"NATS/1.0 5030\r\n\r\n"),
        bad_block("hdr_version_suffix", b"NATS/1.0x\r\n\r\n"),
        bad_block("hdr_bare_lf", b"NATS/1.0\r\nA: b\nC: d\r\n\r\n"),
        bad_block("hdr_blank_line_inside", b"NATS/1.0\r\n\r\nA: b\r\n\r\n"),
        C(
            "hdr_size_cuts_block",
            [b"HMSG a 1 14 18\r\nNATS/1.0\r\nA: b\r\n\r\n\r\n"],
            events=U("a", 1, b"NATS/1.0\r\nA: b", b"\r\n\r\n"),
        ),
        C(
            "hdr_status_503_no_description",
            [hmsg(b"_INBOX.x", b"3", b"NATS/1.0 503\r\n\r\n", b"")],
            [M("_INBOX.x", 3, b"", None, (503, None, ()))],
        ),
        C(
            "hdr_multi_value_non_utf8",
            [hmsg(b"a", b"1", b"NATS/1.0\r\nK: 1\r\nK:2\r\nX: \xff\r\n\r\n", b"p")],
            [M("a", 1, b"p", None, (None, None, (("K", "1"), ("K", "2"), ("X", "\udcff"))))],
        ),
        # ---- INFO: garbage, not an object, wrong types
        C("info_not_json", [b"INFO {not json\r\n"], error=True),
        C("info_no_payload", [b"INFO\r\n"], error=True),
        C("info_array", [b"INFO [1, 2]\r\n"], error=True),
        C("info_number", [b"INFO 42\r\n"], error=True),
        C("info_string", [b'INFO "server"\r\n'], error=True),
        C("info_null", [b"INFO null\r\n"], error=True),
        C("info_max_payload_string", [info_line(INFO, max_payload="1024")], error=True),
        C("info_max_payload_bool", [info_line(INFO, max_payload=True)], error=True),
        C("info_max_payload_negative", [info_line(INFO, max_payload=-1)], error=True),
        C("info_max_payload_zero", [info_line(INFO, max_payload=0)], error=True),
        C("info_max_payload_float", [info_line(INFO, max_payload=1.5)], error=True),
        C("info_max_payload_nan", [b'INFO {"max_payload": NaN}\r\n'], error=True),
        C(
            "info_max_payload_5000_digits",
            [b'INFO {"max_payload": 1' + b"0" * 5000 + b"}\r\n"],
            error=True,
        ),
        C("info_connect_urls_string", [info_line(INFO, connect_urls="h:1")], error=True),
        C("info_connect_urls_numbers", [info_line(INFO, connect_urls=[1, 2])], error=True),
        C("info_tls_required_string", [info_line(INFO, tls_required="yes")], error=True),
        C("info_port_string", [info_line(INFO, port="4222")], error=True),
        C("info_nonce_number", [info_line(INFO, nonce=5)], error=True),
        C("info_deeply_nested", [b"INFO " + b"[" * 30000 + b"]" * 30000 + b"\r\n"], error=True),
        C("info_not_utf8", [b'INFO {"server_id": "\xff\xfe"}\r\n'], error=True),
        C(
            "info_unknown_fields_ok",
            [info_line(INFO, future_field={"x": [1]})],
            [I(future_field={"x": [1]})],
        ),
        # ---- non-UTF-8 subjects, replies and bytes
        C("subject_not_utf8", [b"MSG \xff\xfe 1 1\r\nx\r\n"], [M("\udcff\udcfe", 1, b"x")]),
        C("reply_not_utf8", [b"MSG a 1 \xc0\xaf 1\r\nx\r\n"], [M("a", 1, b"x", "\udcc0\udcaf")]),
        C(
            "hmsg_subject_not_utf8",
            [hmsg(b"\xe2\x28\xa1", b"1", HDR, b"")],
            [M("\udce2(\udca1", 1, b"", None, (None, None, (("A", "b"),)))],
        ),
        C("subject_with_nul", [b"MSG a\x00b 1 1\r\nx\r\n"], [M("a\x00b", 1, b"x")]),
        # ---- -ERR oddities
        C("err_no_text", [b"-ERR\r\n"], [E("")], closes_with=ServerError),
        C("err_empty_quotes", [b"-ERR ''\r\n"], [E("")], closes_with=ServerError),
        C("err_unterminated_quote", [b"-ERR 'oops\r\n"], [E("'oops")], closes_with=ServerError),
        C("err_not_utf8", [b"-ERR '\xff\xfe'\r\n"], [E("\udcff\udcfe")], closes_with=ServerError),
    ]
    # ---- every -ERR string of PROTOCOL.md 1.8, quoted and unquoted
    for text, err_type in FATAL_ERRS:
        for quoted in (True, False):
            wire = f"'{text}'" if quoted else text
            cases.append(
                C(
                    f"err_{'quoted' if quoted else 'bare'}_{_slug(text)}",
                    [f"-ERR {wire}\r\n".encode()],
                    [E(text)],
                    closes_with=err_type,
                )
            )
    for text in SURVIVABLE_ERRS:
        for quoted in (True, False):
            wire = f"'{text}'" if quoted else text
            cases.append(
                C(
                    f"err_{'quoted' if quoted else 'bare'}_{_slug(text)}",
                    [f"-ERR {wire}\r\n".encode()],
                    [E(text)],
                )
            )
    return cases


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")


CASES = _cases()


# ---------------------------------------------------------------------- feeding
class Outcome:
    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.errors: list[ProtocolError] = []
        self.max_buffered_excess = 0  # how far buffered ever went past its bound


def _bound(parser: Parser, chunk_len: int) -> int:
    """The most a parser may hold after a feed of ``chunk_len`` bytes."""
    pending = parser._pending
    payload = pending[4] + 2 if pending is not None else 0
    return parser.max_control_line + 2 + payload + chunk_len


def feed_parser(parser: Parser, chunks: Iterable[bytes]) -> Outcome:
    """Feed chunks until the end or the first ProtocolError (then stop, as a client would)."""
    out = Outcome()
    for chunk in chunks:
        try:
            evs = parser.feed(chunk)
        except ProtocolError as e:
            out.errors.append(e)
            out.events.extend(norm(ev) for ev in e.events)
            break
        out.events.extend(norm(ev) for ev in evs)
        excess = parser.buffered - _bound(parser, len(chunk))
        out.max_buffered_excess = max(out.max_buffered_excess, excess)
    return out


def splittings(case: Case) -> Iterator[tuple[str, Sequence[bytes]]]:
    yield "as listed", case.chunks
    data = case.data
    yield "whole", [data]
    if len(data) <= 4096:
        yield "byte by byte", [data[i : i + 1] for i in range(len(data))]
    else:
        yield "in 997-byte chunks", [data[i : i + 997] for i in range(0, len(data), 997)]


def make_protocol(
    max_payload: int = MAX_PAYLOAD, handshake: bool = True
) -> tuple[NatsProtocol, StringTransport, FakeHandler]:
    handler = FakeHandler()
    proto = NatsProtocol(handler, MemoryReactorClock())
    transport = StringTransport()
    proto.makeConnection(transport)
    if handshake:
        proto.dataReceived(info_line(INFO, max_payload=max_payload))
        proto.dataReceived(b"PONG\r\n")
        handler.run_scheduled()
        assert proto.ready and proto.handshake.called
        transport.clear()
    return proto, transport, handler


# ---------------------------------------------------------------------- table tests
class HostileTableTests(SynchronousTestCase):
    """Every case of the table, through the Parser and through a NatsProtocol."""

    def test_table_size_and_names(self) -> None:
        """The table holds at least 60 cases, each with a unique name."""
        names = [c.name for c in CASES]
        self.assertGreaterEqual(len(CASES), 60)
        self.assertEqual(len(names), len(set(names)))

    def test_parser(self) -> None:
        """Parser: each case gives its events, or exactly one ProtocolError; memory bounded."""
        failures = []
        for case in CASES:
            for how, chunks in splittings(case):
                parser = case.parser()
                out = feed_parser(parser, chunks)
                problem = None
                if out.events != case.events:
                    problem = f"events {out.events[:4]} != {case.events[:4]}"
                elif len(out.errors) != (1 if case.error else 0):
                    problem = f"{len(out.errors)} ProtocolErrors ({out.errors[:1]})"
                elif out.max_buffered_excess > 0:
                    problem = f"buffered {out.max_buffered_excess} bytes past the bound"
                elif case.error:
                    # A failed parser refuses everything after, with ProtocolError.
                    try:
                        parser.feed(b"PING\r\n")
                        problem = "parser accepted input after failing"
                    except ProtocolError:
                        pass
                    if parser.buffered:
                        problem = f"failed parser still holds {parser.buffered} bytes"
                    msg = str(out.errors[0])
                    if msg.startswith("parser fault"):
                        problem = f"internal error disguised as ProtocolError: {msg}"
                if problem:
                    failures.append(f"{case.name} ({how}): {problem}")
        self.assertEqual(failures[:20], [], f"{len(failures)} failures")

    def test_protocol(self) -> None:
        """NatsProtocol: each case is delivered, or aborts once with a ProtocolError."""
        failures = []
        for case in CASES:
            for how, chunks in splittings(case):
                problem = self._run_protocol_case(case, chunks)
                if problem:
                    failures.append(f"{case.name} ({how}): {problem}")
        self.assertEqual(failures[:20], [], f"{len(failures)} failures")

    def _run_protocol_case(self, case: Case, chunks: Sequence[bytes]) -> str | None:
        proto, transport, handler = make_protocol(case.max_payload)
        for chunk in chunks:
            proto.dataReceived(chunk)
            if proto.parser.buffered > _bound(proto.parser, len(chunk)):
                return f"parser holds {proto.parser.buffered} bytes"
        aborted = transport.disconnected
        # Anything after the end is ignored once the connection is being closed.
        proto.dataReceived(b"PING\r\n")
        proto.clock.advance(0)  # writes go out at the end of the reactor turn
        pongs = transport.value().count(b"PONG\r\n")
        if aborted:
            proto.connectionLost(Failure(ConnectionLost()))
        msgs = [norm(m) for m in handler.msgs]
        want_msgs = [e for e in case.events if e[0] == "MSG"]
        if msgs != want_msgs:
            return f"messages {msgs[:3]} != {want_msgs[:3]}"
        want_infos = [e for e in case.events if e[0] == "INFO"]
        infos = [("INFO", json.dumps(i, sort_keys=True)) for i in handler.updates]
        if infos != want_infos:
            return f"INFO updates {infos} != {want_infos}"
        if case.error:
            if not aborted:
                return "connection not aborted"
            if len(handler.lost) != 1 or type(handler.lost[0][1]) is not ProtocolError:
                return f"lost with {handler.lost!r}, wanted one ProtocolError"
            if pongs > case.events.count(P):
                return "answered a PING after the protocol error"
            return None
        if case.closes_with is not None:
            if not aborted:
                return "fatal -ERR did not close the connection"
            if len(handler.lost) != 1 or type(handler.lost[0][1]) is not case.closes_with:
                return f"lost with {handler.lost!r}, wanted {case.closes_with.__name__}"
            return None
        if aborted or handler.lost:
            return f"connection closed: {handler.lost!r}"
        want_bad = [(e[1], e[2]) for e in case.events if e[0] == "BAD-HEADERS"]
        bad = [
            (e.subject, e.sid) for e in handler.message_errors
            if isinstance(e, MalformedHeadersError)
        ]
        if bad != want_bad or len(handler.message_errors) != len(want_bad):
            return f"reported {handler.message_errors!r}, wanted {want_bad}"
        want_errs = [e[1] for e in case.events if e[0] == "ERR"]
        if [e.server_message for e in handler.errors] != want_errs:
            return f"server errors {handler.errors!r} != {want_errs}"
        want_pongs = case.events.count(P) + (0 if case.incomplete else 1)
        if pongs != want_pongs:
            return f"{pongs} PONGs for {want_pongs} PINGs"
        return None

    def test_bad_info_first_sends_no_connect(self) -> None:
        """A bad first INFO (or any non-INFO opener) aborts before CONNECT is written."""
        openers = [c for c in CASES if c.error and c.data.upper().startswith(b"INFO")]
        openers += [
            Case("msg_first", [MSG1], error=True),
            Case("pong_first", [b"PONG\r\n"], error=True),
            Case("ping_first", [b"PING\r\n"], error=True),
            Case("garbage_first", [b"\x16\x03\x01\x00\xa5\x01\x00"], error=True),
        ]
        self.assertGreaterEqual(len(openers), 20)
        for case in openers:
            proto, transport, handler = make_protocol(handshake=False)
            proto.dataReceived(case.data if len(case.data) < LINE else case.data[: LINE + 2])
            self.assertEqual(transport.value(), b"", case.name)
            self.assertEqual(handler.msgs, [], case.name)
            if case.name == "garbage_first":
                # No CRLF yet: nothing to judge; the connect timeout ends the attempt.
                self.assertFalse(transport.disconnected, case.name)
                continue
            self.assertTrue(transport.disconnected, case.name)
            proto.connectionLost(Failure(ConnectionLost()))
            failure = self.failureResultOf(proto.handshake, ConnectError)
            self.assertNotIsInstance(failure.value, ProtocolError)


class FloodTests(SynchronousTestCase):
    """100 MB without a CRLF: refused once the limit passes; memory stays bounded."""

    TOTAL = 100 * 1024 * 1024
    GARBAGE = bytes(range(14, 256)) * (CHUNK // 242) + b"X" * (CHUNK % 242)

    def chunks(self) -> Iterator[bytes]:
        assert len(self.GARBAGE) == CHUNK and b"\r" not in self.GARBAGE
        for _ in range(self.TOTAL // CHUNK):
            yield self.GARBAGE

    def test_parser_flood(self) -> None:
        """The parser raises as soon as the line limit is passed, holding <= limit + chunk."""
        parser = Parser()
        fed = max_held = 0
        with self.assertRaises(ProtocolError):
            for chunk in self.chunks():
                fed += len(chunk)
                parser.feed(chunk)
                max_held = max(max_held, parser.buffered)
        self.assertLessEqual(max_held, parser.max_control_line + CHUNK)
        self.assertLessEqual(fed, parser.max_control_line + CHUNK)
        self.assertEqual(parser.buffered, 0)

    def test_protocol_flood(self) -> None:
        """A connection fed all 100 MB aborts once, with one ProtocolError, holding nothing."""
        proto, transport, handler = make_protocol()
        fed = 0
        for chunk in self.chunks():
            proto.dataReceived(chunk)
            fed += len(chunk)
            self.assertLessEqual(proto.parser.buffered, proto.parser.max_control_line + CHUNK)
        self.assertEqual(fed, self.TOTAL)
        self.assertTrue(transport.disconnected)
        self.assertEqual(transport.value(), b"")
        proto.connectionLost(Failure(ConnectionLost()))
        self.assertEqual([type(e) for _, e in handler.lost], [ProtocolError])
        self.assertEqual(proto.parser.buffered, 0)

    def test_announced_size_not_allocated(self) -> None:
        """A MSG announcing 60 MiB when 1 MiB is allowed fails before any payload arrives."""
        proto, transport, _ = make_protocol()
        proto.dataReceived(b"MSG a 1 %d\r\n" % (60 * 1024 * 1024))
        self.assertTrue(transport.disconnected)
        self.assertEqual(proto.parser.buffered, 0)


# ---------------------------------------------------------------------- Hypothesis: inbound
#: Valid frames the structure-aware generator starts from.
VALID_FRAMES = [
    b"PING\r\n",
    b"PONG\r\n",
    b"+OK\r\n",
    b"-ERR 'Authorization Violation'\r\n",
    b"-ERR 'Permissions Violation for Publish to foo'\r\n",
    MSG1,
    b"MSG a.b.c 12 _INBOX.x.y 0\r\n\r\n",
    b"MSG q 7 3\r\n\r\n\r\r\n",
    hmsg(b"h", b"2", HDR, b"hi"),
    hmsg(b"_INBOX.r", b"9", b"NATS/1.0 503\r\n\r\n", b""),
    hmsg(
        b"js",
        b"3",
        b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\n\r\n",
        b"",
        b"$JS.FC.x",
    ),
    info_line(INFO, connect_urls=["10.0.0.1:4222", "[::1]:4223"], ldm=False, nonce="abc"),
    b'INFO {"max_payload":1024}\r\n',
]
#: Tokens the mutator splices in: what is most likely to break a parser.
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
    b"4294967296",
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
    b"007",
    b"+",
    b"\xc0\xaf",
]

COUNTS = {"raw": 0, "structured": 0}
# Enough Hypothesis examples x mutations per example for >= 50,000 inputs per property.
EXAMPLES = 500
MUTATIONS = 100
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    database=None,
    phases=[Phase.explicit, Phase.generate, Phase.shrink],
    suppress_health_check=list(HealthCheck),
)


def mutate(data: bytes, rng: random.Random) -> bytes:
    """One structure-aware mutation (a few stacked edits) of ``data``."""
    buf = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        op = rng.randrange(9)
        pos = rng.randint(0, len(buf))
        if op == 0 and buf:  # flip a bit
            i = rng.randrange(len(buf))
            buf[i] ^= 1 << rng.randrange(8)
        elif op == 1:  # splice in a token
            buf[pos:pos] = rng.choice(SPLICES)
        elif op == 2 and buf:  # delete a range
            del buf[pos : pos + rng.randint(1, 8)]
        elif op == 3 and buf:  # duplicate a range
            j = rng.randint(pos, min(len(buf), pos + 32))
            buf[pos:pos] = buf[pos:j]
        elif op == 4:  # rewrite a number
            nums = [m.span() for m in re.finditer(rb"\d+", bytes(buf))]
            if nums:
                a, b = rng.choice(nums)
                buf[a:b] = rng.choice([b"0", b"1", b"12", b"-3", b"65536", b"99999999999", b"00"])
        elif op == 5:  # truncate
            del buf[pos:]
        elif op == 6:  # random bytes
            buf[pos:pos] = rng.randbytes(rng.randint(1, 8))
        elif op == 7:  # replace a space by another separator
            spaces = [i for i, c in enumerate(buf) if c == 0x20]
            if spaces:
                buf[rng.choice(spaces)] = rng.choice(b"\t\r\n\x00\x0b")
        else:  # append another valid frame
            buf += rng.choice(VALID_FRAMES)
    return bytes(buf)


def random_split(data: bytes, rng: random.Random) -> list[bytes]:
    if len(data) < 2 or rng.random() < 0.3:
        return [data]
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(1, 6))))
    return [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]


def check_feed(data: bytes, rng: random.Random, small: bool) -> tuple[list[Any], bool]:
    """Feed ``data`` in random pieces; only ProtocolError may escape; bounds hold."""
    parser = Parser(max_control_line=256, max_payload=4096) if small else Parser()
    events: list[Any] = []
    failed = False
    for chunk in random_split(data, rng):
        try:
            events.extend(parser.feed(chunk))
        except ProtocolError as e:
            assert not str(e).startswith("parser fault"), f"internal error: {e} on {data!r}"
            events.extend(e.events)
            failed = True
            break
        assert parser.buffered <= _bound(parser, len(chunk)), (parser.buffered, data)
    for ev in events:
        assert type(ev) in (Msg, Info, Err, BadHeaders) or ev in (PING, PONG, OK), ev
    return [norm(e) for e in events], failed


class InboundPropertyTests(SynchronousTestCase):
    """Hypothesis: nothing but ProtocolError ever leaves Parser.feed."""

    @FUZZ
    @given(seed=st.integers(0, 2**63), data=st.binary(max_size=512), small=st.booleans())
    def raw_bytes_property(self, seed: int, data: bytes, small: bool) -> None:
        """Arbitrary bytes, and random byte strings derived from them, in random splits."""
        rng = random.Random(seed)
        check_feed(data, rng, small)
        COUNTS["raw"] += 1
        for _ in range(MUTATIONS - 1):
            n = rng.randint(0, 300)
            if rng.random() < 0.5:
                blob = rng.randbytes(n)
            else:  # bytes from a protocol-ish alphabet, so that lines do end
                blob = bytes(
                    rng.choice(b"MSGHINFOPOKER+-' \t\r\n0123456789{}[]:\"\xff.") for _ in range(n)
                )
            check_feed(blob, rng, small)
            COUNTS["raw"] += 1

    @FUZZ
    @given(
        seed=st.integers(0, 2**63),
        frames=st.lists(st.sampled_from(VALID_FRAMES), min_size=1, max_size=6),
        small=st.booleans(),
    )
    def mutated_frames_property(self, seed: int, frames: list[bytes], small: bool) -> None:
        """Valid frames parse the same however split; their mutations raise only ProtocolError."""
        rng = random.Random(seed)
        base = b"".join(frames)
        whole, failed = check_feed(base, random.Random(0), small=False)
        self.assertFalse(failed)
        split, _ = check_feed(base, rng, small=False)
        self.assertEqual(whole, split)
        COUNTS["structured"] += 2
        for _ in range(MUTATIONS - 2):
            check_feed(mutate(base, rng), rng, small)
            COUNTS["structured"] += 1

    def test_raw_and_mutated_inputs_raise_only_protocol_error(self) -> None:
        """Over at least 100,000 raw and mutated inputs, only ProtocolError escapes."""
        COUNTS["raw"] = COUNTS["structured"] = 0
        self.raw_bytes_property()
        self.mutated_frames_property()
        self.assertGreater(COUNTS["raw"], 0)
        self.assertGreater(COUNTS["structured"], 0)
        self.assertGreaterEqual(COUNTS["raw"] + COUNTS["structured"], 100_000, COUNTS)


# ---------------------------------------------------------------------- Hypothesis: outbound
#: Text with every character that could split or end a control line, plus non-ASCII.
NASTY = st.sampled_from(
    [
        *"ab.*>",
        " ",
        "\t",
        "\r",
        "\n",
        "\x00",
        "\x0b",
        "\x0c",
        ":",
        "é",
        "\u2028",
        "\U0001f600",
        "\udcff",
        "\ud800",
        "\x85",
    ]
)
#: Mostly-valid subjects: tokens of any non-separator character (non-ASCII included).
TOKENS = st.text(
    st.characters(blacklist_characters=" \t\r\n\x00\x0b\x0c.", blacklist_categories=("Cs",)),
    min_size=1,
    max_size=4,
)
SUBJECTS = st.one_of(
    st.text(NASTY, max_size=10),
    st.lists(TOKENS | st.sampled_from(["*", ">"]), min_size=1, max_size=3).map(".".join),
)
_BAD_CHARS = set(" \t\r\n\x00\x0b\x0c")


def encodable(s: str) -> bool:
    try:
        s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def subject_ok(s: str, wildcards: bool) -> bool:
    if not s or _BAD_CHARS & set(s) or not encodable(s):
        return False
    tokens = s.split(".")
    for i, tok in enumerate(tokens):
        if not tok:
            return False
        if tok in ("*", ">") and (not wildcards or (tok == ">" and i != len(tokens) - 1)):
            return False
    return True


def queue_ok(q: str) -> bool:
    return bool(q) and not (_BAD_CHARS & set(q)) and encodable(q)


def header_name_ok(name: str) -> bool:
    return bool(name) and all(33 <= ord(c) <= 126 and c != ":" for c in name)


def header_value_ok(value: str) -> bool:
    return "\r" not in value and "\n" not in value and encodable(value)


def connected_client() -> tuple[Client, StringTransport, MemoryReactorClock]:
    """A Client whose connection is a StringTransport, past the handshake."""
    clock = MemoryReactorClock()
    client = Client(clock, ["tcp:host=127.0.0.1:port=4222"], Options(no_randomize=True))
    d = client.start()
    clock.advance(0)
    _, _, factory, _, _ = clock.tcpClients[-1]
    proto = factory.buildProtocol(None)
    transport = StringTransport()
    proto.makeConnection(transport)
    proto.dataReceived(info_line(INFO))
    proto.dataReceived(b"PONG\r\n")
    clock.advance(0)
    assert client.is_connected and d.called
    transport.clear()
    return client, transport, clock


def pub_to_msg(frame: bytes) -> bytes:
    """Turn the client's PUB/HPUB frame into the MSG/HMSG the server would deliver (sid 1)."""
    line, _, rest = frame.partition(b"\r\n")
    args = line.split(b" ")
    op = {b"PUB": b"MSG", b"HPUB": b"HMSG"}[args[0]]
    return b" ".join([op, args[1], b"1", *args[2:]]) + b"\r\n" + rest


class OutboundPropertyTests(SynchronousTestCase):
    """Hypothesis: invalid names raise with 0 bytes written; valid ones round-trip."""

    def setUp(self) -> None:
        self.client, self.transport, self.clock = connected_client()

    def written(self) -> bytes:
        self.clock.advance(0)
        data = self.transport.value()
        self.transport.clear()
        return data

    @settings(
        max_examples=1000, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(
        subject=SUBJECTS,
        reply=st.none() | SUBJECTS,
        headers=st.none()
        | st.dictionaries(
            st.text(NASTY, max_size=5) | st.sampled_from(["X-Id", "Nats-Msg-Id"]),
            st.lists(st.text(NASTY, max_size=6), min_size=1, max_size=3),
            max_size=3,
        ),
        data=st.binary(max_size=32),
    )
    def test_publish(
        self, subject: str, reply: str | None, headers: dict[str, list[str]] | None, data: bytes
    ) -> None:
        """publish(): invalid subject/reply/header raises, nothing written; else round-trips."""
        ok = subject_ok(subject, False) and (reply is None or subject_ok(reply, False))
        if headers is not None:
            ok = ok and all(
                header_name_ok(k) and all(header_value_ok(v) for v in vs)
                for k, vs in headers.items()
            )
        if not ok:
            with self.assertRaises((BadSubjectError, BadHeaderError)):
                self.client.publish(subject, data, reply, headers)
            self.assertEqual(self.written(), b"")
            self.assertEqual(self.client.pending_bytes, 0)
            return
        self.client.publish(subject, data, reply, headers)
        frame = self.written()
        events = Parser().feed(pub_to_msg(frame))
        self.assertEqual(len(events), 1)
        msg = events[0]
        assert isinstance(msg, Msg)
        self.assertEqual((msg.subject, msg.reply, msg.data), (subject, reply, data))
        if headers is None:
            self.assertIsNone(msg.headers)
        else:
            assert msg.headers is not None
            # The wire format trims spaces and tabs around a value (as nats.go does).
            want = [(k, v.strip(" \t")) for k, vs in headers.items() for v in vs]
            self.assertEqual(msg.headers.multi_items(), want)

    @settings(
        max_examples=1000, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(subject=SUBJECTS, queue=st.none() | st.text(NASTY, max_size=6))
    def test_subscribe(self, subject: str, queue: str | None) -> None:
        """subscribe(): invalid subject/queue raises, nothing written; else SUB round-trips."""
        before = len(self.client.subscriptions)
        ok = subject_ok(subject, True) and (queue is None or queue_ok(queue))
        if not ok:
            with self.assertRaises(BadSubjectError):
                self.client.subscribe(subject, queue=queue)
            self.assertEqual(self.written(), b"")
            self.assertEqual(len(self.client.subscriptions), before)
            return
        sub = self.client.subscribe(subject, queue=queue)
        frame = self.written()
        self.assertTrue(frame.endswith(b"\r\n") and frame.count(b"\r\n") == 1, frame)
        args = frame[:-2].split(b" ")
        self.assertEqual(args[0], b"SUB")
        decoded = [a.decode("utf-8", "surrogateescape") for a in args[1:-1]]
        self.assertEqual(decoded, [subject] if queue is None else [subject, queue])
        self.assertEqual(int(args[-1]), sub.sid)

    @settings(
        max_examples=500, deadline=None, database=None, suppress_health_check=list(HealthCheck)
    )
    @given(
        items=st.lists(
            st.tuples(st.text(NASTY, min_size=1, max_size=5), st.text(NASTY, max_size=6)),
            max_size=4,
        )
    )
    def test_headers_object(self, items: list[tuple[str, str]]) -> None:
        """Headers(): bad names/values refused at once; good ones survive encode -> parse."""
        ok = all(header_name_ok(k) and header_value_ok(v) for k, v in items)
        if not ok:
            with self.assertRaises(BadHeaderError):
                Headers(items)
            return
        h = Headers(items)
        self.client.publish("hdr.test", b"", headers=h)
        frame = self.written()
        hlen = int(frame.split(b"\r\n", 1)[0].split(b" ")[-2])
        body = frame.split(b"\r\n", 1)[1]
        parsed = parse_headers(body[:hlen])
        self.assertEqual(parsed.multi_items(), [(k, v.strip(" \t")) for k, v in items])
