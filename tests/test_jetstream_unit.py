"""Unit tests for the JetStream core with no server.

Pure functions (``parse_metadata``, ``api_error``, ``check_name``) are tested directly.
Everything that needs a :class:`txnats.Client` drives a real one the way
``tests/test_client_unit.py`` does: ``MemoryReactorClock`` records the dial, the test
plays the server on a ``StringTransport``, reads the frames the client wrote and feeds
``MSG``/``HMSG`` frames back for the inboxes (:class:`tests.support.jetstream.JsHarness`).
Time moves only with ``clock.advance``.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from twisted.internet.defer import CancelledError, Deferred
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txnats.errors import (
    APIError,
    BadSubjectError,
    ConnectionClosedError,
    ConsumerNotFoundError,
    InvalidArgumentError,
    JetStreamError,
    JetStreamNotEnabledError,
    MsgNotFoundError,
    NoRespondersError,
    NoStreamResponseError,
    OrderedConsumerError,
    StreamNameInUseError,
    StreamNotFoundError,
    TimeoutError,
    TooManyStalledMsgsError,
    WrongLastSequenceError,
)
from txnats.jetstream import (
    ConsumerInfo,
    JsMsg,
    OrderedConsumer,
    PubAck,
    StreamConfig,
    StreamInfo,
)
from txnats.jetstream._api import api_error, check_name
from txnats.jetstream.msg import MsgMetadata, SequencePair, parse_metadata
from txnats.protocol.events import Msg
from txnats.protocol.headers import encode_headers

from .support.jetstream import Frame, JsHarness, ack_subject, status_block
from .support.wire import hmsg_frame, msg_frame

ACK_V1 = "$JS.ACK.ORDERS.C1.2.100.7.1700000000000000001.42"


# ============================================================================ helpers
def err(code: int, err_code: int, description: str) -> dict[str, Any]:
    return {"error": {"code": code, "err_code": err_code, "description": description}}


# ============================================================================ pure
class ParseMetadataTests(SynchronousTestCase):
    def test_v1(self) -> None:
        """A 9-token subject: stream, consumer, counts; no domain."""
        self.assertEqual(parse_metadata(ACK_V1), MsgMetadata(
            stream="ORDERS", consumer="C1", num_delivered=2,
            sequence=SequencePair(consumer=7, stream=100),
            timestamp_ns=1700000000000000001, num_pending=42, domain="",
        ))

    def test_v2_no_domain(self) -> None:
        """A v2 subject with domain "_" (none) and an account hash."""
        m = parse_metadata("$JS.ACK._.ACCHASH.ORDERS.C1.3.101.8.1700000000000000002.0.RND")
        self.assertEqual(m.domain, "")
        self.assertEqual((m.stream, m.consumer), ("ORDERS", "C1"))
        self.assertEqual(m.num_delivered, 3)
        self.assertEqual(m.sequence, SequencePair(consumer=8, stream=101))
        self.assertEqual(m.timestamp_ns, 1700000000000000002)
        self.assertEqual(m.num_pending, 0)

    def test_v2_with_domain(self) -> None:
        """A v2 subject with a real domain; 11 tokens (no random token) is enough."""
        m = parse_metadata("$JS.ACK.hub.ACC.S.C.1.5.4.99.6")
        self.assertEqual(m.domain, "hub")
        self.assertEqual((m.stream, m.consumer, m.num_delivered), ("S", "C", 1))
        self.assertEqual(m.sequence, SequencePair(consumer=4, stream=5))
        self.assertEqual((m.timestamp_ns, m.num_pending), (99, 6))

    def test_v2_extra_tokens(self) -> None:
        """Tokens after the twelfth (future additions) are ignored."""
        m = parse_metadata("$JS.ACK.hub.ACC.S.C.1.5.4.99.6.RND.more.and.more")
        self.assertEqual((m.stream, m.sequence.stream, m.num_pending), ("S", 5, 6))

    def test_malformed(self) -> None:
        """Anything else is a JetStreamError: wrong prefix, token counts, non-numbers."""
        for reply in [
            None, "", "_INBOX.abc", "$JS.API.INFO", "$JS.ACK.S.C.1.2.3.4",  # 8 tokens
            "$JS.ACK.hub.ACC.S.C.1.2.3.4",  # 10 tokens
            "$JS.ACK.S.C.one.2.3.4.5", "$JS.ACK.S.C.1.2.3.4.", "$JS.ACKS.S.C.1.2.3.4.5",
            "$JS.ACK.hub.ACC.S.C.1.2.x.4.5.R",
        ]:
            with self.assertRaises(JetStreamError, msg=reply):
                parse_metadata(reply)


class ApiErrorTests(SynchronousTestCase):
    def test_known_codes(self) -> None:
        """Known err_codes map to their subclasses, keeping code and description."""
        for err_code, cls in [
            (10059, StreamNotFoundError), (10014, ConsumerNotFoundError),
            (10037, MsgNotFoundError), (10058, StreamNameInUseError),
            (10071, WrongLastSequenceError),
        ]:
            e = api_error(err(404, err_code, "thing"))
            self.assertIs(type(e), cls)
            self.assertEqual((e.code, e.err_code, e.description), (404, err_code, "thing"))

    def test_unknown_code(self) -> None:
        """An unknown err_code gives a plain APIError with every field."""
        e = api_error(err(400, 12345, "something new"))
        self.assertIs(type(e), APIError)
        self.assertEqual((e.code, e.err_code, e.description), (400, 12345, "something new"))
        self.assertIn("something new", str(e))
        self.assertIsInstance(e, JetStreamError)

    def test_incomplete_error_object(self) -> None:
        """Missing fields default rather than raise."""
        e = api_error({"error": {}})
        self.assertIs(type(e), APIError)
        self.assertEqual((e.code, e.err_code), (0, 0))


class CheckNameTests(SynchronousTestCase):
    def test_valid(self) -> None:
        for name in ["ORDERS", "a-b_c", "KV_bucket", "名前", "x" * 200]:
            self.assertEqual(check_name("stream", name), name)

    def test_invalid(self) -> None:
        """Empty, non-strings, whitespace, '.', '*', '>', path separators, control chars."""
        for name in [
            "", None, 5, b"bytes", "a b", "a\tb", "a.b", "a*", "a>", "a/b", "a\\b",
            "a\x00b", "a\nb", "a\x7fb",
        ]:
            with self.assertRaises(InvalidArgumentError, msg=repr(name)):
                check_name("stream", name)


# ============================================================================ JsMsg
class JsMsgTests(JsHarness, SynchronousTestCase):
    def jsmsg(self, reply: str | None = ACK_V1) -> JsMsg:
        m = Msg("orders.new", reply, b"payload", None, 1)
        return JsMsg(m, self.client)

    def test_properties_and_metadata(self) -> None:
        m = self.jsmsg()
        self.assertEqual((m.subject, m.reply, m.data, m.headers, m.sid),
                         ("orders.new", ACK_V1, b"payload", None, 1))
        self.assertEqual(m.metadata.sequence, SequencePair(consumer=7, stream=100))
        self.assertIs(m.metadata, m.metadata)  # parsed once

    def test_ack_then_any_terminal_ack_raises(self) -> None:
        """After ack, ack/nak/term/in_progress raise and send nothing more."""
        m = self.jsmsg()
        m.ack()
        [f] = self.pubs()
        self.assertEqual((f.subject, f.data), (ACK_V1, b"+ACK"))
        for again in (m.ack, m.nak, m.term, m.in_progress):
            self.assertRaises(JetStreamError, again)
        self.failureResultOf(m.ack_sync(), JetStreamError)
        self.assertEqual(self.pubs(), [])

    def test_in_progress_repeats(self) -> None:
        """in_progress may be sent any number of times, then a terminal ack once."""
        m = self.jsmsg()
        m.in_progress()
        m.in_progress()
        m.in_progress()
        m.term()
        self.assertEqual([f.data for f in self.pubs()], [b"+WPI"] * 3 + [b"+TERM"])
        self.assertRaises(JetStreamError, m.in_progress)

    def test_nak_plain_and_with_delay(self) -> None:
        """-NAK alone, or -NAK {"delay": <nanoseconds>}."""
        m1, m2, m3 = self.jsmsg(), self.jsmsg(), self.jsmsg()
        m1.nak()
        m2.nak(delay=1.5)
        m3.nak(delay=0)
        f1, f2, f3 = self.pubs()
        self.assertEqual(f1.data, b"-NAK")
        self.assertTrue(f2.data.startswith(b"-NAK "))
        self.assertEqual(json.loads(f2.data[5:]), {"delay": 1_500_000_000})
        self.assertEqual(json.loads(f3.data[5:]), {"delay": 0})
        self.assertRaises(JetStreamError, m2.nak)
        self.assertRaises(InvalidArgumentError, self.jsmsg().nak, -1)

    def test_term_reason(self) -> None:
        m1, m2 = self.jsmsg(), self.jsmsg()
        m1.term("bad input")
        m2.term()
        self.assertEqual([f.data for f in self.pubs()], [b"+TERM bad input", b"+TERM"])

    def test_no_reply_cannot_ack(self) -> None:
        m = self.jsmsg(reply=None)
        self.assertRaises(JetStreamError, m.ack)
        self.failureResultOf(m.ack_sync(), JetStreamError)
        self.assertRaises(JetStreamError, lambda: m.metadata)

    def test_ack_sync(self) -> None:
        """ack_sync requests +ACK on the reply subject and fires on the server's answer;
        a second ack while it is under way is refused."""
        m = self.jsmsg()
        d = m.ack_sync(timeout=2.0)
        f = self.one_request(ACK_V1)
        self.assertEqual(f.data, b"+ACK")
        self.assertRaises(JetStreamError, m.ack)
        self.assertNoResult(d)
        self.answer(f, b"")
        self.assertIsNone(self.successResultOf(d))
        self.assertRaises(JetStreamError, m.ack)

    def test_ack_sync_timeout_may_be_retried(self) -> None:
        """An ack_sync the server did not confirm leaves the message unacknowledged."""
        m = self.jsmsg()
        d = m.ack_sync(timeout=2.0)
        self.clock.advance(2.0)
        self.failureResultOf(d, TimeoutError)
        m.ack()
        self.assertEqual([f.data for f in self.pubs()], [b"+ACK", b"+ACK"])


# ============================================================================ API
class ApiRequestTests(JsHarness, SynchronousTestCase):
    def test_answer_decoded(self) -> None:
        d = self.js.account_info()
        f = self.one_request("$JS.API.INFO")
        self.assertEqual(f.data, b"")
        self.answer(f, {"type": "io.nats.jetstream.api.v1.account_info_response", "streams": 0})
        self.assertEqual(self.successResultOf(d).streams, 0)

    def test_error_object_maps(self) -> None:
        d = self.js.stream_info("NOPE")
        self.answer(self.one_request("$JS.API.STREAM.INFO.NOPE"),
                    err(404, 10059, "stream not found"))
        e = self.failureResultOf(d, StreamNotFoundError).value
        self.assertEqual((e.code, e.err_code, e.description), (404, 10059, "stream not found"))

    def test_no_responders_is_not_enabled(self) -> None:
        """No responder on the API: JetStreamNotEnabledError (not a bare 503)."""
        d = self.js.account_info()
        self.answer_status(self.one_request("$JS.API.INFO"), 503)
        self.failureResultOf(d, JetStreamNotEnabledError)

    def test_not_enabled_for_account(self) -> None:
        """A server with JetStream answers an account without it with err_code 10039:
        JetStreamNotEnabledError too."""
        d = self.js.account_info()
        self.answer(self.one_request("$JS.API.INFO"),
                    err(503, 10039, "JetStream not enabled for account"))
        f = self.failureResultOf(d, JetStreamNotEnabledError)
        self.assertIn("not enabled for account", str(f.value))

    def test_malformed_answer(self) -> None:
        d1, d2 = self.js.account_info(), self.js.account_info()
        f1, f2 = self.pubs()
        self.answer(f1, b"not json")
        self.answer(f2, b"[1, 2]")
        self.failureResultOf(d1, JetStreamError)
        self.failureResultOf(d2, JetStreamError)

    def test_timeout(self) -> None:
        js = self.client.jetstream(timeout=2.0)
        d = js.account_info()
        self.clock.advance(2.0)
        self.failureResultOf(d, TimeoutError)

    def test_domain_prefix(self) -> None:
        """A domain puts the API under $JS.<domain>.API."""
        js = self.client.jetstream(domain="hub")
        js.account_info()
        self.one_request("$JS.hub.API.INFO")
        self.assertRaises(InvalidArgumentError, self.client.jetstream, domain="a", prefix="b")

    def test_stream_calls(self) -> None:
        """Create/update/delete/purge: subjects, payloads, and what they fire with."""
        d = self.js.add_stream({"name": "S", "subjects": ["a"]}, storage="memory")
        f = self.one_request("$JS.API.STREAM.CREATE.S")
        self.assertEqual(f.json(), {"name": "S", "subjects": ["a"], "storage": "memory"})
        self.answer(f, {"config": {"name": "S"}})
        self.assertEqual(self.successResultOf(d), StreamInfo(StreamConfig("S")))

        d = self.js.update_stream(name="S", max_msgs=10)
        self.answer(self.one_request("$JS.API.STREAM.UPDATE.S"), err(400, 10058, "in use"))
        self.failureResultOf(d, StreamNameInUseError)

        d = self.js.purge_stream("S", subject="a", keep=3)
        f = self.one_request("$JS.API.STREAM.PURGE.S")
        self.assertEqual(f.json(), {"filter": "a", "keep": 3})
        self.answer(f, {"success": True, "purged": 7})
        self.assertEqual(self.successResultOf(d), 7)

        d = self.js.delete_stream("S")
        self.answer(self.one_request("$JS.API.STREAM.DELETE.S"), {"success": True})
        self.assertIs(self.successResultOf(d), True)

        d = self.js.delete_msg("S", 4)
        f = self.one_request("$JS.API.STREAM.MSG.DELETE.S")
        self.assertEqual(f.json(), {"seq": 4, "no_erase": True})

    def test_bad_names_fail_without_io(self) -> None:
        for d in [
            self.js.add_stream(name="a.b"), self.js.add_stream(subjects=["x"]),
            self.js.stream_info("a b"), self.js.delete_stream("*"),
            self.js.purge_stream(">"), self.js.get_msg("a.b", 1),
            self.js.add_consumer("S", durable_name="c.d"), self.js.consumer_info("S", ""),
            self.js.delete_consumer("S.T", "c"),
        ]:
            self.failureResultOf(d, InvalidArgumentError)
        self.assertRaises(InvalidArgumentError, self.js.pull_consumer, "S", "a.b")
        self.assertEqual(self.pubs(), [])

    def test_consumer_calls(self) -> None:
        d = self.js.add_consumer("S", durable_name="D", ack_policy="explicit")
        f = self.one_request("$JS.API.CONSUMER.CREATE.S.D")
        self.assertEqual(f.json(), {
            "stream_name": "S", "config": {"durable_name": "D", "ack_policy": "explicit"},
        })
        self.answer(f, {"name": "D"})
        self.assertEqual(self.successResultOf(d), ConsumerInfo(name="D"))
        self.js.add_consumer("S", {"ack_policy": "none"})  # ephemeral: the server names it
        self.one_request("$JS.API.CONSUMER.CREATE.S")
        d = self.js.consumer_info("S", "D")
        self.answer(self.one_request("$JS.API.CONSUMER.INFO.S.D"),
                    err(404, 10014, "consumer not found"))
        self.failureResultOf(d, ConsumerNotFoundError)
        d = self.js.delete_consumer("S", "D")
        self.answer(self.one_request("$JS.API.CONSUMER.DELETE.S.D"), {"success": True})
        self.assertIs(self.successResultOf(d), True)

    def test_stream_names_pages(self) -> None:
        """stream_names asks page after page (offset = names so far) until the total."""
        d = self.js.stream_names(subject="orders.>")
        f = self.one_request("$JS.API.STREAM.NAMES")
        self.assertEqual(f.json(), {"offset": 0, "subject": "orders.>"})
        self.answer(f, {"total": 5, "offset": 0, "limit": 2, "streams": ["a", "b"]})
        self.assertNoResult(d)
        f = self.one_request("$JS.API.STREAM.NAMES")
        self.assertEqual(f.json(), {"offset": 2, "subject": "orders.>"})
        self.answer(f, {"total": 5, "offset": 2, "limit": 2, "streams": ["c", "d"]})
        f = self.one_request("$JS.API.STREAM.NAMES")
        self.assertEqual(f.json()["offset"], 4)
        self.answer(f, {"total": 5, "offset": 4, "limit": 2, "streams": ["e"]})
        self.assertEqual(self.successResultOf(d), ["a", "b", "c", "d", "e"])

    def test_stream_names_empty_and_short_page(self) -> None:
        """No streams (the server sends null), or a page shorter than the total says:
        no endless asking."""
        d = self.js.stream_names()
        self.answer(self.one_request("$JS.API.STREAM.NAMES"),
                    {"total": 0, "offset": 0, "limit": 1024, "streams": None})
        self.assertEqual(self.successResultOf(d), [])
        d = self.js.stream_names()
        self.answer(self.one_request("$JS.API.STREAM.NAMES"), {"total": 3, "streams": ["a"]})
        self.answer(self.one_request("$JS.API.STREAM.NAMES"), {"total": 3, "streams": []})
        self.assertEqual(self.successResultOf(d), ["a"])

    def test_get_msg(self) -> None:
        """STREAM.MSG.GET: base64 data and headers decoded."""
        d = self.js.get_msg("S", 3)
        f = self.one_request("$JS.API.STREAM.MSG.GET.S")
        self.assertEqual(f.json(), {"seq": 3})
        hdrs = encode_headers({"X-A": "1"})
        self.answer(f, {"message": {
            "subject": "a.b", "seq": 3, "data": base64.b64encode(b"hi").decode(),
            "hdrs": base64.b64encode(hdrs).decode(), "time": "2024-01-01T00:00:00Z",
        }})
        m = self.successResultOf(d)
        self.assertEqual((m.subject, m.seq, m.data, m.time),
                         ("a.b", 3, b"hi", "2024-01-01T00:00:00Z"))
        assert m.headers is not None
        self.assertEqual(m.headers["X-A"], "1")

        d = self.js.get_msg("S", last_by_subject="a.b")
        f = self.one_request("$JS.API.STREAM.MSG.GET.S")
        self.assertEqual(f.json(), {"last_by_subj": "a.b"})
        self.answer(f, {"message": {"subject": "a.b", "seq": 9}})
        m = self.successResultOf(d)
        self.assertEqual((m.data, m.headers), (b"", None))

        d = self.js.get_msg("S", 1, next_by_subject="a.*")
        f = self.one_request("$JS.API.STREAM.MSG.GET.S")
        self.assertEqual(f.json(), {"seq": 1, "next_by_subj": "a.*"})
        self.answer(f, err(404, 10037, "no message found"))
        self.failureResultOf(d, MsgNotFoundError)

        self.failureResultOf(self.js.get_msg("S"), InvalidArgumentError)

    def test_direct_get(self) -> None:
        """Direct Get: last by subject in the request subject; a seq as JSON; headers
        carry the stored subject and sequence; 404 is MsgNotFoundError."""
        d = self.js.get_msg("S", last_by_subject="a.b", direct=True)
        f = self.one_request("$JS.API.DIRECT.GET.S.a.b")
        self.assertEqual(f.data, b"")
        block = encode_headers({
            "Nats-Stream": "S", "Nats-Subject": "a.b", "Nats-Sequence": "12",
            "Nats-Time-Stamp": "2024-01-01T00:00:00Z", "X-User": "u",
        })
        assert f.reply is not None
        self.send(hmsg_frame(f.reply, self.sid_for(f.reply), block, b"payload"))
        m = self.successResultOf(d)
        self.assertEqual((m.subject, m.seq, m.data, m.time),
                         ("a.b", 12, b"payload", "2024-01-01T00:00:00Z"))
        assert m.headers is not None
        self.assertEqual(m.headers["X-User"], "u")

        d = self.js.get_msg("S", 5, direct=True)
        f = self.one_request("$JS.API.DIRECT.GET.S")
        self.assertEqual(f.json(), {"seq": 5})
        self.answer_status(f, 404, "Message Not Found")
        self.failureResultOf(d, MsgNotFoundError)

        d = self.js.get_msg("S", 5, direct=True)
        self.answer(self.one_request("$JS.API.DIRECT.GET.S"), b"no headers")
        self.failureResultOf(d, JetStreamError)


# ============================================================================ publish
class PublishTests(JsHarness, SynchronousTestCase):
    def test_pub_ack(self) -> None:
        d = self.js.publish("orders.1", b"x")
        f = self.one_request("orders.1")
        self.assertEqual((f.op, f.data), ("PUB", b"x"))
        self.answer(f, {"stream": "ORDERS", "seq": 4})
        self.assertEqual(self.successResultOf(d), PubAck("ORDERS", 4, False, ""))

    def test_headers(self) -> None:
        """msg_id, expected_* and ttl become the Nats-* headers, beside the caller's."""
        d = self.js.publish(
            "orders.1", b"x", headers={"X-Mine": "m"}, msg_id="id-1", expected_stream="ORDERS",
            expected_last_seq=3, expected_last_subject_seq=2, expected_last_msg_id="id-0",
            ttl=90,
        )
        f = self.one_request("orders.1")
        assert f.headers is not None
        self.assertEqual(dict(f.headers), {
            "X-Mine": "m", "Nats-Msg-Id": "id-1", "Nats-Expected-Stream": "ORDERS",
            "Nats-Expected-Last-Sequence": "3", "Nats-Expected-Last-Subject-Sequence": "2",
            "Nats-Expected-Last-Msg-Id": "id-0", "Nats-TTL": "90s",
        })
        self.answer(f, {"stream": "ORDERS", "seq": 4, "duplicate": True, "domain": "hub"})
        self.assertEqual(self.successResultOf(d), PubAck("ORDERS", 4, True, "hub"))
        self.js.publish("a", ttl=1.5)
        [f] = self.pubs()
        assert f.headers is not None
        self.assertEqual(f.headers["Nats-TTL"], "1500ms")

    def test_error_ack(self) -> None:
        d = self.js.publish("orders.1", b"x", expected_last_seq=1)
        self.answer(self.one_request("orders.1"), err(400, 10071, "wrong last sequence: 4"))
        e = self.failureResultOf(d, WrongLastSequenceError).value
        self.assertEqual(e.err_code, 10071)

    def test_malformed_ack(self) -> None:
        for body in [b"", b"{}", b"[]", b'{"stream": "S", "seq": "x"}']:
            d = self.js.publish("a", b"")
            self.answer(self.one_request("a"), body)
            self.failureResultOf(d, JetStreamError)

    def test_503_retried_then_no_stream(self) -> None:
        """A 503 is retried retry_attempts times, retry_wait apart, then fails with
        NoStreamResponseError (also a NoRespondersError)."""
        d = self.js.publish("orders.1", b"x", retry_attempts=2, retry_wait=0.5)
        for _ in range(2):
            self.answer_status(self.one_request("orders.1"), 503)
            self.clock.advance(0.25)
            self.assertEqual(self.pubs(), [])
            self.clock.advance(0.25)
        self.answer_status(self.one_request("orders.1"), 503)
        f = self.failureResultOf(d, NoStreamResponseError)
        self.assertIsInstance(f.value, NoRespondersError)

    def test_503_then_stream_appears(self) -> None:
        d = self.js.publish("orders.1", b"x", retry_wait=0.1)
        self.answer_status(self.one_request("orders.1"), 503)
        self.clock.advance(0.1)
        self.answer(self.one_request("orders.1"), {"stream": "S", "seq": 1})
        self.assertEqual(self.successResultOf(d).seq, 1)

    def test_timeout_not_retried(self) -> None:
        d = self.js.publish("orders.1", b"x", timeout=1.0)
        self.one_request("orders.1")
        self.clock.advance(1.0)
        self.failureResultOf(d, TimeoutError)
        self.assertEqual(self.pubs(), [])


