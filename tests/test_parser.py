"""Tests for the sans-IO server -> client parser, ``txnats.protocol.parser``.

Every valid fixture is fed whole, one byte at a time and split in two at every point,
and must give the same events each way (h11's discipline). Every invalid fixture must
raise exactly :class:`ProtocolError`, carry the events completed before the fault, and
leave a parser that refuses further input. Hypothesis then throws arbitrary, generated
and mutated streams at it.
"""

from __future__ import annotations

import ast
import inspect
import json
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from txnats.errors import ProtocolError
from txnats.protocol.events import OK, PING, PONG, BadHeaders, Err, Info, Msg, Ok, Ping, Pong
from txnats.protocol.parser import DEFAULT_MAX_CONTROL_LINE, HARD_MAX_PAYLOAD, Parser

# --------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------

Summary = tuple[Any, ...]


def summarize(events: Iterable[object]) -> list[Summary]:
    """Turn events into comparable tuples (``Msg`` has no ``__eq__``)."""
    out: list[Summary] = []
    for e in events:
        if isinstance(e, Msg):
            data: object = e.data if type(e.data) is bytes else ("NOT BYTES", e.data)
            if e.headers is None:
                hdr: object = None
            elif e.headers.raw is not None:
                hdr = ("RAW", e.headers.raw, e.headers.multi_items(), e.headers.status)
            else:
                hdr = (e.headers.status, e.headers.description, e.headers.multi_items())
            out.append(("MSG", e.subject, e.sid, e.reply, data, hdr))
        elif isinstance(e, Info):
            out.append(("INFO", e.options))
        elif isinstance(e, Err):
            out.append(("ERR", e.message))
        elif isinstance(e, Ping):
            out.append(("PING",) if e is PING else ("PING-NOT-SINGLETON",))
        elif isinstance(e, Pong):
            out.append(("PONG",) if e is PONG else ("PONG-NOT-SINGLETON",))
        elif isinstance(e, Ok):
            out.append(("OK",) if e is OK else ("OK-NOT-SINGLETON",))
        elif isinstance(e, BadHeaders):
            out.append(("BAD-HEADERS", e.subject, e.sid))
        else:
            out.append(("UNKNOWN", repr(e)))
    return out


def msg(
    subject: str,
    sid: int,
    data: bytes,
    reply: str | None = None,
    headers: tuple[int | None, str | None, list[tuple[str, str]]] | None = None,
) -> Summary:
    """The summary of one expected ``Msg``."""
    return ("MSG", subject, sid, reply, data, headers)


def unparsed(
    subject: str, sid: int, block: bytes, data: bytes = b"", reply: str | None = None
) -> list[Summary]:
    """The events of a message whose header block ``block`` does not parse: the message,
    its headers empty with ``raw`` set, then a BadHeaders event."""
    return [
        ("MSG", subject, sid, reply, data, ("RAW", block, [], None)),
        ("BAD-HEADERS", subject, sid),
    ]


def info(**options: Any) -> Summary:
    return ("INFO", options)


def err(message: str) -> Summary:
    return ("ERR", message)


S_PING: Summary = ("PING",)
S_PONG: Summary = ("PONG",)
S_OK: Summary = ("OK",)


def split_at(data: bytes, points: Iterable[int]) -> list[bytes]:
    """Cut ``data`` at the given offsets (unsorted, duplicates allowed)."""
    cuts = sorted({p for p in points if 0 < p < len(data)})
    chunks = []
    start = 0
    for c in cuts:
        chunks.append(data[start:c])
        start = c
    chunks.append(data[start:])
    return chunks


class Outcome:
    """What feeding a sequence of chunks produced: every event, and the error if any."""

    def __init__(self, parser: Parser) -> None:
        self.parser = parser
        self.events: list[object] = []
        self.error: ProtocolError | None = None
        self.max_buffered = 0

    @property
    def summary(self) -> list[Summary]:
        return summarize(self.events)


def run(chunks: Iterable[bytes], **parser_kwargs: int) -> Outcome:
    """Feed ``chunks`` into a fresh parser until they run out or it raises ProtocolError.

    Any exception other than ProtocolError propagates (and fails the test).
    """
    outcome = Outcome(Parser(**parser_kwargs))
    for chunk in chunks:
        try:
            outcome.events.extend(outcome.parser.feed(chunk))
        except ProtocolError as e:
            outcome.events.extend(e.events)  # type: ignore[attr-defined]
            outcome.error = e
            break
        outcome.max_buffered = max(outcome.max_buffered, outcome.parser.buffered)
    return outcome


def hmsg_frame(head: bytes, block: bytes, payload: bytes = b"") -> bytes:
    """An HMSG frame whose two sizes are computed from ``block`` and ``payload``."""
    sizes = b" %d %d\r\n" % (len(block), len(block) + len(payload))
    return head + sizes + block + payload + b"\r\n"


def bytewise(data: bytes) -> list[bytes]:
    return [data[i : i + 1] for i in range(len(data))]


# --------------------------------------------------------------------------------------
# Valid fixtures
# --------------------------------------------------------------------------------------

_HB_BLOCK = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\n\r\n"
_HB_HEADERS = (100, "Idle Heartbeat", [("Nats-Last-Consumer", "0"), ("Nats-Last-Stream", "0")])

