"""Tests for ``txnats.protocol.commands``: exact wire bytes and subject validation.

The property at the end ties the encoders to the parser: whatever ``encode_pub`` /
``encode_hpub`` accept, rewritten as the server would deliver it (``PUB`` -> ``MSG``),
parses back to the same subject, reply, payload and headers.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from txnats.errors import BadHeaderError, BadSubjectError, NatsError
from txnats.protocol import commands
from txnats.protocol.commands import (
    encode_connect,
    encode_hpub,
    encode_pub,
    encode_sub,
    encode_unsub,
    publish_subject,
    queue_name,
    reply_subject,
    split_frames,
    subscribe_subject,
)
from txnats.protocol.events import Msg
from txnats.protocol.headers import Headers
from txnats.protocol.parser import Parser

ADR4_HPUB = b"HPUB FOO 22 33\r\nNATS/1.0\r\nBar: Baz\r\n\r\nHello NATS!\r\n"


class EncoderBytesTests(SynchronousTestCase):
    """Each encoder produces exactly the documented bytes."""

    def test_pub(self) -> None:
        """PUB without reply: ``PUB <subject> <size>\\r\\n<payload>\\r\\n``."""
        self.assertEqual(encode_pub("FOO", b"Hello NATS!"), b"PUB FOO 11\r\nHello NATS!\r\n")

    def test_pub_reply(self) -> None:
        """PUB with a reply subject puts it between subject and size (docs example)."""
        self.assertEqual(
            encode_pub("FRONT.DOOR", b"Knock Knock", reply="JOKE.22"),
            b"PUB FRONT.DOOR JOKE.22 11\r\nKnock Knock\r\n",
        )

    def test_pub_empty_payload(self) -> None:
        """An empty payload is still followed by CRLF."""
        self.assertEqual(encode_pub("NOTIFY"), b"PUB NOTIFY 0\r\n\r\n")
        self.assertEqual(encode_pub("NOTIFY", b""), b"PUB NOTIFY 0\r\n\r\n")

    def test_pub_payload_with_crlf(self) -> None:
        """Payload bytes, CRLF included, are copied verbatim and counted."""
        self.assertEqual(encode_pub("a", b"\r\n\r\n"), b"PUB a 4\r\n\r\n\r\n\r\n")

    def test_pub_utf8_subject(self) -> None:
        """Non-ASCII subjects are sent as UTF-8."""
        self.assertEqual(encode_pub("caf\u00e9", b"x"), b"PUB caf\xc3\xa9 1\r\nx\r\n")

    def test_hpub_adr4(self) -> None:
        """The ADR-4 HPUB example, byte for byte."""
        self.assertEqual(encode_hpub("FOO", b"Hello NATS!", {"Bar": "Baz"}), ADR4_HPUB)

    def test_hpub_adr4_header_only(self) -> None:
        """The ADR-4 header-only HPUB example: sizes equal, payload empty."""
        self.assertEqual(
            encode_hpub("NOTIFY", b"", {"Bar": "Baz"}),
            b"HPUB NOTIFY 22 22\r\nNATS/1.0\r\nBar: Baz\r\n\r\n\r\n",
        )

    def test_hpub_reply(self) -> None:
        """HPUB with a reply subject puts it before the two sizes."""
        self.assertEqual(
            encode_hpub("FOO", b"Hello NATS!", {"Bar": "Baz"}, reply="INBOX.22"),
            b"HPUB FOO INBOX.22 22 33\r\nNATS/1.0\r\nBar: Baz\r\n\r\nHello NATS!\r\n",
        )

    def test_hpub_multi_value(self) -> None:
        """Repeated header names (docs example ``MORNING.MENU``) give repeated lines."""
        self.assertEqual(
            encode_hpub("MORNING.MENU", b"Yum!", {"BREAKFAST": ["donut", "eggs"]}),
            b"HPUB MORNING.MENU 47 51\r\nNATS/1.0\r\nBREAKFAST: donut\r\n"
            b"BREAKFAST: eggs\r\n\r\nYum!\r\n",
        )

    def test_hpub_headers_object_with_status(self) -> None:
        """A Headers with a status puts it on the version line."""
        h = Headers({"A": "1"}, status=100, description="FlowControl Request")
        self.assertEqual(
            encode_hpub("x", b"", h),
            b"HPUB x 42 42\r\nNATS/1.0 100 FlowControl Request\r\nA: 1\r\n\r\n\r\n",
        )

    def test_hpub_empty_headers(self) -> None:
        """Empty headers still send the 12-byte minimal block."""
        self.assertEqual(encode_hpub("x", b"ab", {}), b"HPUB x 12 14\r\nNATS/1.0\r\n\r\nab\r\n")

    def test_hpub_pre_encoded_block(self) -> None:
        """Already encoded header bytes are used as the block as is."""
        block = b"NATS/1.0\r\nBar: Baz\r\n\r\n"
        self.assertEqual(encode_hpub("FOO", b"Hello NATS!", block), ADR4_HPUB)

    def test_sub(self) -> None:
        """SUB without and with queue group."""
        self.assertEqual(encode_sub("FOO", 1), b"SUB FOO 1\r\n")
        self.assertEqual(encode_sub("BAR", 44, "G1"), b"SUB BAR G1 44\r\n")
        self.assertEqual(encode_sub("a.*.c", 2), b"SUB a.*.c 2\r\n")
        self.assertEqual(encode_sub("a.>", 3, "q"), b"SUB a.> q 3\r\n")

    def test_unsub(self) -> None:
        """UNSUB without and with max_msgs."""
        self.assertEqual(encode_unsub(1), b"UNSUB 1\r\n")
        self.assertEqual(encode_unsub(1, 5), b"UNSUB 1 5\r\n")
        self.assertEqual(encode_unsub(7, 0), b"UNSUB 7 0\r\n")

    def test_connect_go_example(self) -> None:
        """CONNECT is compact JSON in the caller's key order (the Go example of 1.5)."""
        options = {
            "verbose": False,
            "pedantic": False,
            "tls_required": False,
            "name": "",
            "lang": "go",
            "version": "1.53.1",
            "protocol": 1,
            "echo": True,
            "headers": True,
            "no_responders": True,
        }
        self.assertEqual(
            encode_connect(options),
            b'CONNECT {"verbose":false,"pedantic":false,"tls_required":false,"name":"",'
            b'"lang":"go","version":"1.53.1","protocol":1,"echo":true,"headers":true,'
            b'"no_responders":true}\r\n',
        )

    def test_connect_escapes_control_characters(self) -> None:
        """A CR/LF or non-ASCII in a CONNECT string is JSON-escaped: one line, no injection."""
        out = encode_connect({"name": "a\r\nPUB x 1\r\n", "user": "caf\u00e9"})
        self.assertTrue(out.endswith(b"\r\n"))
        self.assertNotIn(b"\r", out[:-2])
        self.assertNotIn(b"\n", out[:-2])
        self.assertTrue(out[:-2].isascii())

    def test_ping_pong(self) -> None:
        """The PING and PONG constants are the bare frames."""
        self.assertEqual(commands.PING, b"PING\r\n")
        self.assertEqual(commands.PONG, b"PONG\r\n")