class PublishAsyncTests(JsHarness, SynchronousTestCase):
    def setUp(self) -> None:
        super().setUp()
        self.js = self.client.jetstream(publish_async_max_pending=3)

    def test_window_full_waits_then_fails_and_sends_nothing(self) -> None:
        """With the window full a call waits its stall_wait (0.2 s by default), then
        fails with TooManyStalledMsgsError, having sent nothing."""
        ds = [self.js.publish_async("a", b"%d" % i) for i in range(3)]
        self.assertEqual(self.js.publish_async_pending, 3)
        self.assertEqual(len(self.pubs()), 3)
        late = self.js.publish_async("a", b"late")
        self.clock.advance(0.19)
        self.assertNoResult(late)
        self.clock.advance(0.01)
        self.failureResultOf(late, TooManyStalledMsgsError)
        self.assertEqual(self.pubs(), [])
        self.assertEqual(self.js.publish_async_pending, 3)
        for d in ds:
            self.assertNoResult(d)
        self.failureResultOf(self.js.publish_async("a", stall_wait=0), TooManyStalledMsgsError)
        self.assertRaises(InvalidArgumentError, self.js.publish_async, "a", stall_wait=-1)
        self.assertEqual(self.pubs(), [])

    def test_stalled_calls_sent_in_order_as_room_frees(self) -> None:
        """Waiting calls go out oldest first as acknowledgements free room; a call made
        while others wait queues behind them even if there is room by then."""
        ds = [self.js.publish_async("a", b"%d" % i) for i in range(3)]
        frames = self.pubs()
        w1 = self.js.publish_async("a", b"w1", stall_wait=5)
        w2 = self.js.publish_async("a", b"w2", stall_wait=5)
        later: list[Deferred[PubAck]] = []
        # Called in the ack's callback, when there is room but w1 and w2 wait: it queues.
        ds[0].addCallback(lambda _: later.append(self.js.publish_async("a", b"w3", stall_wait=5)))
        self.answer(frames[0], {"stream": "S", "seq": 1})  # w1 takes the room it frees
        self.successResultOf(ds[0])
        [w3] = later
        self.assertEqual(self.js.publish_async_pending, 3)
        [sent] = self.pubs()
        self.assertEqual(sent.data, b"w1")
        self.answer(frames[1], {"stream": "S", "seq": 2})
        self.answer(frames[2], {"stream": "S", "seq": 3})
        self.assertEqual([f.data for f in self.pubs()], [b"w2", b"w3"])
        self.answer(sent, {"stream": "S", "seq": 4})
        self.assertEqual(self.successResultOf(w1).seq, 4)
        self.assertNoResult(w2)
        self.assertNoResult(w3)

    def test_stalled_call_cancellable(self) -> None:
        """Cancelling a waiting call takes it out of the line: it is never sent."""
        ds = [self.js.publish_async("a", b"%d" % i) for i in range(3)]
        frames = self.pubs()
        w1 = self.js.publish_async("a", b"w1", stall_wait=5)
        w2 = self.js.publish_async("a", b"w2", stall_wait=5)
        w1.cancel()
        self.failureResultOf(w1, CancelledError)
        self.answer(frames[0], {"stream": "S", "seq": 1})
        self.successResultOf(ds[0])
        self.clock.advance(0)
        self.assertEqual([f.data for f in self.pubs()], [b"w2"])
        self.clock.advance(10)  # its stall timer was stopped when it was sent
        self.assertNoResult(w2)

    def test_room_fires_after_an_ack(self) -> None:
        ds = [self.js.publish_async("a", b"%d" % i) for i in range(3)]
        frames = self.pubs()
        room = self.js.publish_async_room()
        self.assertNoResult(room)
        self.answer(frames[1], {"stream": "S", "seq": 2})
        self.assertEqual(self.successResultOf(ds[1]).seq, 2)
        self.answer(frames[0], {"stream": "S", "seq": 1})
        # By now (at most half the window waits) the room waiter has fired.
        self.successResultOf(room)
        self.assertEqual(self.js.publish_async_pending, 1)
        self.successResultOf(self.js.publish_async_room())  # room now: fires at once
        self.js.publish_async("a", b"again")
        self.assertNoResult(ds[2])

    def test_room_waiter_cancellable(self) -> None:
        [self.js.publish_async("a") for _ in range(3)]
        room = self.js.publish_async_room()
        room.cancel()
        self.failureResultOf(room, CancelledError)
        self.assertEqual(self.js._window.waiting, 0)

    def test_complete_after_callers_callbacks(self) -> None:
        """publish_async_complete fires once every ack is in and after the callbacks the
        caller put on the ack Deferreds ran (both acks in one read)."""
        order: list[Any] = []
        ds = [self.js.publish_async("a", b"%d" % i) for i in range(2)]
        for d in ds:
            d.addCallback(lambda ack: order.append(ack.seq))
        done = self.js.publish_async_complete()
        done.addCallback(lambda _: order.append("complete"))
        f1, f2 = self.pubs()
        assert f1.reply is not None and f2.reply is not None
        self.server.send(
            msg_frame(f2.reply, self.sid_for(f2.reply), b'{"stream": "S", "seq": 2}')
            + msg_frame(f1.reply, self.sid_for(f1.reply), b'{"stream": "S", "seq": 1}')
        )
        self.clock.advance(0)
        self.assertEqual(order, [2, 1, "complete"])
        self.assertEqual(self.js.publish_async_pending, 0)
        self.successResultOf(self.js.publish_async_complete())

    def test_complete_waits_for_publishes_made_in_callbacks(self) -> None:
        """A publish_async made from an ack's callback is part of what complete waits for."""
        more: list[Deferred[PubAck]] = []
        d = self.js.publish_async("a", b"1")
        d.addCallback(lambda ack: more.append(self.js.publish_async("a", b"2")))
        done = self.js.publish_async_complete()
        self.answer(self.pubs()[0], {"stream": "S", "seq": 1})
        self.assertNoResult(done)
        self.assertEqual(self.js.publish_async_pending, 1)
        [f] = self.pubs()
        self.assertEqual(f.data, b"2")
        self.answer(f, {"stream": "S", "seq": 2})
        self.successResultOf(done)

    def test_complete_counts_failures(self) -> None:
        """Errors (503, timeout, API errors) end a publish too."""
        self.js = self.client.jetstream(timeout=1.0)
        ds = [self.js.publish_async("a") for _ in range(3)]
        done = self.js.publish_async_complete()
        f1, f2, _ = self.pubs()
        self.answer_status(f1, 503)
        self.answer(f2, err(400, 10071, "wrong last sequence"))
        self.failureResultOf(ds[0], NoStreamResponseError)
        self.failureResultOf(ds[1], WrongLastSequenceError)
        self.assertNoResult(done)
        for _ in range(6):  # the timeout is checked coarsely: within 1.5 times it
            self.clock.advance(0.25)
        self.failureResultOf(ds[2], TimeoutError)
        self.successResultOf(done)
        self.assertEqual(self.js.publish_async_pending, 0)

    def test_cancel_and_close(self) -> None:
        """A cancelled publish_async fails with CancelledError but keeps its place in
        the window (its message is in flight); closing the client fails the rest with
        ConnectionClosedError, and complete fires."""
        ds = [self.js.publish_async("a", b"%d" % i) for i in range(3)]
        ds[0].cancel()
        self.failureResultOf(ds[0], CancelledError)
        self.assertEqual(self.js.publish_async_pending, 3)
        done = self.js.publish_async_complete()
        self.client.close()
        self.pump(self.server)
        for d in ds[1:]:
            self.failureResultOf(d, ConnectionClosedError)
        self.assertEqual(self.js.publish_async_pending, 0)
        self.successResultOf(done)

    def test_cancelled_then_acked(self) -> None:
        """The acknowledgement of a cancelled publish_async frees its place and is
        otherwise ignored (no AlreadyCalledError, nothing logged)."""
        d = self.js.publish_async("a", b"x")
        [frame] = self.pubs()
        d.cancel()
        self.failureResultOf(d, CancelledError)
        self.assertEqual(self.js.publish_async_pending, 1)
        self.answer(frame, {"stream": "S", "seq": 1})
        self.assertEqual(self.js.publish_async_pending, 0)
        self.assertEqual(self.flushLoggedErrors(), [])

    def test_bad_input_raises(self) -> None:
        """A bad subject raises at once and takes no room in the window."""
        self.assertRaises(BadSubjectError, self.js.publish_async, "bad subject")
        self.assertEqual(self.js.publish_async_pending, 0)

    def test_headers_on_async(self) -> None:
        self.js.publish_async("a", b"", msg_id="m1")
        [f] = self.pubs()
        assert f.headers is not None
        self.assertEqual(f.headers["Nats-Msg-Id"], "m1")