VALID: list[tuple[str, bytes, list[Summary]]] = [
    (
        "info_typical",
        b'INFO {"server_id":"NABC","version":"2.10.7","proto":1,"headers":true,'
        b'"max_payload":1048576,"port":4222,"connect_urls":["10.0.0.1:4222"]}\r\n',
        [
            info(
                server_id="NABC",
                version="2.10.7",
                proto=1,
                headers=True,
                max_payload=1048576,
                port=4222,
                connect_urls=["10.0.0.1:4222"],
            )
        ],
    ),
    ("info_empty_object", b"INFO {}\r\n", [info()]),
    ("info_lowercase_tab", b'info\t{"ldm":true}\r\n', [info(ldm=True)]),
    (
        "info_unknown_fields_kept",
        b'INFO {"x_future":[1,{"a":null}],"nonce":"abc"}\r\n',
        [info(x_future=[1, {"a": None}], nonce="abc")],
    ),
    ("msg_no_reply", b"MSG foo.bar 9 11\r\nHello World\r\n", [msg("foo.bar", 9, b"Hello World")]),
    (
        "msg_reply",
        b"MSG foo.bar 9 INBOX.34 11\r\nHello World\r\n",
        [msg("foo.bar", 9, b"Hello World", reply="INBOX.34")],
    ),
    ("msg_empty_payload", b"MSG foo 1 0\r\n\r\n", [msg("foo", 1, b"")]),
    (
        "msg_empty_payload_reply",
        b"MSG foo 1 _INBOX.a.b 0\r\n\r\n",
        [msg("foo", 1, b"", reply="_INBOX.a.b")],
    ),
    ("msg_payload_with_crlf", b"MSG foo 1 6\r\n\r\nab\r\n\r\n", [msg("foo", 1, b"\r\nab\r\n")]),
    ("msg_payload_only_crlf", b"MSG foo 1 4\r\n\r\n\r\n\r\n", [msg("foo", 1, b"\r\n\r\n")]),
    (
        "msg_payload_looks_like_frames",
        b"MSG foo 1 17\r\nPING\r\nMSG x 1 0\r\n\r\n",
        [msg("foo", 1, b"PING\r\nMSG x 1 0\r\n")],
    ),
    ("msg_payload_lone_cr_lf", b"MSG foo 1 3\r\n\r\n\r\r\n", [msg("foo", 1, b"\r\n\r")]),
    (
        "msg_binary_payload",
        b"MSG b 7 256\r\n" + bytes(range(256)) + b"\r\n",
        [msg("b", 7, bytes(range(256)))],
    ),
    ("msg_lowercase_op", b"msg foo 1 2\r\nhi\r\n", [msg("foo", 1, b"hi")]),
    ("msg_mixed_case_op", b"mSg foo 1 r 2\r\nhi\r\n", [msg("foo", 1, b"hi", reply="r")]),
    (
        "msg_tab_separators",
        b"MSG\tfoo\t1\t\tbar\t2\r\nhi\r\n",
        [msg("foo", 1, b"hi", reply="bar")],
    ),
    ("msg_many_spaces", b"MSG   foo  12    2  \r\nhi\r\n", [msg("foo", 12, b"hi")]),
    (
        "msg_utf8_subject",
        "MSG caf\u00e9.\u4e2d 3 2\r\nhi\r\n".encode(),
        [msg("caf\u00e9.\u4e2d", 3, b"hi")],
    ),
    ("msg_large_sid", b"MSG s 18446744073709551615 0\r\n\r\n", [msg("s", 2**64 - 1, b"")]),
    ("msg_leading_zero_size", b"MSG s 1 0000000002\r\nhi\r\n", [msg("s", 1, b"hi")]),
    (
        "hmsg_adr4_no_reply",
        b"HMSG FOO 1 22 33\r\nNATS/1.0\r\nBar: Baz\r\n\r\nHello NATS!\r\n",
        [msg("FOO", 1, b"Hello NATS!", headers=(None, None, [("Bar", "Baz")]))],
    ),
    (
        "hmsg_reply",
        b"HMSG FOO 1 INBOX.1 22 33\r\nNATS/1.0\r\nBar: Baz\r\n\r\nHello NATS!\r\n",
        [msg("FOO", 1, b"Hello NATS!", reply="INBOX.1", headers=(None, None, [("Bar", "Baz")]))],
    ),
    (
        "hmsg_header_only",
        b"HMSG NOTIFY 1 22 22\r\nNATS/1.0\r\nBar: Baz\r\n\r\n\r\n",
        [msg("NOTIFY", 1, b"", headers=(None, None, [("Bar", "Baz")]))],
    ),
    (
        "hmsg_empty_header_block",
        b"HMSG e 2 12 14\r\nNATS/1.0\r\n\r\nhi\r\n",
        [msg("e", 2, b"hi", headers=(None, None, []))],
    ),
    (
        "hmsg_no_responders_503",
        b"HMSG _INBOX.x.y 5 16 16\r\nNATS/1.0 503\r\n\r\n\r\n",
        [msg("_INBOX.x.y", 5, b"", headers=(503, None, []))],
    ),
    (
        "hmsg_idle_heartbeat_adr4",
        b"HMSG my.messages 2  75 75\r\n" + _HB_BLOCK + b"\r\n",
        [msg("my.messages", 2, b"", headers=_HB_HEADERS)],
    ),
    (
        "hmsg_status_with_reply",
        hmsg_frame(b"HMSG a 3 $JS.FC.x", b"NATS/1.0 100 FlowControl Request\r\n\r\n"),
        [msg("a", 3, b"", reply="$JS.FC.x", headers=(100, "FlowControl Request", []))],
    ),
    (
        "hmsg_408_with_headers",
        hmsg_frame(
            b"HMSG i 4",
            b"NATS/1.0 408 Request Timeout\r\n"
            b"Nats-Pending-Messages: 3\r\nNats-Pending-Bytes: 0\r\n\r\n",
        ),
        [
            msg(
                "i",
                4,
                b"",
                headers=(
                    408,
                    "Request Timeout",
                    [("Nats-Pending-Messages", "3"), ("Nats-Pending-Bytes", "0")],
                ),
            )
        ],
    ),
    (
        "hmsg_multi_value_headers",
        hmsg_frame(b"HMSG m 1", b"NATS/1.0\r\nA: 1\r\nB: 2\r\nA: 3\r\na: 4\r\n\r\n", b"ok"),
        [
            msg(
                "m",
                1,
                b"ok",
                headers=(None, None, [("A", "1"), ("B", "2"), ("A", "3"), ("a", "4")]),
            )
        ],
    ),
    (
        "hmsg_header_whitespace_trimmed",
        hmsg_frame(b"HMSG w 1", b"NATS/1.0\r\nA:1\r\nB:  two  \r\nC:\t3\r\n\r\n"),
        [msg("w", 1, b"", headers=(None, None, [("A", "1"), ("B", "two"), ("C", "3")]))],
    ),
    (
        "hmsg_header_value_with_colon_and_empty",
        hmsg_frame(b"HMSG c 1", b"NATS/1.0\r\nUrl: http://h:1/x\r\nEmpty:\r\n\r\n"),
        [msg("c", 1, b"", headers=(None, None, [("Url", "http://h:1/x"), ("Empty", "")]))],
    ),
    (
        "hmsg_payload_with_crlf",
        b"HMSG p 1 12 18\r\nNATS/1.0\r\n\r\n\r\n\r\n\r\n\r\n",
        [msg("p", 1, b"\r\n\r\n\r\n", headers=(None, None, []))],
    ),
    (
        "hmsg_lowercase_tabs",
        b"hmsg\tp\t1\tr\t12\t13\r\nNATS/1.0\r\n\r\nx\r\n",
        [msg("p", 1, b"x", reply="r", headers=(None, None, []))],
    ),
    ("ping", b"PING\r\n", [S_PING]),
    ("pong", b"PONG\r\n", [S_PONG]),
    ("ok", b"+OK\r\n", [S_OK]),
    ("ping_pong_ok_lowercase", b"ping\r\npong\r\n+ok\r\n", [S_PING, S_PONG, S_OK]),
    ("ping_mixed_case", b"PiNg\r\n", [S_PING]),
    (
        "err_quoted",
        b"-ERR 'Authorization Violation'\r\n",
        [err("Authorization Violation")],
    ),
    (
        "err_unquoted",
        b"-ERR Unknown Protocol Operation\r\n",
        [err("Unknown Protocol Operation")],
    ),
    (
        "err_inner_quotes",
        b"-ERR 'Permissions Violation for Publish to \"x.y\"'\r\n",
        [err('Permissions Violation for Publish to "x.y"')],
    ),
    ("err_quoted_keeps_inner_spaces", b"-ERR '  spaced  '\r\n", [err("  spaced  ")]),
    ("err_lowercase_tab", b"-err\t'Stale Connection'\r\n", [err("Stale Connection")]),
    ("err_empty", b"-ERR\r\n", [err("")]),
    (
        "several_frames_one_buffer",
        b'INFO {"max_payload":1024}\r\nPING\r\nMSG a 1 2\r\nhi\r\n+OK\r\n'
        b"HMSG b 2 r 12 14\r\nNATS/1.0\r\n\r\nyo\r\nPONG\r\n-ERR 'x'\r\nMSG c 3 0\r\n\r\n",
        [
            info(max_payload=1024),
            S_PING,
            msg("a", 1, b"hi"),
            S_OK,
            msg("b", 2, b"yo", reply="r", headers=(None, None, [])),
            S_PONG,
            err("x"),
            msg("c", 3, b""),
        ],
    ),
    (
        "many_msgs_back_to_back",
        b"".join(b"MSG s.%d %d %d\r\n%s\r\n" % (i, i, i, b"\r" * i) for i in range(12)),
        [msg(f"s.{i}", i, b"\r" * i) for i in range(12)],
    ),
]


def _assert_events(case: SynchronousTestCase, outcome: Outcome, expected: list[Summary]) -> None:
    if outcome.error is not None:
        case.fail(f"unexpected ProtocolError: {outcome.error!r}")
    case.assertEqual(outcome.summary, expected)
    case.assertEqual(outcome.parser.buffered, 0)


class ValidFixtureTests(SynchronousTestCase):
    """Every valid fixture gives the same events however it is chunked.

    The test methods are generated below from ``VALID``: for each fixture one test feeds
    it whole, one feeds it a byte at a time, and one splits it in two at every offset.
    """

    def test_fixture_table_is_large(self) -> None:
        """The table covers the frame kinds it is meant to (guards against pruning)."""
        self.assertGreaterEqual(len(VALID), 40)
        self.assertEqual(len({name for name, _, _ in VALID}), len(VALID))


def _valid_whole(name: str, data: bytes, expected: list[Summary]) -> Any:
    def test(self: SynchronousTestCase) -> None:
        _assert_events(self, run([data]), expected)

    test.__doc__ = f"Fixture {name!r} fed in one piece gives the expected events."
    return test


def _valid_bytewise(name: str, data: bytes, expected: list[Summary]) -> Any:
    def test(self: SynchronousTestCase) -> None:
        _assert_events(self, run(bytewise(data)), expected)

    test.__doc__ = f"Fixture {name!r} fed one byte at a time gives the expected events."
    return test


def _valid_splits(name: str, data: bytes, expected: list[Summary]) -> Any:
    def test(self: SynchronousTestCase) -> None:
        for i in range(len(data) + 1):
            outcome = run([data[:i], data[i:]])
            if outcome.error is not None:
                self.fail(f"split at {i}: unexpected {outcome.error!r}")
            self.assertEqual(outcome.summary, expected, f"split at {i}")
            self.assertEqual(outcome.parser.buffered, 0, f"split at {i}")

    test.__doc__ = f"Fixture {name!r} split in two at every offset gives the expected events."
    return test


for _name, _data, _expected in VALID:
    setattr(ValidFixtureTests, f"test_whole_{_name}", _valid_whole(_name, _data, _expected))
    setattr(ValidFixtureTests, f"test_bytewise_{_name}", _valid_bytewise(_name, _data, _expected))
    setattr(ValidFixtureTests, f"test_splits_{_name}", _valid_splits(_name, _data, _expected))