# Subject tables ------------------------------------------------------------------------

VALID_EVERYWHERE = [
    "a",
    "a.b.c",
    "_INBOX.x.y",
    "FOO",
    "foo-bar_baz",
    "$JS.API.INFO",
    "caf\u00e9.\u4e2d",
    "a*b",
    "a>b.c",
    "123",
]
VALID_SUB_ONLY = ["a.*.c", "a.>", "*", ">", "*.>", "a.*", "*.*.*"]

INVALID_EVERYWHERE = [
    "",
    ".",
    ".a",
    "a.",
    "a..b",
    "a b",
    " a",
    "a ",
    "a\tb",
    "a\r\nb",
    "a\rb",
    "a\nb",
    "a\x00b",
    "a\x0bb",
    "a\x0cb",
    "a.\ud800",
]
INVALID_SUB = ["a.>.b", ">.a", "a.>.>"]
NOT_STR: list[Any] = [None, b"foo", 1, 1.5, ["a"], ("a",), {"a": 1}, object()]

VALID_QUEUES = ["q", "workers", "q.1", "Q-2_x", "caf\u00e9"]
INVALID_QUEUES = ["", "a b", " q", "q ", "a\tb", "a\rb", "a\nb", "a\r\nb", "a\x00b", "q\ud800"]