# ============================================================================ pull
class FetchTests(JsHarness, SynchronousTestCase):
    def start_fetch(self, batch: int = 3, **kw: Any) -> tuple[Deferred[list[JsMsg]], str, int]:
        d = self.js.pull_consumer("S", "P").fetch(batch, **kw)
        frames = self.written()
        [sub] = [f for f in frames if f.op == "SUB"]
        [req] = [f for f in frames if f.op == "PUB"]
        self.assertEqual(req.subject, "$JS.API.CONSUMER.MSG.NEXT.S.P")
        self.assertEqual(req.reply, sub.subject)
        self.last_request = req.json()
        return d, sub.subject, sub.sid

    def deliver(self, inbox: str, sid: int, *seqs: int) -> None:
        self.send(b"".join(
            msg_frame(inbox, sid, b"m%d" % s, reply=ack_subject("S", "P", s, s)) for s in seqs
        ))

    def test_batch_fill(self) -> None:
        """The fetch ends once batch messages came; the inbox is unsubscribed."""
        d, inbox, sid = self.start_fetch(3, expires=2.0)
        self.assertEqual(self.last_request, {"batch": 3, "expires": 2_000_000_000})
        self.deliver(inbox, sid, 1, 2)
        self.assertNoResult(d)
        self.deliver(inbox, sid, 3)
        msgs = self.successResultOf(d)
        self.assertEqual([m.data for m in msgs], [b"m1", b"m2", b"m3"])
        self.assertEqual(msgs[2].metadata.sequence.stream, 3)
        self.assertIn(Frame("UNSUB", sid=sid), self.written())
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)  # the ping timer

    def test_message_after_the_end_is_reported(self) -> None:
        """A message dispatched after the fetch ended (more than the batch in one read)
        is not handed to anyone, and a warning says so."""
        from twisted.logger import capturedLogs

        d, inbox, sid = self.start_fetch(2, expires=2.0)
        with capturedLogs() as events:
            self.deliver(inbox, sid, 1, 2, 3)
        self.assertEqual([m.data for m in self.successResultOf(d)], [b"m1", b"m2"])
        warnings = [e for e in events if "was not handed over" in e.get("log_format", "")]
        self.assertEqual(len(warnings), 1)
        self.assertEqual(warnings[0]["subject"], inbox)

    def test_status_100_ignored_404_408_end(self) -> None:
        for status, desc in [(404, "No Messages"), (408, "Request Timeout")]:
            d, inbox, sid = self.start_fetch(5)
            self.send(hmsg_frame(inbox, sid, status_block(100, "Idle Heartbeat")))
            self.deliver(inbox, sid, 1)
            self.assertNoResult(d)
            self.send(hmsg_frame(inbox, sid, status_block(status, desc)))
            self.assertEqual(len(self.successResultOf(d)), 1)

    def test_expires_with_nothing_is_empty(self) -> None:
        d, inbox, sid = self.start_fetch(5, expires=1.0)
        self.send(hmsg_frame(inbox, sid, status_block(408, "Request Timeout")))
        self.assertEqual(self.successResultOf(d), [])

    def test_no_wait_sends_no_expires(self) -> None:
        """no_wait alone: with expires the server would wait when nothing is pending."""
        d, inbox, sid = self.start_fetch(5, no_wait=True)
        self.assertEqual(self.last_request, {"batch": 5, "no_wait": True})
        self.send(hmsg_frame(inbox, sid, status_block(404, "No Messages")))
        self.assertEqual(self.successResultOf(d), [])

    def test_409_fails_unless_messages_held(self) -> None:
        d, inbox, sid = self.start_fetch(5, max_bytes=100)
        self.assertEqual(self.last_request["max_bytes"], 100)
        self.send(hmsg_frame(inbox, sid, status_block(409, "Message Size Exceeds MaxBytes")))
        e = self.failureResultOf(d, APIError).value
        self.assertEqual(e.code, 409)
        self.assertIn("MaxBytes", e.description)
        d, inbox, sid = self.start_fetch(5)
        self.deliver(inbox, sid, 1)
        self.send(hmsg_frame(inbox, sid, status_block(409, "Consumer Deleted")))
        self.assertEqual(len(self.successResultOf(d)), 1)
        d, inbox, sid = self.start_fetch(5)
        self.send(hmsg_frame(inbox, sid, status_block(409, "Leadership Change")))
        self.assertEqual(self.successResultOf(d), [])

    def test_503_no_consumer(self) -> None:
        d, inbox, sid = self.start_fetch(1)
        self.send(hmsg_frame(inbox, sid, status_block(503)))
        self.assertEqual(self.failureResultOf(d, APIError).value.code, 503)

    def test_local_deadline(self) -> None:
        """No answer at all: the fetch ends a grace period after expires."""
        d, inbox, sid = self.start_fetch(2, expires=1.0)
        self.clock.advance(1.0)
        self.assertNoResult(d)
        self.clock.advance(1.0)
        self.failureResultOf(d, TimeoutError)
        d, inbox, sid = self.start_fetch(2, expires=1.0)
        self.deliver(inbox, sid, 1)
        self.clock.advance(2.0)
        self.assertEqual(len(self.successResultOf(d)), 1)

    def test_late_messages_ignored_and_cancel(self) -> None:
        d, inbox, sid = self.start_fetch(1)
        self.deliver(inbox, sid, 1, 2)  # the second comes after the fetch ended
        self.assertEqual(len(self.successResultOf(d)), 1)
        d, inbox, sid = self.start_fetch(1)
        d.cancel()
        self.failureResultOf(d, CancelledError)
        self.assertIn(Frame("UNSUB", sid=sid), self.written())

    def test_cancel_hands_over_what_came(self) -> None:
        """Cancelling a fetch that holds messages fires it with them (as nats.go)."""
        d, inbox, sid = self.start_fetch(5)
        self.deliver(inbox, sid, 1, 2)
        d.cancel()
        self.assertEqual([m.data for m in self.successResultOf(d)], [b"m1", b"m2"])
        self.assertIn(Frame("UNSUB", sid=sid), self.written())
        self.deliver(inbox, sid, 3)
        self.assertEqual(len(self.clock.getDelayedCalls()), 1)  # the ping timer

    def test_bad_arguments(self) -> None:
        pc = self.js.pull_consumer("S", "P")
        self.failureResultOf(pc.fetch(0), InvalidArgumentError)
        self.failureResultOf(pc.fetch(1, expires=0), InvalidArgumentError)