# --------------------------------------------------------------------------------------
# Invalid fixtures
# --------------------------------------------------------------------------------------

SMALL = {"max_control_line": 64, "max_payload": 100}

# (name, bytes, events completed before the fault, parser keyword arguments)
INVALID: list[tuple[str, bytes, list[Summary], dict[str, int]]] = [
    ("unknown_op", b"FOO bar\r\n", [], {}),
    ("client_op_pub", b"PUB foo 1\r\nx\r\n", [], {}),
    ("client_op_connect", b"CONNECT {}\r\n", [], {}),
    ("op_with_suffix", b"PINGX\r\n", [], {}),
    ("op_glued_to_payload", b"INFO{}\r\n", [], {}),
    ("empty_line", b"\r\n", [], {}),
    ("whitespace_only_line", b" \t \r\n", [], {}),
    ("ping_with_argument", b"PING x\r\n", [], {}),
    ("pong_with_argument", b"PONG 1\r\n", [], {}),
    ("ok_with_argument", b"+OK now\r\n", [], {}),
    ("msg_no_args", b"MSG\r\n", [], {}),
    ("msg_two_args", b"MSG foo 1\r\n", [], {}),
    ("msg_five_args", b"MSG foo 1 r x 3\r\nabc\r\n", [], {}),
    ("hmsg_three_args", b"HMSG foo 1 12\r\n", [], {}),
    ("hmsg_six_args", b"HMSG foo 1 r x 12 12\r\nNATS/1.0\r\n\r\n\r\n", [], {}),
    ("msg_size_not_numeric", b"MSG foo 1 abc\r\n", [], {}),
    ("msg_size_negative", b"MSG foo 1 -1\r\n", [], {}),
    ("msg_size_signed_plus", b"MSG foo 1 +3\r\nabc\r\n", [], {}),
    ("msg_size_hex", b"MSG foo 1 0x3\r\nabc\r\n", [], {}),
    ("msg_size_non_ascii_digit", "MSG foo 1 \uff13\r\nabc\r\n".encode(), [], {}),
    ("msg_size_eleven_digits", b"MSG foo 1 99999999999\r\n", [], {}),
    ("msg_size_eleven_digits_small_value", b"MSG foo 1 00000000003\r\nabc\r\n", [], {}),
    ("msg_size_ten_digits_over_hard_cap", b"MSG foo 1 9999999999\r\n", [], {}),
    ("msg_size_over_max_payload", b"MSG foo 1 101\r\n", [], SMALL),
    ("msg_sid_not_numeric", b"MSG foo abc 3\r\nabc\r\n", [], {}),
    ("msg_sid_negative", b"MSG foo -1 3\r\nabc\r\n", [], {}),
    ("msg_sid_too_long", b"MSG foo 123456789012345678901 3\r\nabc\r\n", [], {}),
    ("hmsg_hdr_size_not_numeric", b"HMSG foo 1 x 12\r\n", [], {}),
    ("hmsg_total_size_negative", b"HMSG foo 1 12 -12\r\n", [], {}),
    ("hmsg_hdr_size_over_total", b"HMSG foo 1 20 12\r\n", [], {}),
    ("hmsg_total_over_max_payload", b"HMSG foo 1 12 101\r\n", [], SMALL),
    ("bare_lf_in_control_line", b"PING\nPONG\r\n", [], {}),
    ("bare_cr_in_control_line", b"PI\rNG\r\n", [], {}),
    ("cr_before_crlf", b"PING\r\r\n", [], {}),
    ("payload_not_followed_by_crlf", b"MSG foo 1 3\r\nabcd\r\n", [], {}),
    ("payload_followed_by_lf_only", b"MSG foo 1 3\r\nabc\nPING\r\n", [], {}),
    ("payload_followed_by_cr_only", b"MSG foo 1 3\r\nabc\rPING\r\n", [], {}),
    ("hmsg_payload_not_followed_by_crlf", b"HMSG f 1 12 12\r\nNATS/1.0\r\n\r\nXX", [], {}),
    ("control_line_too_long_no_crlf", b"INFO " + b"x" * 60, [], SMALL),
    ("control_line_too_long_with_crlf", b"INFO {" + b" " * 60 + b"}\r\n", [], SMALL),
    ("info_without_payload", b"INFO\r\n", [], {}),
    ("info_not_json", b"INFO {\r\n", [], {}),
    ("info_trailing_garbage", b"INFO {} x\r\n", [], {}),
    ("info_not_utf8", b'INFO {"a":"\xff"}\r\n', [], {}),
    ("info_json_array", b"INFO [1,2]\r\n", [], {}),
    ("info_json_string", b'INFO "x"\r\n', [], {}),
    ("info_json_null", b"INFO null\r\n", [], {}),
    ("info_deeply_nested", b"INFO " + b"[" * 3000 + b"]" * 3000 + b"\r\n", [], {}),
    ("info_max_payload_string", b'INFO {"max_payload":"x"}\r\n', [], {}),
    ("info_max_payload_true", b'INFO {"max_payload":true}\r\n', [], {}),
    ("info_max_payload_float", b'INFO {"max_payload":1.5}\r\n', [], {}),
    ("info_max_payload_zero", b'INFO {"max_payload":0}\r\n', [], {}),
    ("info_max_payload_negative", b'INFO {"max_payload":-1}\r\n', [], {}),
    ("info_port_string", b'INFO {"port":"4222"}\r\n', [], {}),
    ("info_proto_null", b'INFO {"proto":null}\r\n', [], {}),
    ("info_headers_string", b'INFO {"headers":"yes"}\r\n', [], {}),
    ("info_tls_required_int", b'INFO {"tls_required":1}\r\n', [], {}),
    ("info_server_id_int", b'INFO {"server_id":7}\r\n', [], {}),
    ("info_connect_urls_string", b'INFO {"connect_urls":"a:1"}\r\n', [], {}),
    ("info_connect_urls_ints", b'INFO {"connect_urls":["a:1",2]}\r\n', [], {}),
    ("error_after_two_events", b"PING\r\nPONG\r\nBOGUS\r\n", [S_PING, S_PONG], {}),
    (
        "error_after_msg",
        b"MSG a 1 1\r\nx\r\nMSG a 1 -1\r\n",
        [msg("a", 1, b"x")],
        {},
    ),
    (
        "error_in_second_payload",
        b"MSG a 1 1\r\nx\r\nMSG a 2 1\r\nyz\r\n",
        [msg("a", 1, b"x")],
        {},
    ),
    (
        "error_after_info",
        b'INFO {"max_payload":5}\r\n-ERR \'x\'\r\nINFO {"max_payload":"5"}\r\n',
        [info(max_payload=5), err("x")],
        {},
    ),
    (
        "oversize_after_valid_msg",
        b"MSG a 1 100\r\n" + b"x" * 100 + b"\r\nMSG a 1 101\r\n",
        [msg("a", 1, b"x" * 100)],
        SMALL,
    ),
]