class SubjectValidationTests(SynchronousTestCase):
    """Subject, reply and queue validation accepts and refuses exactly the tables."""

    def _refused(self, fn: Any, value: Any, *rest: Any) -> None:
        for attempt in (1, 2):  # twice: a cache must never let a bad value through
            try:
                result = fn(value, *rest)
            except BadSubjectError as e:
                self.assertIsInstance(e, ValueError)
                self.assertIsInstance(e, NatsError)
            except Exception as e:
                self.fail(f"{fn.__name__}({value!r}) raised {e!r}, not BadSubjectError")
            else:
                self.fail(f"{fn.__name__}({value!r}) returned {result!r} (attempt {attempt})")

    def test_valid_publish_and_reply(self) -> None:
        """Plain subjects are accepted for publish and reply and come back as UTF-8."""
        for s in VALID_EVERYWHERE:
            self.assertEqual(publish_subject(s), s.encode(), s)
            self.assertEqual(reply_subject(s), s.encode(), s)

    def test_valid_subscribe(self) -> None:
        """Plain subjects, ``*`` tokens and a final ``>`` are accepted for subscribe."""
        for s in VALID_EVERYWHERE + VALID_SUB_ONLY:
            self.assertEqual(subscribe_subject(s), s.encode(), s)

    def test_invalid_everywhere(self) -> None:
        """Empty tokens, whitespace, CR, LF, NUL and unencodable text are refused by all."""
        for s in INVALID_EVERYWHERE:
            for fn in (publish_subject, reply_subject, subscribe_subject):
                self._refused(fn, s)

    def test_wildcards_refused_for_publish_and_reply(self) -> None:
        """``*`` and ``>`` tokens are refused in publish and reply subjects."""
        for s in VALID_SUB_ONLY:
            self._refused(publish_subject, s)
            self._refused(reply_subject, s)

    def test_full_wildcard_must_be_last(self) -> None:
        """``>`` anywhere but the last token is refused for subscribe."""
        for s in INVALID_SUB:
            self._refused(subscribe_subject, s)

    def test_subscribe_cache_does_not_leak_into_publish(self) -> None:
        """A wildcard accepted for subscribe is still refused for publish afterwards."""
        subscribe_subject("cache.*.x")
        self._refused(publish_subject, "cache.*.x")
        publish_subject("cache.plain")
        self.assertEqual(subscribe_subject("cache.plain"), b"cache.plain")

    def test_not_str(self) -> None:
        """Non-str subjects and queues (bytes, numbers, lists, None) raise BadSubjectError."""
        for value in NOT_STR:
            for fn in (publish_subject, reply_subject, subscribe_subject, queue_name):
                self._refused(fn, value)

    def test_queues(self) -> None:
        """Queue names without whitespace/NUL are accepted; the others refused."""
        for q in VALID_QUEUES:
            self.assertEqual(queue_name(q), q.encode(), q)
        for q in INVALID_QUEUES:
            self._refused(queue_name, q)


class EncoderValidationTests(SynchronousTestCase):
    """Encoders validate before producing anything."""

    def _raises(self, exc: type[Exception], fn: Any, *args: Any, **kwargs: Any) -> None:
        try:
            result = fn(*args, **kwargs)
        except exc:
            return
        except Exception as e:
            self.fail(f"{fn.__name__}{args!r} raised {e!r}, not {exc.__name__}")
        self.fail(f"{fn.__name__}{args!r} returned {result!r}")

    def test_pub_bad_subject_or_reply(self) -> None:
        """encode_pub refuses a bad subject, a wildcard subject and a bad reply."""
        self._raises(BadSubjectError, encode_pub, "a b", b"x")
        self._raises(BadSubjectError, encode_pub, "foo bar", b"x")
        self._raises(BadSubjectError, encode_pub, "a.*", b"x")
        self._raises(BadSubjectError, encode_pub, "a", b"x", reply="b c")
        self._raises(BadSubjectError, encode_pub, "a", b"x", reply="b.>")
        self._raises(BadSubjectError, encode_pub, "a", b"x", reply="")

    def test_hpub_bad_subject_reply_or_headers(self) -> None:
        """encode_hpub refuses bad subjects, replies, header names and values."""
        self._raises(BadSubjectError, encode_hpub, "a\r\nPUB b", b"", {})
        self._raises(BadSubjectError, encode_hpub, "a", b"", {}, reply="r\n")
        self._raises(BadHeaderError, encode_hpub, "a", b"", {"A": "x\r\nB: y"})
        self._raises(BadHeaderError, encode_hpub, "a", b"", {"A B": "x"})
        self._raises(BadHeaderError, encode_hpub, "a", b"", {"A:": "x"})
        self._raises(BadHeaderError, encode_hpub, "a", b"", {"\u00c4": "x"})

    def test_sub_bad_subject_or_queue(self) -> None:
        """encode_sub refuses a bad subject and a bad queue group."""
        self._raises(BadSubjectError, encode_sub, "a.>.b", 1)
        self._raises(BadSubjectError, encode_sub, "a b", 1)
        self._raises(BadSubjectError, encode_sub, "a", 1, "q r")
        self._raises(BadSubjectError, encode_sub, "a", 1, "")


