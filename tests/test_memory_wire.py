"""
The in-memory server's parser of client frames (``txnats.testing._wire``), sans I/O.

Bytes in, events out: each frame whole, byte by byte, and cut where Hypothesis says;
the limits and refusals nats-server applies (see the module's docstring, and
``tests/test_memory_vs_server`` for the same cases against a real server).
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st
from twisted.trial import unittest

from txnats.testing._wire import (
    CONTROL_LINE_EXCEEDED,
    MAX_PAYLOAD_VIOLATION,
    UNKNOWN_OPERATION,
    ClientParser,
    ClientViolation,
    Connect,
    Event,
    Ping,
    Pong,
    Pub,
    Sub,
    Unsub,
    is_literal_subject,
    is_valid_subject,
    subject_matches,
)

STREAM = (
    b'CONNECT {"verbose":false,"headers":true}\r\n'
    b"SUB a.* q 1\r\nSUB b 2\r\n"
    b"PUB a.b 5\r\nhello\r\n"
    b"PUB a.b reply 0\r\n\r\n"
    b"HPUB a.c r 12 14\r\nNATS/1.0\r\n\r\nhi\r\n"
    b"PUB crlf 4\r\n\r\n\r\n\r\n"
    b"UNSUB 1 5\r\nUNSUB 2\r\nPING\r\nPONG\r\n"
)
EVENTS: list[Event] = [
    Connect({"verbose": False, "headers": True}),
    Sub(b"a.*", b"q", b"1"),
    Sub(b"b", None, b"2"),
    Pub(b"a.b", None, None, b"hello"),
    Pub(b"a.b", b"reply", None, b""),
    Pub(b"a.c", b"r", b"NATS/1.0\r\n\r\n", b"hi"),
    Pub(b"crlf", None, None, b"\r\n\r\n"),
    Unsub(b"1", 5),
    Unsub(b"2", None),
    Ping(),
    Pong(),
]


def parse(chunks: list[bytes], max_payload: int = 1024 * 1024) -> list[Event]:
    """Feed ``chunks`` one by one, taking events as they complete (and acting on
    CONNECT's ``headers`` as the server does)."""
    parser = ClientParser(max_payload)
    events: list[Event] = []
    for chunk in chunks:
        parser.receive_data(chunk)
        while (event := parser.next_event()) is not None:
            if isinstance(event, Connect):
                parser.headers = bool(event.options.get("headers"))
            events.append(event)
    return events


def violation(data: bytes, max_payload: int = 1024 * 1024) -> ClientViolation:
    """The violation ``data`` (whole) raises; fails if it raises none."""
    try:
        parse([data], max_payload)
    except ClientViolation as e:
        return e
    raise AssertionError(f"no violation for {data[:60]!r}")


class FramingTests(unittest.SynchronousTestCase):
    """Frames come out whole however the bytes are cut."""

    def test_whole(self) -> None:
        """The stream in one read gives every event, in order."""
        self.assertEqual(parse([STREAM]), EVENTS)

    def test_byte_by_byte(self) -> None:
        """The stream one byte at a time gives the same events."""
        self.assertEqual(parse([STREAM[i : i + 1] for i in range(len(STREAM))]), EVENTS)

    @given(st.lists(st.integers(min_value=0, max_value=len(STREAM)), max_size=20))
    def test_any_split(self, cuts: list[int]) -> None:
        """The stream cut at any points gives the same events."""
        points = [0, *sorted(cuts), len(STREAM)]
        self.assertEqual(parse([STREAM[a:b] for a, b in itertools.pairwise(points)]), EVENTS)

    def test_nothing_until_complete(self) -> None:
        """A frame without its payload's end is not an event yet."""
        parser = ClientParser(1024)
        parser.receive_data(b"PUB a 5\r\nhel")
        self.assertIsNone(parser.next_event())
        parser.receive_data(b"lo\r")
        self.assertIsNone(parser.next_event())
        parser.receive_data(b"\n")
        self.assertEqual(parser.next_event(), Pub(b"a", None, None, b"hello"))

    def test_lowercase_lf_blanks(self) -> None:
        """Lowercase operations, LF-only lines, tabs and runs of blanks are accepted."""
        data = b"sub\ta  1\nping\npub a   1 \nx\r\nPINGX\r\nPONG junk\n"
        self.assertEqual(
            parse([data]),
            [Sub(b"a", None, b"1"), Ping(), Pub(b"a", None, None, b"x"), Ping(), Pong()],
        )

    def test_ignored_lines(self) -> None:
        """+OK and INFO from a client are ignored; CONNECT null is {}."""
        self.assertEqual(parse([b"+OK\r\nINFO {}\r\nCONNECT null\r\n"]), [Connect({})])

    def test_unsub_limits(self) -> None:
        """UNSUB's count: a number, or 0 (unsubscribe now) for anything else."""
        self.assertEqual(
            parse([b"UNSUB 1 3\r\nUNSUB 1 x\r\nUNSUB 1 -1\r\n"]),
            [Unsub(b"1", 3), Unsub(b"1", 0), Unsub(b"1", 0)],
        )


class LimitTests(unittest.SynchronousTestCase):
    """max_control_line and max_payload, as nats-server applies them."""

    def test_arguments_of_4096_bytes(self) -> None:
        """4096 bytes of arguments pass (for SUB, PUB and CONNECT)."""
        sub = b"SUB " + b"a" * 4094 + b" 1\r\n"
        pub = b"PUB " + b"a" * 4094 + b" 1\r\nx\r\n"
        connect = b'CONNECT {"name":"' + b"n" * 4085 + b'"}\r\n'
        self.assertEqual(len(connect) - len(b"CONNECT \r\n"), 4096)
        self.assertEqual(len(parse([sub, pub, connect])), 3)

    def test_arguments_of_4097_bytes(self) -> None:
        """One byte more is 'maximum control line exceeded', for each operation."""
        for data in (
            b"SUB " + b"a" * 4095 + b" 1\r\n",
            b"PUB " + b"a" * 4095 + b" 1\r\nx\r\n",
            b'CONNECT {"name":"' + b"n" * 4086 + b'"}\r\n',
            b"UNSUB " + b"1" * 4097 + b"\r\n",
        ):
            self.assertEqual(violation(data).error, CONTROL_LINE_EXCEEDED)

    def test_blanks_after_the_operation_do_not_count(self) -> None:
        """The blanks between the operation and its arguments are not counted."""
        self.assertEqual(len(parse([b"SUB  \t " + b"a" * 4094 + b" 1\r\n"])), 1)

    def test_too_long_before_the_line_ends(self) -> None:
        """Arguments past the limit are refused before their line's end arrives; a
        line at the limit waits (its CR is not counted)."""
        parser = ClientParser(1024)
        parser.receive_data(b"SUB " + b"a" * 4094 + b" 1\r")
        self.assertIsNone(parser.next_event())
        parser.receive_data(b"\n")
        self.assertEqual(parser.next_event(), Sub(b"a" * 4094, None, b"1"))
        parser = ClientParser(1024)
        parser.receive_data(b"SUB " + b"a" * 4097)
        with self.assertRaises(ClientViolation) as caught:
            parser.next_event()
        self.assertEqual(caught.exception.error, CONTROL_LINE_EXCEEDED)

    def test_smaller_limit(self) -> None:
        """A server made with a smaller max_control_line applies it."""
        parser = ClientParser(1024, max_control_line=10)
        parser.receive_data(b"SUB abcdefgh 1\r\nSUB abcdefghi 1\r\n")
        self.assertEqual(parser.next_event(), Sub(b"abcdefgh", None, b"1"))  # 10 bytes
        self.assertRaises(ClientViolation, parser.next_event)

    def test_max_payload(self) -> None:
        """A size above max_payload (HPUB: headers and payload) is refused at once,
        before the payload arrives; exactly max_payload passes."""
        self.assertEqual(violation(b"PUB a 11\r\n", 10).error, MAX_PAYLOAD_VIOLATION)
        hpub = b'CONNECT {"headers":true}\r\nHPUB a 5 11\r\n'
        self.assertEqual(violation(hpub, 10).error, MAX_PAYLOAD_VIOLATION)
        self.assertEqual(parse([b"PUB a 10\r\n0123456789\r\n"], 10)[0].payload, b"0123456789")


class RefusalTests(unittest.SynchronousTestCase):
    """What closes the connection, with which -ERR (or none)."""

    def test_unknown_operations(self) -> None:
        """Unknown operations are 'Unknown Protocol Operation'."""
        for data in (b"FOO bar\r\n", b"PUBX a 1\r\n", b"\r\n", b" PING\r\n", b"MSG a 1 1\r\n",
                     b"+X\r\n", b"SUB\r\n", b"UNSUB\r\n", b"PIX\r\n"):
            self.assertEqual(violation(data).error, UNKNOWN_OPERATION, data)

    def test_unknown_before_the_line_ends(self) -> None:
        """A line that cannot become an operation is refused without waiting for its
        end; a prefix of one waits."""
        for data in (b"SX", b"X", b"PUBX", b"-"):
            parser = ClientParser(1024)
            parser.receive_data(data)
            if data == b"-":
                self.assertIsNone(parser.next_event())  # may become -ERR
                continue
            self.assertRaises(ClientViolation, parser.next_event)
        for data in (b"S", b"SU", b"SUB", b"CONN", b"HP", b"PIN", b"unsu"):
            parser = ClientParser(1024)
            parser.receive_data(data)
            self.assertIsNone(parser.next_event(), data)

    def test_payload_must_end_with_crlf(self) -> None:
        """A payload followed by anything but CRLF is 'Unknown Protocol Operation'."""
        for data in (b"PUB x 1\r\nxy\r\n", b"PUB x 1\r\nx\nPING\r\n", b"PUB x 1\r\nx\rX"):
            self.assertEqual(violation(data).error, UNKNOWN_OPERATION, data)

    def test_silent_closes(self) -> None:
        """Malformed arguments close the connection without an -ERR."""
        for data in (
            b"PUB x abc\r\n", b"PUB x +1\r\n", b"PUB x\r\n", b"PUB a b c 1\r\n",
            b"SUB a q 1 2\r\n", b"SUB a\r\n", b"UNSUB 1 2 3\r\n",
            b"CONNECT {nope\r\n", b"CONNECT []\r\n", b'CONNECT {"verbose":"yes"}\r\n',
            b'CONNECT {"protocol":true}\r\n', b"CONNECT\r\n", b"INFO\r\n", b"-ERR 'x'\r\n",
        ):
            self.assertIsNone(violation(data).error, data)

    def test_hpub_needs_headers(self) -> None:
        """HPUB before CONNECT said headers: true closes silently; after it, it works."""
        self.assertIsNone(violation(b"HPUB a 12 12\r\nNATS/1.0\r\n\r\n\r\n").error)
        events = parse([b'CONNECT {"headers":true}\r\nHPUB a 0 1\r\nx\r\n'])
        self.assertEqual(events[1], Pub(b"a", None, b"", b"x"))

    def test_hpub_header_over_total(self) -> None:
        """A header size above the total closes silently."""
        self.assertIsNone(violation(b'CONNECT {"headers":true}\r\nHPUB a 5 3\r\nxxx\r\n').error)

    def test_refuses_after_a_violation(self) -> None:
        """After a violation the parser refuses everything."""
        parser = ClientParser(1024)
        parser.receive_data(b"FOO\r\nPING\r\n")
        self.assertRaises(ClientViolation, parser.next_event)
        self.assertRaises(ClientViolation, parser.next_event)


class SubjectTests(unittest.SynchronousTestCase):
    """Subject rules and wildcard matching."""

    def test_valid_subscriptions(self) -> None:
        """Empty tokens and a '>' before the end are invalid; partial wildcards are text."""
        for good in (b"a", b"a.*", b"*.>", b">", b"a*", b"a.b>", "é".encode(), b"a\x00b"):
            self.assertTrue(is_valid_subject(good), good)
        for bad in (b"", b"a..b", b".a", b"a.", b"a.>.b", b">.a"):
            self.assertFalse(is_valid_subject(bad), bad)

    def test_literal(self) -> None:
        """Publish subjects have no wildcard tokens and no empty tokens."""
        self.assertTrue(is_literal_subject(b"a.b*.c>"))
        for bad in (b"a.*", b">", b"a..b", b""):
            self.assertFalse(is_literal_subject(bad), bad)

    def test_matching(self) -> None:
        """'*' matches one token, a final '>' one or more, others themselves."""
        cases = [
            (b"w.*", b"w.a", True), (b"w.*", b"w", False), (b"w.*", b"w.a.b", False),
            (b"g.>", b"g.a.b", True), (b"g.>", b"g", False), (b">", b"a", True),
            (b"s.*.t.>", b"s.a.t.x", True), (b"s.*.t.>", b"s.a.t", False),
            (b"a.*", b"a.*", True), (b">", b"a..b", False), (b"a*", b"ab", False),
            (b"a.b", b"a.b", True), (b"a.b", b"a.b.c", False),
        ]
        for pattern, subject, expected in cases:
            self.assertEqual(
                subject_matches(pattern.split(b"."), subject.split(b".")), expected,
                (pattern, subject),
            )