# A header block another client wrote that does not parse: the server relays header
# blocks unchecked (checked against nats-server 2.15), so these are not protocol errors.
# The message is delivered with Headers.unparsed(block), followed by a BadHeaders event,
# and parsing goes on. (name, bytes, the events they make)
MALFORMED_HEADERS: list[tuple[str, bytes, list[Summary]]] = [
    ("hmsg_hdr_size_too_small", b"HMSG foo 1 5 5\r\nNATS/\r\n", unparsed("foo", 1, b"NATS/")),
    (
        "hmsg_no_version_line",
        b"HMSG foo 1 12 12\r\nHTTP/1.1\r\n\r\n\r\n",
        unparsed("foo", 1, b"HTTP/1.1\r\n\r\n"),
    ),
    (
        "hmsg_version_glued_to_status",
        b"HMSG f 1 15 15\r\nNATS/1.0503\r\n\r\n\r\n",
        unparsed("f", 1, b"NATS/1.0503\r\n\r\n"),
    ),
    (
        "hmsg_missing_terminator",
        b"HMSG foo 1 16 16\r\nNATS/1.0\r\nA: b\r\n\r\n",
        unparsed("foo", 1, b"NATS/1.0\r\nA: b\r\n"),
    ),
    (
        "hmsg_line_without_colon",
        b"HMSG foo 1 17 17\r\nNATS/1.0\r\nAbc\r\n\r\n\r\n",
        unparsed("foo", 1, b"NATS/1.0\r\nAbc\r\n\r\n"),
    ),
    (
        "hmsg_empty_header_name",
        b"HMSG foo 1 17 17\r\nNATS/1.0\r\n: c\r\n\r\n\r\n",
        unparsed("foo", 1, b"NATS/1.0\r\n: c\r\n\r\n"),
    ),
    (
        "hmsg_header_name_space",
        hmsg_frame(b"HMSG f 1", b"NATS/1.0\r\nA b: c\r\n\r\n"),
        unparsed("f", 1, b"NATS/1.0\r\nA b: c\r\n\r\n"),
    ),
    (
        "hmsg_blank_line_inside_block",
        b"HMSG f 1 20 20\r\nNATS/1.0\r\n\r\nA: b\r\n\r\n\r\n",
        unparsed("f", 1, b"NATS/1.0\r\n\r\nA: b\r\n\r\n"),
    ),
    (
        "hmsg_bare_lf_in_value",
        hmsg_frame(b"HMSG f 1", b"NATS/1.0\r\nA: b\nc\r\n\r\n"),
        unparsed("f", 1, b"NATS/1.0\r\nA: b\nc\r\n\r\n"),
    ),
    (
        "hmsg_bare_lf_in_status_line",
        b"HMSG f 1 20 20\r\nNATS/1.0 503 a\nb\r\n\r\n\r\n",
        unparsed("f", 1, b"NATS/1.0 503 a\nb\r\n\r\n"),
    ),
    (
        "hmsg_status_two_digits",
        b"HMSG f 1 15 15\r\nNATS/1.0 50\r\n\r\n\r\n",
        unparsed("f", 1, b"NATS/1.0 50\r\n\r\n"),
    ),
    (
        "hmsg_status_four_digits",
        b"HMSG f 1 17 17\r\nNATS/1.0 5030\r\n\r\n\r\n",
        unparsed("f", 1, b"NATS/1.0 5030\r\n\r\n"),
    ),
    (
        "hmsg_status_not_numeric",
        b"HMSG f 1 16 16\r\nNATS/1.0 abc\r\n\r\n\r\n",
        unparsed("f", 1, b"NATS/1.0 abc\r\n\r\n"),
    ),
    (
        "second_of_two_header_blocks",
        b"HMSG a 1 12 12\r\nNATS/1.0\r\n\r\n\r\nHMSG a 2 12 12\r\nNATS/2.0\r\n\r\n\r\n",
        [msg("a", 1, b"", headers=(None, None, [])), *unparsed("a", 2, b"NATS/2.0\r\n\r\n")],
    ),
    ("hmsg_block_of_one_byte", b"HMSG foo 1 1 3\r\nxab\r\n", unparsed("foo", 1, b"x", b"ab")),
    ("hmsg_empty_block", b"HMSG foo 1 0 2\r\nab\r\n", unparsed("foo", 1, b"", b"ab")),
    (
        "hmsg_garbage_block_with_reply",
        hmsg_frame(b"HMSG g 9 r.x", b"GARBAGE\xff\x00GARBAGE", b"p"),
        unparsed("g", 9, b"GARBAGE\xff\x00GARBAGE", b"p", reply="r.x"),
    ),
]


def _check_error(case: SynchronousTestCase, outcome: Outcome, expected: list[Summary]) -> None:
    """``outcome`` ended in a deliberate ProtocolError after exactly ``expected``."""
    e = outcome.error
    if e is None:
        case.fail(f"no ProtocolError; events {outcome.summary!r}")
    case.assertIs(type(e), ProtocolError)
    # The parser wraps internal faults as "parser fault" with a __cause__; a deliberate
    # rejection has none.
    case.assertIsNone(e.__cause__, f"internal fault, not a protocol check: {e!r}")
    case.assertEqual(outcome.summary, expected)


def _assert_refuses(case: SynchronousTestCase, parser: Parser) -> None:
    for more in (b"PING\r\n", b""):
        try:
            events = parser.feed(more)
        except ProtocolError:
            continue
        case.fail(f"failed parser accepted {more!r} and returned {events!r}")


def _invalid_whole(name: str, data: bytes, prior: list[Summary], kw: dict[str, int]) -> Any:
    def test(self: SynchronousTestCase) -> None:
        outcome = run([data], **kw)
        _check_error(self, outcome, prior)
        self.assertEqual(outcome.error.events, outcome.events)  # type: ignore[union-attr]
        _assert_refuses(self, outcome.parser)

    test.__doc__ = f"Invalid {name!r} fed whole raises ProtocolError after its prior events."
    return test


def _invalid_bytewise(name: str, data: bytes, prior: list[Summary], kw: dict[str, int]) -> Any:
    def test(self: SynchronousTestCase) -> None:
        outcome = run(bytewise(data), **kw)
        _check_error(self, outcome, prior)
        _assert_refuses(self, outcome.parser)

    test.__doc__ = f"Invalid {name!r} fed bytewise raises ProtocolError after its prior events."
    return test