# ============================================================================ ordered
class OrderedTests(JsHarness, SynchronousTestCase):
    HB = 1.0

    def setUp(self) -> None:
        super().setUp()
        self.got: list[JsMsg] = []
        self.errors: list[Exception] = []
        self.oc = OrderedConsumer(
            self.js, "S", self.got.append, heartbeat=self.HB, filter_subjects=["s.>"],
            on_error=self.errors.append,
        )

    def create(self, answer: bool = True) -> tuple[str, int, str, dict[str, Any]]:
        """Expect a new SUB and CONSUMER.CREATE; answer it; return inbox, sid, name, config."""
        frames = self.written()
        [req] = [f for f in frames if f.op == "PUB" and ".CONSUMER.CREATE." in f.subject]
        cfg = req.json()["config"]
        self.assertEqual(req.subject, f"$JS.API.CONSUMER.CREATE.S.{cfg['name']}")
        [sub] = [f for f in frames if f.op == "SUB" and f.subject == cfg["deliver_subject"]]
        if answer:
            self.answer(req, {"name": cfg["name"], "num_pending": 0})
        self.frames = frames
        return sub.subject, sub.sid, cfg["name"], cfg

    def started(self) -> tuple[str, int, str, dict[str, Any]]:
        d = self.oc.start()
        created = self.create()
        self.assertEqual(self.successResultOf(d).name, created[2])
        return created

    def deliver(self, inbox: str, sid: int, name: str, *pairs: tuple[int, int]) -> None:
        self.send(b"".join(
            msg_frame(inbox, sid, b"s%d" % s, reply=ack_subject("S", name, s, c))
            for s, c in pairs
        ))

    def advance(self, seconds: float) -> None:
        """Move time in small steps (a timer set while the clock advances counts from
        the end of that advance)."""
        for _ in range(round(seconds / 0.25)):
            self.clock.advance(0.25)

    def heartbeat(self, inbox: str, sid: int, last: int | None = None) -> None:
        extra = {} if last is None else {"Nats_Last_Consumer": str(last)}
        self.send(hmsg_frame(inbox, sid, status_block(100, "Idle Heartbeat", **extra)))

    def assert_reset(self, old_sid: int, old_name: str, start_seq: int) -> tuple[str, int, str]:
        inbox, sid, name, cfg = self.create()
        self.assertIn(Frame("UNSUB", sid=old_sid), self.frames)
        self.assertIn(f"$JS.API.CONSUMER.DELETE.S.{old_name}",
                      [f.subject for f in self.frames if f.op == "PUB"])
        self.assertNotEqual(name, old_name)
        self.assertEqual(cfg["deliver_policy"], "by_start_sequence")
        self.assertEqual(cfg["opt_start_seq"], start_seq)
        return inbox, sid, name

    def test_config(self) -> None:
        _, _, _, cfg = self.started()
        self.assertEqual(cfg["ack_policy"], "none")
        self.assertEqual(cfg["max_deliver"], 1)
        self.assertIs(cfg["flow_control"], True)
        self.assertEqual(cfg["idle_heartbeat"], 1_000_000_000)
        self.assertEqual(cfg["deliver_policy"], "all")
        self.assertEqual(cfg["filter_subject"], "s.>")
        self.assertIs(cfg["mem_storage"], True)
        self.assertNotIn("durable_name", cfg)

    def test_in_order_delivery(self) -> None:
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1), (11, 2), (15, 3))
        self.assertEqual([m.data for m in self.got], [b"s10", b"s11", b"s15"])
        self.assertEqual(self.got[2].metadata.sequence, SequencePair(consumer=3, stream=15))
        self.assertEqual(self.oc.delivered, 3)
        self.assertEqual(self.pubs(), [])  # no acks: ack policy none

    def test_gap_resets_from_last_stream_seq(self) -> None:
        """A consumer-sequence gap drops the delivery, deletes the consumer and makes a
        new one starting after the last stream sequence handed on."""
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1), (11, 2), (13, 4))
        self.assertEqual([m.data for m in self.got], [b"s10", b"s11"])
        inbox2, sid2, name2 = self.assert_reset(sid, name, 12)
        # Late deliveries to the old inbox are ignored; the new consumer counts from 1.
        self.deliver(inbox, sid, name, (14, 5))
        self.deliver(inbox2, sid2, name2, (12, 1), (13, 2), (14, 3))
        self.assertEqual([m.data for m in self.got], [b"s10", b"s11", b"s12", b"s13", b"s14"])
        self.assertEqual(self.errors, [])

    def test_duplicate_resets(self) -> None:
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1), (10, 1))
        self.assertEqual(len(self.got), 1)
        self.assert_reset(sid, name, 11)

    def test_heartbeat_with_other_last_consumer_resets(self) -> None:
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1), (11, 2))
        self.heartbeat(inbox, sid, last=2)
        self.heartbeat(inbox, sid)
        self.assertEqual(self.written(), [])
        self.heartbeat(inbox, sid, last=3)
        self.assert_reset(sid, name, 12)

    def test_missed_heartbeats_reset(self) -> None:
        """Nothing (not even a heartbeat) for long enough: reset. Heartbeats keep it."""
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1))
        for _ in range(10):  # heartbeats keep it alive
            self.clock.advance(self.HB)
            self.heartbeat(inbox, sid, last=1)
        self.assertEqual(self.written(), [])
        self.advance(2.75 * self.HB)
        # Silent for a heartbeat: it asks once whether its consumer exists; it does.
        [ask] = self.written()
        self.assertEqual(ask.subject, f"$JS.API.CONSUMER.INFO.S.{name}")
        self.answer(ask, {"stream_name": "S", "name": name, "config": {}})
        self.assertEqual(self.written(), [])  # silent for under 3 heartbeats: not yet
        self.advance(3.25 * self.HB)  # by 6, it has reset
        self.assert_reset(sid, name, 11)
        # The new consumer is watched too.
        self.advance(6 * self.HB)
        frames = self.written()
        self.assertTrue(any(".CONSUMER.CREATE.S." in f.subject for f in frames))

    def test_flow_control_answered(self) -> None:
        """A flow-control request (status 100 with a reply) is answered with an empty
        message; a heartbeat's Nats-Consumer-Stalled subject likewise."""
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1))
        self.send(hmsg_frame(inbox, sid, status_block(100, "FlowControl Request"),
                             reply="$JSC.FC.x"))
        self.send(hmsg_frame(inbox, sid, status_block(
            100, "Idle Heartbeat", Nats_Last_Consumer="1", Nats_Consumer_Stalled="$JSC.FC.y",
        )))
        self.assertEqual([(f.subject, f.data) for f in self.pubs()],
                         [("$JSC.FC.x", b""), ("$JSC.FC.y", b"")])
        self.assertEqual(len(self.got), 1)

    def test_other_status_resets(self) -> None:
        inbox, sid, name, _ = self.started()
        self.send(hmsg_frame(inbox, sid, status_block(409, "Consumer Deleted")))
        self.assert_reset_from_start(sid, name)

    def assert_reset_from_start(self, old_sid: int, old_name: str) -> None:
        _, _, name, cfg = self.create()
        self.assertIn(Frame("UNSUB", sid=old_sid), self.frames)
        self.assertNotEqual(name, old_name)
        self.assertEqual(cfg["deliver_policy"], "all")  # nothing handed on yet

    def test_stream_gone_ends_it(self) -> None:
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1), (12, 3))
        _, _, _, _ = self.create(answer=False)
        [req] = [f for f in self.frames if ".CONSUMER.CREATE." in f.subject]
        self.answer(req, err(404, 10059, "stream not found"))
        [e] = self.errors
        self.assertIsInstance(e, StreamNotFoundError)
        self.clock.advance(60)
        self.assertEqual([f for f in self.written() if f.op == "SUB"], [])

    def test_transient_failures_retry_then_give_up(self) -> None:
        """A failed recreate is retried; with max_resets, too many in a row end it with
        an error (without, it never gives up: tests/test_js_ordered.py)."""
        self.oc = OrderedConsumer(
            self.js, "S", self.got.append, heartbeat=self.HB, filter_subjects=["s.>"],
            on_error=self.errors.append, max_resets=10,
        )
        inbox, sid, name, _ = self.started()
        self.deliver(inbox, sid, name, (10, 1), (12, 3))
        for _ in range(80):
            frames = self.written()
            creates = [f for f in frames if ".CONSUMER.CREATE." in f.subject]
            if not creates:
                if self.errors:
                    break
                self.clock.advance(1.0)
                continue
            self.answer_status(creates[0], 503)
        [e] = self.errors
        self.assertIsInstance(e, OrderedConsumerError)

    def test_stop(self) -> None:
        inbox, sid, name, _ = self.started()
        self.oc.stop()
        frames = self.written()
        self.assertIn(Frame("UNSUB", sid=sid), frames)
        self.assertIn(f"$JS.API.CONSUMER.DELETE.S.{name}", [f.subject for f in frames])
        self.deliver(inbox, sid, name, (10, 1))
        self.assertEqual(self.got, [])
        self.clock.advance(60)
        self.assertEqual(self.written(), [])


class FailureTypesTests(SynchronousTestCase):
    def test_no_stream_is_no_responders(self) -> None:
        """Code that catches NoRespondersError still catches a JetStream 503."""
        self.assertTrue(issubclass(NoStreamResponseError, NoRespondersError))
        self.assertTrue(issubclass(JetStreamNotEnabledError, JetStreamError))
        f = Failure(NoStreamResponseError("x"))
        self.assertTrue(f.check(NoRespondersError))