# Property: encoders round-trip through the parser ---------------------------------------

_CHARS = [
    "a", "b", "Z", "0", "-", "_", "$", ".", ".", "*", ">",
    " ", "\t", "\r", "\n", "\x00", "\x0b", "\u00e9", "\u4e2d", "\ud800",
]  # fmt: skip
_TEXT = st.text(st.sampled_from(_CHARS), max_size=10)
_NAME_CHARS = ["A", "b", "-", "0", "~", ":", " ", "\t", "\r", "\n", "\x00", "\x7f", "\u00e9"]
_HNAME = st.text(st.sampled_from(_NAME_CHARS), max_size=6)
_VALUE_CHARS = ["a", "Z", " ", "\t", ":", "\r", "\n", "\x00", "\u00e9", "\u4e2d", "\ud800"]
_HVALUE = st.text(st.sampled_from(_VALUE_CHARS), max_size=8)
_BAD_CHARS = set(" \t\r\n\x0b\x0c\x00")


def _encodable(s: str) -> bool:
    try:
        s.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return False
    return True


def ok_subject(s: str, wildcards: bool) -> bool:
    """Independent statement of the subject rules (PROTOCOL.md 1.1)."""
    if not s or _BAD_CHARS.intersection(s) or not _encodable(s):
        return False
    tokens = s.split(".")
    if "" in tokens:
        return False
    if not wildcards and ("*" in tokens or ">" in tokens):
        return False
    return ">" not in tokens[:-1]


def ok_queue(q: str) -> bool:
    return bool(q) and not _BAD_CHARS.intersection(q) and _encodable(q)


def ok_header(name: str, value: str) -> bool:
    """Names: printable ASCII 33-126 but ':'; values: anything encodable but CR/LF."""
    name_ok = bool(name) and all(33 <= ord(c) <= 126 and c != ":" for c in name)
    return name_ok and "\r" not in value and "\n" not in value and _encodable(value)


def as_server_delivery(wire: bytes, sid: int) -> bytes:
    """Rewrite a client PUB/HPUB as the server delivers it: MSG/HMSG with a sid."""
    end = wire.index(b"\r\n")
    fields = wire[:end].split(b" ")
    op = {b"PUB": b"MSG", b"HPUB": b"HMSG"}[fields[0]]
    return b" ".join([op, fields[1], b"%d" % sid, *fields[2:]]) + wire[end:]


class SplitFramesTests(SynchronousTestCase):
    """split_frames() cuts the client's own command stream back into whole frames."""

    def test_every_kind_of_frame(self) -> None:
        """PUB/HPUB payloads may hold CRLFs and command text; they stay whole."""
        frames = [
            encode_connect({"verbose": False}),
            encode_sub("a.*", 1),
            encode_pub("a.b", b"PUB x 3\r\nabc\r\n"),
            b"PING\r\n",
            encode_hpub("a.b", b"\r\n", {"K": ["v"]}, reply="r.1"),
            encode_pub("a.c", b""),
            encode_unsub(1, 5),
            b"PONG\r\n",
        ]
        self.assertEqual(split_frames(b"".join(frames)), frames)
        self.assertEqual(split_frames(b""), [])

    @settings(max_examples=200, deadline=None)
    @given(st.lists(st.binary(max_size=40), max_size=20))
    def test_any_payloads(self, payloads: list[bytes]) -> None:
        """Any run of PUB frames, whatever their payloads, splits back into itself."""
        frames = [encode_pub("s", p) for p in payloads]
        self.assertEqual(split_frames(b"".join(frames)), frames)

    def test_truncated_stream_raises(self) -> None:
        """A stream cut inside a line or a payload is refused, not half-split."""
        self.assertRaises(ValueError, split_frames, b"PING\r\nPUB a 3\r\nab")
        self.assertRaises(ValueError, split_frames, b"PING\r\nPON")