def _invalid_splits(name: str, data: bytes, prior: list[Summary], kw: dict[str, int]) -> Any:
    def test(self: SynchronousTestCase) -> None:
        step = max(1, len(data) // 200)
        for i in range(0, len(data) + 1, step):
            outcome = run([data[:i], data[i:]], **kw)
            try:
                _check_error(self, outcome, prior)
            except self.failureException as e:
                raise self.failureException(f"split at {i}: {e}") from None

    test.__doc__ = f"Invalid {name!r} split in two anywhere raises ProtocolError the same way."
    return test


class InvalidFixtureTests(SynchronousTestCase):
    """Every invalid fixture raises exactly ProtocolError, however it is chunked.

    The test methods are generated below from ``INVALID``.
    """

    def test_fixture_table_is_large(self) -> None:
        """The invalid table holds at least 30 distinct named cases."""
        self.assertGreaterEqual(len(INVALID), 30)
        self.assertEqual(len({name for name, _, _, _ in INVALID}), len(INVALID))


for _name, _data, _prior, _kw in INVALID:
    setattr(InvalidFixtureTests, f"test_whole_{_name}", _invalid_whole(_name, _data, _prior, _kw))
    setattr(
        InvalidFixtureTests, f"test_bytewise_{_name}", _invalid_bytewise(_name, _data, _prior, _kw)
    )
    setattr(InvalidFixtureTests, f"test_splits_{_name}", _invalid_splits(_name, _data, _prior, _kw))


class MalformedHeaderTests(SynchronousTestCase):
    """A header block that does not parse is delivered unparsed, however it is chunked,
    and the parser goes on (a PING after it parses).

    The test methods are generated below from ``MALFORMED_HEADERS``.
    """

    def test_table_is_large(self) -> None:
        """The table holds at least 15 distinct named cases."""
        self.assertGreaterEqual(len(MALFORMED_HEADERS), 15)
        self.assertEqual(len({name for name, _, _ in MALFORMED_HEADERS}), len(MALFORMED_HEADERS))


def _malformed(name: str, data: bytes, expected: list[Summary], how: str) -> Any:
    def test(self: SynchronousTestCase) -> None:
        whole = data + b"PING\r\n"
        splits: list[list[bytes]]
        if how == "whole":
            splits = [[whole]]
        elif how == "bytewise":
            splits = [bytewise(whole)]
        else:
            step = max(1, len(whole) // 200)
            splits = [[whole[:i], whole[i:]] for i in range(0, len(whole) + 1, step)]
        for chunks in splits:
            outcome = run(chunks)
            self.assertIsNone(outcome.error, f"{name}: {outcome.error!r}")
            self.assertEqual(outcome.summary, [*expected, S_PING], f"{name}, {len(chunks)} chunks")

    test.__doc__ = f"Malformed headers {name!r} fed {how}: delivered unparsed, parsing goes on."
    return test


for _name, _data, _expected in MALFORMED_HEADERS:
    for _how in ("whole", "bytewise", "splits"):
        setattr(
            MalformedHeaderTests, f"test_{_how}_{_name}", _malformed(_name, _data, _expected, _how)
        )


# --------------------------------------------------------------------------------------
# Limits, buffering and state
# --------------------------------------------------------------------------------------


class LimitTests(SynchronousTestCase):
    """The control-line and payload limits are enforced early and exactly."""

    def test_defaults(self) -> None:
        """A parser built without arguments uses the documented module defaults."""
        p = Parser()
        self.assertEqual(p.max_control_line, DEFAULT_MAX_CONTROL_LINE)
        self.assertEqual(p.max_payload, HARD_MAX_PAYLOAD)
        self.assertGreaterEqual(DEFAULT_MAX_CONTROL_LINE, 4096)

    def test_max_payload_capped_by_hard_limit(self) -> None:
        """A max_payload above HARD_MAX_PAYLOAD is clamped to it."""
        self.assertEqual(Parser(max_payload=HARD_MAX_PAYLOAD * 4).max_payload, HARD_MAX_PAYLOAD)

    def test_oversize_msg_rejected_on_control_line(self) -> None:
        """MSG whose size exceeds max_payload raises as soon as its control line ends."""
        p = Parser(max_payload=10)
        self.assertEqual(p.feed(b"MSG foo 1 11"), [])
        self.assertRaises(ProtocolError, p.feed, b"\r\n")

    def test_oversize_hmsg_rejected_on_control_line(self) -> None:
        """HMSG whose total exceeds max_payload raises before any header byte arrives."""
        p = Parser(max_payload=100)
        self.assertRaises(ProtocolError, p.feed, b"HMSG foo 1 12 101\r\n")

    def test_payload_exactly_max_payload_accepted(self) -> None:
        """A payload of exactly max_payload bytes is accepted."""
        p = Parser(max_payload=10)
        self.assertEqual(
            summarize(p.feed(b"MSG f 1 10\r\n0123456789\r\n")), [msg("f", 1, b"0123456789")]
        )

    def test_hmsg_total_exactly_max_payload_accepted(self) -> None:
        """HMSG counts headers plus payload against max_payload, inclusive."""
        p = Parser(max_payload=14)
        events = p.feed(b"HMSG f 1 12 14\r\nNATS/1.0\r\n\r\nab\r\n")
        self.assertEqual(summarize(events), [msg("f", 1, b"ab", headers=(None, None, []))])

    def test_control_line_at_limit_accepted(self) -> None:
        """A control line of exactly max_control_line bytes parses."""
        line = b'INFO {"a":"' + b"x" * 19 + b'"}'
        self.assertEqual(len(line), 32)
        events = Parser(max_control_line=32).feed(line + b"\r\n")
        self.assertEqual(summarize(events), [info(a="x" * 19)])

    def test_control_line_at_limit_accepted_at_every_split(self) -> None:
        """A control line of exactly the limit parses however it is split (CR last too)."""
        line = b'INFO {"a":"' + b"x" * 19 + b'"}\r\n'
        for i in range(len(line) + 1):
            outcome = run([line[:i], line[i:]], max_control_line=32)
            self.assertIsNone(outcome.error, f"split at {i}")
            self.assertEqual(outcome.summary, [info(a="x" * 19)], f"split at {i}")
        outcome = run(bytewise(line), max_control_line=32)
        self.assertIsNone(outcome.error)
        self.assertEqual(outcome.summary, [info(a="x" * 19)])

    def test_control_line_one_over_limit_rejected(self) -> None:
        """A complete control line one byte over max_control_line raises."""
        line = b'INFO {"a":"' + b"x" * 20 + b'"}\r\n'
        self.assertRaises(ProtocolError, Parser(max_control_line=32).feed, line)

    def test_long_line_raises_when_buffer_passes_limit(self) -> None:
        """Without CRLF, the parser holds max_control_line bytes and raises on the next."""
        p = Parser(max_control_line=64)
        for i in range(64):
            self.assertEqual(p.feed(b"x"), [])
            self.assertEqual(p.buffered, i + 1)
        self.assertRaises(ProtocolError, p.feed, b"x")

    def test_long_line_in_one_chunk_raises_at_once(self) -> None:
        """A chunk longer than max_control_line with no CRLF raises on that feed."""
        self.assertRaises(ProtocolError, Parser(max_control_line=64).feed, b"M" * 65)

    def test_long_line_after_frames_keeps_prior_events(self) -> None:
        """An over-long line after complete frames raises with those frames in .events."""
        p = Parser(max_control_line=16)
        with self.assertRaises(ProtocolError) as cm:
            p.feed(b"PING\r\nPONG\r\n" + b"z" * 17)
        self.assertEqual(summarize(cm.exception.events), [S_PING, S_PONG])  # type: ignore[attr-defined]

    def test_payload_may_exceed_control_line_limit(self) -> None:
        """Payload bytes are not counted against max_control_line."""
        p = Parser(max_control_line=16, max_payload=1000)
        payload = b"\r\n".join([b"y" * 40] * 10)
        events = p.feed(b"MSG f 1 %d\r\n%s\r\n" % (len(payload), payload))
        self.assertEqual(summarize(events), [msg("f", 1, payload)])


# Control lines of a chosen length, one shape per kind: (start, filler byte, end, what
# follows the line's CRLF, fewest filler bytes). The filler pads the line to the length.
_LINE_SHAPES: dict[str, tuple[bytes, bytes, bytes, bytes, int]] = {
    "err": (b"-ERR '", b"x", b"'", b"", 0),
    "msg": (b"MSG ", b"s", b" 7 0", b"\r\n", 1),
    # The shape of the line cache's old starting line, MSG _ 0 0.
    "msg_sid0": (b"MSG ", b"_", b" 0 0", b"\r\n", 1),
    # A tab: not the shape the MSG regex fast path takes, so the general path parses it.
    "msg_tab": (b"MSG s\t7 ", b"r", b" 2", b"hi\r\n", 1),
    "hmsg": (b"HMSG ", b"s", b" 7 12 12", b"NATS/1.0\r\n\r\n\r\n", 1),
    "info": (b'INFO {"a":"', b"x", b'"}', b"", 0),
    "ping": (b"PING", b" ", b"", b"", 0),
}


def _line_of(kind: str, n: int) -> tuple[bytes, bytes] | None:
    """A ``kind`` control line of exactly ``n`` bytes (CRLF not included) and the rest
    of its frame after the CRLF, or None if that kind cannot be that short."""
    head, filler, tail, rest, fewest = _LINE_SHAPES[kind]
    fill = n - len(head) - len(tail)
    if fill < fewest:
        return None
    return head + filler * fill + tail, rest


_OVER = "control line exceeds the maximum length"


def _verdict(outcome: Outcome) -> tuple[Any, ...]:
    """What a limit test compares: events, error text, and bytes held if no error."""
    if outcome.error is not None:
        return (outcome.summary, str(outcome.error), None)
    return (outcome.summary, None, outcome.parser.buffered)


def _every_feeding(data: bytes) -> Iterable[tuple[str, list[bytes]]]:
    """``data`` whole, a byte at a time, and cut in two at every point."""
    yield "whole", [data]
    yield "bytewise", bytewise(data)
    for i in range(len(data) + 1):
        yield f"split at {i}", [data[:i], data[i:]]


class ControlLineLimitTests(SynchronousTestCase):
    """``max_control_line`` means the same thing at every split point: a line of up to
    that many bytes before its CRLF is accepted, one byte more raises, whether the line
    arrives whole, a byte at a time or cut anywhere."""

    def test_cache_start_line_over_the_limit_whole_or_split(self) -> None:
        """``MSG _ 0 0`` (9 bytes) with a limit of 8 raises fed whole, as fed in two reads.

        Regression: the parser's line cache started out holding this very line, so fed
        whole it matched the cache and skipped the length check."""
        for chunks in ([b"MSG _ 0 0\r\n\r\n"], [b"MSG _ 0 0", b"\r\n\r\n"]):
            outcome = run(chunks, max_control_line=8)
            self.assertIsNotNone(outcome.error, chunks)
            self.assertEqual(str(outcome.error), _OVER, chunks)
            self.assertEqual(outcome.events, [], chunks)
        outcome = run([b"MSG _ 0 0\r\n\r\n"], max_control_line=9)
        self.assertEqual((outcome.summary, outcome.error), ([msg("_", 0, b"")], None))

    def test_lines_at_limit_minus_one_limit_and_plus_one(self) -> None:
        """Lines of limit-1, limit and limit+1 bytes, of every kind, with their CRLF (and
        the rest of the frame), with a lone CR, or with nothing after them: fed whole, a
        byte at a time and split at every point, each gives one outcome, and that
        outcome is: accepted up to the limit, ``control line exceeds`` one byte over."""
        checked = 0
        for limit in (8, 9, 10, 16, 31):
            for kind in _LINE_SHAPES:
                for n in (limit - 1, limit, limit + 1):
                    made = _line_of(kind, n)
                    if made is None:
                        continue
                    line, rest = made
                    # The events the complete frame gives under a roomy limit.
                    reference = run([line + b"\r\n" + rest])
                    self.assertIsNone(reference.error, line)
                    self.assertEqual(len(reference.events), 1, line)
                    for tail in (b"\r\n" + rest, b"\r", b""):
                        data = line + tail
                        if n > limit:
                            expected: tuple[Any, ...] = ([], _OVER, None)
                        elif tail == b"\r\n" + rest:
                            expected = (reference.summary, None, 0)
                        else:
                            expected = ([], None, len(data))
                        for how, chunks in _every_feeding(data):
                            got = _verdict(run(chunks, max_control_line=limit))
                            self.assertEqual(got, expected, f"limit {limit}, {data!r} fed {how}")
                            checked += 1
        self.assertGreater(checked, 4000)

    def test_lower_max_control_line_applies_to_a_cached_line(self) -> None:
        """A MSG line cached under a higher limit is measured again once the limit drops."""
        frame = b"MSG abcdefgh 1 0\r\n\r\n"
        p = Parser(max_control_line=64)
        self.assertEqual(summarize(p.feed(frame)), [msg("abcdefgh", 1, b"")])
        p.max_control_line = 15
        self.assertEqual(p.max_control_line, 15)
        with self.assertRaises(ProtocolError) as cm:
            p.feed(frame)
        self.assertEqual(str(cm.exception), _OVER)

    def test_raised_max_control_line_still_parses_a_cached_line(self) -> None:
        """Changing the limit empties the line cache; the same line still parses."""
        frame = b"MSG abcdefgh 1 2\r\nhi\r\n"
        p = Parser(max_control_line=16)
        self.assertEqual(summarize(p.feed(frame)), [msg("abcdefgh", 1, b"hi")])
        p.max_control_line = 64
        self.assertEqual(summarize(p.feed(frame * 2)), [msg("abcdefgh", 1, b"hi")] * 2)


class BufferingTests(SynchronousTestCase):
    """Partial frames are held without rescanning and released when complete."""

    def test_buffered_counts_partial_frame(self) -> None:
        """``buffered`` reports the bytes of the incomplete frame and drops to zero after."""
        p = Parser()
        self.assertEqual(p.buffered, 0)
        self.assertEqual(p.feed(b"PING\r\nPO"), [PING])
        self.assertEqual(p.buffered, 2)
        self.assertEqual(p.feed(b"NG\r\nMSG a 1 5\r\nab"), [PONG])
        self.assertLessEqual(p.buffered, 2)
        self.assertEqual(summarize(p.feed(b"cde\r\n")), [msg("a", 1, b"abcde")])
        self.assertEqual(p.buffered, 0)

    def test_empty_feed(self) -> None:
        """Feeding b'' returns no events and changes nothing."""
        p = Parser()
        self.assertEqual(p.feed(b""), [])
        p.feed(b"PI")
        self.assertEqual(p.feed(b""), [])
        self.assertEqual(p.feed(b"NG\r\n"), [PING])

    def test_long_payload_in_10000_one_byte_chunks(self) -> None:
        """A 10,000-byte MSG fed bytewise yields one right Msg at the end, buffer bounded."""
        payload = (b"0123456789\r\n" * 900)[:9990]
        frame = b"MSG big 1 %d\r\n%s\r\n" % (len(payload), payload)
        self.assertGreaterEqual(len(frame), 10000)
        p = Parser()
        last = len(frame) - 1
        for i in range(len(frame)):
            events = p.feed(frame[i : i + 1])
            if i < last:
                self.assertEqual(events, [])
                self.assertLessEqual(p.buffered, i + 1)
            else:
                self.assertEqual(summarize(events), [msg("big", 1, payload)])
        self.assertEqual(p.buffered, 0)

    def test_long_control_line_in_one_byte_chunks(self) -> None:
        """A 20,000-byte INFO line fed a byte at a time parses (searching resumes, not restarts)."""
        urls = [f"10.0.{i // 256}.{i % 256}:4222" for i in range(1200)]
        line = json.dumps({"connect_urls": urls}, separators=(",", ":")).encode()
        frame = b"INFO " + line + b"\r\n"
        self.assertGreater(len(frame), 20000)
        p = Parser()
        got: list[object] = []
        for i in range(len(frame)):
            got.extend(p.feed(frame[i : i + 1]))
            self.assertLessEqual(p.buffered, len(frame))
        self.assertEqual(summarize(got), [info(connect_urls=urls)])
        self.assertEqual(p.buffered, 0)

    def test_many_frames_in_one_buffer(self) -> None:
        """20,000 frames in one buffer come out in order in a single feed."""
        data = b"".join(b"MSG s %d 1\r\nx\r\nPING\r\n" % i for i in range(10000))
        events = Parser().feed(data)
        self.assertEqual(len(events), 20000)
        self.assertEqual([e.sid for e in events[::2]], list(range(10000)))  # type: ignore[union-attr]
        self.assertTrue(all(e is PING for e in events[1::2]))

    def test_many_frames_in_uneven_chunks(self) -> None:
        """Thousands of frames cut into 7-byte chunks give every event exactly once."""
        data = b"".join(b"MSG s %d 3\r\n\r\n\r\r\n" % i for i in range(3000))
        outcome = run([data[i : i + 7] for i in range(0, len(data), 7)])
        self.assertIsNone(outcome.error)
        self.assertEqual(outcome.summary, [msg("s", i, b"\r\n\r") for i in range(3000)])
        self.assertLessEqual(outcome.max_buffered, 30)

    def test_events_have_bytes_payload(self) -> None:
        """Msg.data is an immutable bytes object even when the frame was reassembled."""
        p = Parser()
        p.feed(b"MSG a 1 3\r\na")
        (m,) = p.feed(b"bc\r\n")
        self.assertIs(type(m.data), bytes)  # type: ignore[union-attr]


class FailureStateTests(SynchronousTestCase):
    """After a ProtocolError the parser is dead."""

    def test_refuses_input_after_error(self) -> None:
        """Every feed after a ProtocolError raises ProtocolError, with no events."""
        p = Parser()
        self.assertRaises(ProtocolError, p.feed, b"NOPE\r\n")
        for data in (b"PING\r\n", b"", b"MSG a 1 0\r\n\r\n"):
            with self.assertRaises(ProtocolError) as cm:
                p.feed(data)
            self.assertEqual(cm.exception.events, [])  # type: ignore[attr-defined]

    def test_error_drops_buffer(self) -> None:
        """A failed parser holds no bytes."""
        p = Parser()
        p.feed(b"MSG a 1 10\r\nabc")
        self.assertRaises(ProtocolError, p.feed, b"defghijXY")
        self.assertEqual(p.buffered, 0)

    def test_error_events_attribute_is_list_of_prior_events(self) -> None:
        """ProtocolError.events holds only the events of the failing feed, in order."""
        p = Parser()
        self.assertEqual(p.feed(b"PING\r\n"), [PING])
        with self.assertRaises(ProtocolError) as cm:
            p.feed(b"PONG\r\n+OK\r\n?\r\nPING\r\n")
        self.assertEqual(cm.exception.events, [PONG, OK])  # type: ignore[attr-defined]


class LineCacheTests(SynchronousTestCase):
    """The parser remembers the last MSG control line; a repeat of it is parsed by one
    comparison. It must mean exactly what parsing the line again would mean."""

    def test_repeated_lines_give_the_same_messages(self) -> None:
        """A run of identical control lines yields one Msg per frame, payloads apart."""
        p = Parser()
        events = p.feed(b"MSG a.b 7 2\r\nhi\r\nMSG a.b 7 2\r\nho\r\nMSG a.b 7 2\r\nhu\r\n")
        self.assertEqual(
            summarize(events), [msg("a.b", 7, b"hi"), msg("a.b", 7, b"ho"), msg("a.b", 7, b"hu")]
        )

    def test_cached_line_in_a_pending_payload_is_payload(self) -> None:
        """Bytes equal to the cached line, arriving as a pending payload, are payload."""
        line = b"MSG a 1 13\r\n"
        p = Parser()
        self.assertEqual(p.feed(line), [])
        # Each 13-byte payload starts with the cached line itself.
        events = p.feed(line + b"X\r\n" + line + line + b"X\r\n")
        self.assertEqual(summarize(events), [msg("a", 1, line + b"X")] * 2)

    def test_lower_max_payload_applies_to_a_cached_line(self) -> None:
        """A line cached under a higher limit is checked again once the limit drops."""
        p = Parser(max_payload=100)
        self.assertEqual(summarize(p.feed(b"MSG a 1 50\r\n" + b"x" * 50 + b"\r\n")),
                         [msg("a", 1, b"x" * 50)])
        p.max_payload = 10
        self.assertRaises(ProtocolError, p.feed, b"MSG a 1 50\r\n")

    def test_bad_crlf_after_a_cached_frame(self) -> None:
        """A repeated line whose payload is not followed by CRLF is a ProtocolError."""
        p = Parser()
        p.feed(b"MSG a 1 2\r\nhi\r\n")
        with self.assertRaises(ProtocolError) as cm:
            p.feed(b"MSG a 1 2\r\nhi\r\nMSG a 1 2\r\nhiX\r\n")
        self.assertEqual(summarize(cm.exception.events), [msg("a", 1, b"hi")])  # type: ignore[attr-defined]

    def test_line_split_across_feeds(self) -> None:
        """A repeated line cut anywhere across two reads still parses."""
        frame = b"MSG sub.j 3 rep 4\r\ndata\r\n"
        for cut in range(1, len(frame)):
            p = Parser()
            first = p.feed(frame + frame[:cut])
            rest = p.feed(frame[cut:])
            self.assertEqual(
                summarize(first + rest), [msg("sub.j", 3, b"data", "rep")] * 2, cut
            )

    def test_initial_line_means_what_it_says(self) -> None:
        """A fresh parser (nothing cached) parses ``MSG _ 0 0`` as the general path would."""
        p = Parser()
        self.assertEqual(summarize(p.feed(b"MSG _ 0 0\r\n\r\n")), [msg("_", 0, b"")])
        self.assertRaises(ProtocolError, Parser().feed, b"\r\n")

    def test_repeated_line_at_the_start_of_a_read(self) -> None:
        """A read that begins with the cached line (nothing before it) takes it as one."""
        frame = b"MSG a.b 7 r 2\r\nhi\r\n"
        p = Parser()
        for _ in range(3):
            self.assertEqual(summarize(p.feed(frame)), [msg("a.b", 7, b"hi", "r")])
        self.assertEqual(p.buffered, 0)

    def test_repeated_line_after_other_frames(self) -> None:
        """The cached line is recognised again after PING, INFO, an HMSG or a MSG the
        regex does not take (double spaces), and those frames still parse."""
        frame = b"MSG a 1 2\r\nhi\r\n"
        others = [
            (b"PING\r\n", S_PING),
            (b"INFO {}\r\n", info()),
            (
                b"HMSG h 2 12 13\r\nNATS/1.0\r\n\r\nx\r\n",
                msg("h", 2, b"x", headers=(None, None, [])),
            ),
            (b"MSG  b  3  1\r\ny\r\n", msg("b", 3, b"y")),
        ]
        for other, summary in others:
            data = frame + other + frame + frame
            expected = [msg("a", 1, b"hi"), summary, msg("a", 1, b"hi"), msg("a", 1, b"hi")]
            for how, chunks in _every_feeding(data):
                outcome = run(chunks)
                self.assertIsNone(outcome.error, f"{data!r} fed {how}")
                self.assertEqual(outcome.summary, expected, f"{data!r} fed {how}")

    def test_line_that_starts_like_the_cached_one(self) -> None:
        """A line that the cached one is a prefix of, or that differs in its last byte
        (the size), is parsed for what it says."""
        data = (
            b"MSG a 1 2\r\nhi\r\n"
            b"MSG a 1 20\r\n" + b"x" * 20 + b"\r\n"
            b"MSG a 1 3\r\nabc\r\n"
            b"MSG a 1 2\r\nho\r\n"
        )
        expected = [msg("a", 1, b"hi"), msg("a", 1, b"x" * 20), msg("a", 1, b"abc"),
                    msg("a", 1, b"ho")]
        for how, chunks in _every_feeding(data):
            self.assertEqual(run(chunks).summary, expected, how)

    def test_bad_crlf_before_a_repeated_line(self) -> None:
        """A payload one byte longer than announced, followed by the cached line, is a
        ProtocolError (the CRLF check is not skipped when the next line repeats)."""
        with self.assertRaises(ProtocolError) as cm:
            Parser().feed(b"MSG a 1 2\r\nhi\r\nMSG a 1 2\r\nhix\r\nMSG a 1 2\r\nhi\r\n")
        self.assertEqual(summarize(cm.exception.events), [msg("a", 1, b"hi")])  # type: ignore[attr-defined]

    def test_repeated_lines_after_a_long_payload(self) -> None:
        """After a payload long enough to be held in a bytearray, repeated lines that
        arrived in the same read give bytes payloads, and the cache still works."""
        big = b"MSG big 1 70000\r\n" + b"z" * 70000 + b"\r\n"
        small = b"MSG s 2 2\r\nhi\r\n"
        p = Parser()
        events = p.feed(big[:40000])
        events += p.feed(big[40000:] + small * 3)
        events += p.feed(small)
        expected = [msg("big", 1, b"z" * 70000)] + [msg("s", 2, b"hi")] * 4
        self.assertEqual(summarize(events), expected)
        self.assertEqual(p.buffered, 0)


class MsgConstructionTests(SynchronousTestCase):
    """``Msg.__init__`` is the one place that sets a Msg's slots, and every path of the
    parser goes through it (the fast path calls it on ``object.__new__(Msg)``)."""

    def _slots(self) -> set[str]:
        names: set[str] = set()
        for klass in Msg.__mro__:
            slots = klass.__dict__.get("__slots__", ())
            names.update([slots] if isinstance(slots, str) else slots)
        return names

    def test_init_assigns_exactly_the_slots(self) -> None:
        """The attributes Msg.__init__ assigns on self are exactly Msg's slots: a slot
        added to Msg and not set there fails this test."""
        source = textwrap.dedent(inspect.getsource(Msg.__init__))
        assigned = {
            node.attr
            for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id == "self"
        }
        self.assertEqual(assigned, self._slots())

    def test_init_sets_every_slot(self) -> None:
        """A Msg built by __init__ has a value in every slot (none left unset)."""
        m = Msg("s", "r", b"d", None, 3)
        unset = [name for name in sorted(self._slots()) if not hasattr(m, name)]
        self.assertEqual(unset, [])

    def test_every_parser_path_builds_with_init(self) -> None:
        """Messages from the cached line, a new line, a line only the general path
        takes, HMSG, payloads completed in a later read and a bytearray buffer: each
        one was built by Msg.__init__, and has every slot set."""
        built: list[Msg] = []
        original = Msg.__init__

        def counting_init(self: Msg, *args: Any) -> None:
            original(self, *args)
            built.append(self)

        self.patch(Msg, "__init__", counting_init)
        big = b"MSG big 1 70000\r\n" + b"z" * 70000 + b"\r\n"
        chunks = [
            b"MSG a 1 2\r\nhi\r\nMSG a 1 2\r\nho\r\n",  # new line, then cached
            b"msg\tb\t2\t1\r\nx\r\n",  # the general path
            b"HMSG c 3 12 13\r\nNATS/1.0\r\n\r\ny\r\n",
            b"MSG a 1 2\r\nh", b"u\r\n",  # fast path, payload in the next read
            b"MSG  d  4  1\r\n", b"z\r\n",  # general path, payload in the next read
            big[:30000], big[30000:] + b"MSG a 1 2\r\nhe\r\n",
        ]
        p = Parser()
        events: list[object] = []
        for chunk in chunks:
            events += p.feed(chunk)
        msgs = [e for e in events if isinstance(e, Msg)]
        self.assertEqual(len(msgs), 8)
        self.assertEqual([id(m) for m in built], [id(m) for m in msgs])
        for m in msgs:
            unset = [name for name in sorted(self._slots()) if not hasattr(m, name)]
            self.assertEqual(unset, [], repr(m))
            self.assertIsNone(m._respond)


class SansIOTests(SynchronousTestCase):
    """txnats/protocol/ is sans-IO: no module in it imports Twisted."""

    def test_no_twisted_imports(self) -> None:
        """No module under txnats/protocol/ imports twisted (at any depth of the code)."""
        import txnats.protocol.parser

        root = Path(txnats.protocol.parser.__file__).parent
        files = sorted(root.glob("*.py"))
        self.assertIn("parser.py", [f.name for f in files])
        for file in files:
            for node in ast.walk(ast.parse(file.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.Import):
                    names = [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom):
                    names = [node.module or ""]
                for name in names:
                    self.assertFalse(name.split(".")[0] == "twisted", f"{file.name}: {name}")


# --------------------------------------------------------------------------------------
# Hypothesis
# --------------------------------------------------------------------------------------

H_LIMITS = {"max_control_line": 256, "max_payload": 512}
# Slack over max_control_line + max_payload for the CRLF after a payload.
SLACK = 16


def _bound(kw: dict[str, int]) -> int:
    return kw["max_control_line"] + kw["max_payload"] + SLACK


_FRAGMENTS = st.sampled_from(
    [
        b"MSG ",
        b"HMSG ",
        b"msg ",
        b"INFO ",
        b"PING",
        b"PONG",
        b"+OK",
        b"-ERR ",
        b"\r\n",
        b"\r",
        b"\n",
        b" ",
        b"\t",
        b"0",
        b"1",
        b"12",
        b"3",
        b"99999999999",
        b"-1",
        b"foo",
        b"NATS/1.0",
        b"NATS/1.0 503",
        b": ",
        b"{}",
        b'{"max_payload":',
        b"[",
        b"'",
        b"\xff",
        b"\x00",
    ]
)
_NOISE = st.lists(st.one_of(_FRAGMENTS, st.binary(max_size=8)), max_size=40).map(b"".join)


def _chunk(data: bytes, draw: st.DataObject) -> list[bytes]:
    points = draw.draw(st.lists(st.integers(0, len(data)), max_size=12), label="splits")
    return split_at(data, points)


def _whole_vs_chunked(
    case: SynchronousTestCase, data: bytes, chunks: Sequence[bytes], kw: dict[str, int]
) -> None:
    """Feed ``data`` whole and in ``chunks``: only ProtocolError, identical results."""
    whole = run([data], **kw)
    parts = run(chunks, **kw)
    for outcome in (whole, parts):
        if outcome.error is not None:
            case.assertIs(type(outcome.error), ProtocolError)
            case.assertIsNone(outcome.error.__cause__, repr(outcome.error))
            _assert_refuses(case, outcome.parser)
        case.assertLessEqual(outcome.max_buffered, _bound(kw))
    case.assertEqual(whole.error is None, parts.error is None)
    case.assertEqual(whole.summary, parts.summary)
    if whole.error is None:
        case.assertEqual(whole.parser.buffered, parts.parser.buffered)


# Structure-aware frame generation -----------------------------------------------------

# Small sampled alphabets keep generation cheap while covering the awkward characters:
# non-ASCII, C0/C1 controls that bytes.split() does not treat as whitespace, etc.
_SUBJECT_CHARS = [*"abcXYZ019._-*>$:", "\u00e9", "\u4e2d", "\x1f", "\x7f", "\x85", "\U0001f600"]
_SUBJECT = st.text(st.sampled_from(_SUBJECT_CHARS), min_size=1, max_size=12)
_HNAME = st.text(st.sampled_from([*"AZaz09-_.~!#$%&'*+^`|"]), min_size=1, max_size=10)
_HVALUE_CHARS = [*"aZ0 :\t\x00-", "\u00e9", "\u4e2d", "\x0b", "\x85", "\u2028"]
_HVALUE = st.text(st.sampled_from(_HVALUE_CHARS), max_size=12)
_WORD = st.text(st.sampled_from([*"AZaz09-:/"]), min_size=1, max_size=8)
_PAYLOAD = st.one_of(
    st.binary(max_size=40),
    st.lists(st.sampled_from([b"\r\n", b"\r", b"\n", b"PING\r\n", b"MSG ", b"x"]), max_size=8).map(
        b"".join
    ),
)
_SEP = st.sampled_from([b" ", b"\t", b"  ", b" \t "])
_JSON_TEXT = st.text(
    st.sampled_from([*'ab "\\/', "\u00e9", "\x00", "\n", "\r", "\u2028"]), max_size=8
)
_JSON_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-(2**40), 2**40), _JSON_TEXT)
_INFO = st.fixed_dictionaries(
    {},
    optional={
        "server_id": _JSON_TEXT,
        "version": _JSON_TEXT,
        "max_payload": st.integers(1, 2**40),
        "proto": st.integers(0, 3),
        "headers": st.booleans(),
        "port": st.integers(0, 65535),
        "connect_urls": st.lists(_JSON_TEXT, max_size=3),
        "ldm": st.booleans(),
        "x_extra": st.lists(_JSON_SCALAR, max_size=3)
        | st.dictionaries(_JSON_TEXT, _JSON_SCALAR, max_size=3),
    },
)


def _case(op: bytes, draw: Any) -> bytes:
    """``op`` in upper, lower or title case, as ``draw`` picks."""
    style = draw(st.sampled_from(["upper", "lower", "title"]))
    return {"upper": op.upper(), "lower": op.lower(), "title": op.title()}[style]


@st.composite
def headers_block(draw: Any) -> tuple[bytes, tuple[int | None, str | None, list[tuple[str, str]]]]:
    status = draw(st.none() | st.integers(0, 999))
    words = draw(st.lists(_WORD, max_size=3)) if status is not None else []
    pairs = draw(st.lists(st.tuples(_HNAME, _HVALUE), max_size=4))
    seps = draw(
        st.lists(
            st.sampled_from([":", ": ", ":\t", ":  "]), min_size=len(pairs), max_size=len(pairs)
        )
    )
    first = "NATS/1.0"
    if status is not None:
        first += f" {status:03d}"
        if words:
            first += " " + " ".join(words)
    text = (
        first
        + "\r\n"
        + "".join(f"{n}{s}{v}\r\n" for (n, v), s in zip(pairs, seps, strict=True))
        + "\r\n"
    )
    expected = (status, " ".join(words) or None, [(n, v.strip(" \t")) for n, v in pairs])
    return text.encode(), expected


@st.composite
def frames(draw: Any) -> tuple[bytes, Summary]:
    """One valid server frame, encoded with random case and separators, and its summary."""
    kind = draw(st.sampled_from(["MSG", "HMSG", "INFO", "PING", "PONG", "+OK", "-ERR"]))
    sep = draw(_SEP)
    if kind in ("MSG", "HMSG"):
        subject = draw(_SUBJECT)
        sid = draw(st.integers(0, 2**64 - 1))
        reply = draw(st.none() | _SUBJECT)
        payload = draw(_PAYLOAD)
        fields = [_case(kind.encode(), draw), subject.encode(), b"%d" % sid]
        if reply is not None:
            fields.append(reply.encode())
        if kind == "MSG":
            fields.append(b"%d" % len(payload))
            body, hdr = payload, None
        else:
            block, hdr = draw(headers_block())
            fields += [b"%d" % len(block), b"%d" % (len(block) + len(payload))]
            body = block + payload
        return sep.join(fields) + b"\r\n" + body + b"\r\n", msg(subject, sid, payload, reply, hdr)
    if kind == "INFO":
        options = draw(_INFO)
        line = json.dumps(options).encode()
        return _case(b"INFO", draw) + sep + line + b"\r\n", ("INFO", options)
    if kind == "-ERR":
        text = draw(
            st.text(
                st.characters(blacklist_categories=("Cs",), blacklist_characters="\r\n"),
                max_size=20,
            )
        )
        return b"-" + _case(b"ERR", draw) + sep + b"'" + text.encode() + b"'\r\n", err(text)
    summary = {"PING": S_PING, "PONG": S_PONG, "+OK": S_OK}[kind]
    return _case(kind.encode(), draw) + b"\r\n", summary


_STREAM = st.lists(frames(), max_size=6)


class PropertyTests(SynchronousTestCase):
    """Hypothesis properties of the parser."""

    @settings(max_examples=400, deadline=None)
    @given(data=st.one_of(st.binary(max_size=300), _NOISE), draw=st.data())
    def test_arbitrary_bytes(self, data: bytes, draw: st.DataObject) -> None:
        """Random bytes in random chunks: only ProtocolError, bounded, same as fed whole."""
        _whole_vs_chunked(self, data, _chunk(data, draw), H_LIMITS)

    @settings(max_examples=300, deadline=None)
    @given(data=st.binary(min_size=1, max_size=2000), draw=st.data())
    def test_arbitrary_bytes_tight_limits(self, data: bytes, draw: st.DataObject) -> None:
        """With tiny limits, random input never grows the buffer past them."""
        kw = {"max_control_line": 8, "max_payload": 4}
        _whole_vs_chunked(self, data, _chunk(data, draw), kw)

    @settings(
        max_examples=300,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(stream=_STREAM, draw=st.data())
    def test_generated_frames_round_trip(
        self, stream: list[tuple[bytes, Summary]], draw: st.DataObject
    ) -> None:
        """Encoded valid frames fed at random split points give back exactly those events."""
        data = b"".join(f for f, _ in stream)
        expected = [s for _, s in stream]
        for chunks in ([data], _chunk(data, draw)):
            outcome = run(chunks)
            if outcome.error is not None:
                self.fail(f"unexpected {outcome.error!r} for {data!r}")
            self.assertEqual(outcome.summary, expected)
            self.assertEqual(outcome.parser.buffered, 0)

    @settings(
        max_examples=300,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
    @given(stream=_STREAM, draw=st.data())
    def test_mutated_streams(
        self, stream: list[tuple[bytes, Summary]], draw: st.DataObject
    ) -> None:
        """A valid stream with bytes flipped/inserted/deleted gives events or ProtocolError only."""
        data = bytearray(b"".join(f for f, _ in stream))
        mutations = draw.draw(
            st.lists(
                st.tuples(
                    st.sampled_from(["flip", "insert", "delete"]),
                    st.integers(0, 10_000),
                    st.sampled_from(b"\r\n \t0123456789:-+'{}[]\"AZaz\x00\xff"),
                ),
                min_size=1,
                max_size=4,
            ),
            label="mutations",
        )
        for op, where, byte in mutations:
            pos = where % (len(data) + 1)
            if op == "insert":
                data.insert(pos, byte)
            elif data:
                pos %= len(data)
                if op == "flip":
                    data[pos] ^= byte or 1
                else:
                    del data[pos]
        mutated = bytes(data)
        kw = {"max_control_line": 1024, "max_payload": 1024}
        _whole_vs_chunked(self, mutated, _chunk(mutated, draw), kw)