class RoundTripPropertyTests(SynchronousTestCase):
    """What the encoders accept, the parser gives back; what they refuse raises."""

    @settings(max_examples=500, deadline=None)
    @given(
        subject=_TEXT,
        reply=st.none() | _TEXT,
        payload=st.binary(max_size=32) | st.sampled_from([b"\r\n", b"PING\r\n", b"\r\n\r\n"]),
        headers=st.none() | st.lists(st.tuples(_HNAME, _HVALUE), max_size=4),
        sid=st.integers(0, 2**64 - 1),
    )
    def test_publish_round_trip(
        self,
        subject: str,
        reply: str | None,
        payload: bytes,
        headers: list[tuple[str, str]] | None,
        sid: int,
    ) -> None:
        """encode_pub/encode_hpub: invalid input raises, valid input parses back unchanged."""
        grouped: dict[str, list[str]] | None = None
        if headers is not None:
            grouped = {}
            for name, value in headers:
                grouped.setdefault(name, []).append(value)
        subject_ok = ok_subject(subject, False) and (reply is None or ok_subject(reply, False))
        headers_ok = headers is None or all(ok_header(n, v) for n, v in headers)
        expected: list[type[Exception]] = []
        if not subject_ok:
            expected.append(BadSubjectError)
        if not headers_ok:
            expected.append(BadHeaderError)

        try:
            if grouped is None:
                wire = encode_pub(subject, payload, reply=reply)
            else:
                wire = encode_hpub(subject, payload, grouped, reply=reply)
        except (BadSubjectError, BadHeaderError) as e:
            self.assertTrue(expected, f"valid input refused: {e!r}")
            self.assertIn(type(e), expected)
            return
        self.assertEqual(expected, [], f"invalid input encoded: {wire!r}")

        line = wire[: wire.index(b"\r\n")]
        self.assertEqual(line.split(b" "), line.split(), "control line splits only on spaces")
        p = Parser()
        events = p.feed(as_server_delivery(wire, sid))
        self.assertEqual(p.buffered, 0)
        self.assertEqual(len(events), 1)
        m = events[0]
        assert isinstance(m, Msg)
        self.assertEqual((m.subject, m.sid, m.reply, m.data), (subject, sid, reply, payload))
        if grouped is None:
            self.assertIsNone(m.headers)
        else:
            assert m.headers is not None
            self.assertEqual(
                m.headers.multi_items(),
                [(n, v.strip(" \t")) for n, vs in grouped.items() for v in vs],
            )
            self.assertIsNone(m.headers.status)

    @settings(max_examples=300, deadline=None)
    @given(subject=_TEXT, queue=st.none() | _TEXT, sid=st.integers(0, 2**64 - 1))
    def test_subscribe_round_trip(self, subject: str, queue: str | None, sid: int) -> None:
        """encode_sub: invalid input raises BadSubjectError; valid output splits back exactly."""
        valid = ok_subject(subject, True) and (queue is None or ok_queue(queue))
        try:
            wire = encode_sub(subject, sid, queue)
        except BadSubjectError as e:
            self.assertFalse(valid, f"valid input refused: {e!r}")
            return
        self.assertTrue(valid, f"invalid input encoded: {wire!r}")
        self.assertTrue(wire.endswith(b"\r\n"))
        line = wire[:-2]
        self.assertNotIn(b"\r", line)
        self.assertNotIn(b"\n", line)
        fields = line.split(b" ")
        self.assertEqual(fields, line.split())
        words = [subject] if queue is None else [subject, queue]
        self.assertEqual(fields[0], b"SUB")
        self.assertEqual([f.decode("utf-8", "surrogateescape") for f in fields[1:-1]], words)
        self.assertEqual(int(fields[-1]), sid)
