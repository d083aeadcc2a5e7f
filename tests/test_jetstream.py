"""JetStream against a real ``nats-server -js``: streams, publishing, reading stored
messages, pull consumers, the ordered consumer.

One server per class (see ``tests/support/servers.py``); each test works on streams
named after itself and deletes them. Every wait is a bounded Deferred; nothing sleeps
except where the server's own timers are the subject (ack wait, in-progress), and
then with short, explicit delays.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

from twisted.internet.defer import Deferred, gatherResults
from twisted.trial.unittest import TestCase

import txnats
from txnats.errors import (
    APIError,
    JetStreamError,
    JetStreamNotEnabledError,
    MsgNotFoundError,
    NoStreamResponseError,
    StreamNameInUseError,
    StreamNotFoundError,
    TooManyStalledMsgsError,
    WrongLastSequenceError,
)
from txnats.jetstream import (
    AccountInfo,
    JetStreamContext,
    JsMsg,
    OrderedConsumer,
    PubAck,
    PullConsumer,
)

from .support.servers import ServerPerClass
from .support.waits import WAIT, bounded, reactor, sleep


class JetStreamCase(ServerPerClass, TestCase):
    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 30

    async def connect(self) -> tuple[txnats.Client, JetStreamContext]:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, name=self._testMethodName))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc, nc.jetstream()

    def name(self, suffix: str = "") -> str:
        """A stream name of this test's own (and the subject prefix it takes)."""
        return re.sub(r"[^A-Za-z0-9]", "", self._testMethodName.title()) + suffix

    async def stream(self, js: JetStreamContext, suffix: str = "", **config: Any) -> str:
        """Create a memory stream on ``<name>.>``, deleted after the test; return its name."""
        name = self.name(suffix)
        config.setdefault("subjects", [f"{name}.>"])
        config.setdefault("storage", "memory")
        await bounded(js.add_stream(name=name, **config))

        async def drop() -> None:
            try:
                await bounded(js.delete_stream(name))
            except StreamNotFoundError:
                pass

        self.addCleanup(drop)
        return name


# ============================================================================ streams
class StreamTests(JetStreamCase):
    async def test_account_info(self) -> None:
        _, js = await self.connect()
        info = await bounded(js.account_info())
        self.assertIsInstance(info, AccountInfo)
        self.assertGreater(info.limits.max_streams, -2)
        self.assertIn("type", info.extra)  # the server's field this version leaves alone

    async def test_crud(self) -> None:
        """Create (idempotent with the same config), conflict, update, info, delete."""
        _, js = await self.connect()
        name = self.name()
        info = await bounded(js.add_stream(name=name, subjects=[f"{name}.>"], storage="memory"))
        self.assertEqual(info.config.name, name)
        self.assertEqual(info.state.messages, 0)
        # The same config again is fine; another one is a conflict.
        await bounded(js.add_stream(name=name, subjects=[f"{name}.>"], storage="memory"))
        e = await self.assertFailure(bounded(js.add_stream(
            name=name, subjects=[f"{name}.other"], storage="memory"
        )), StreamNameInUseError)
        self.assertEqual(e.err_code, 10058)

        info = await bounded(js.update_stream(
            name=name, subjects=[f"{name}.>"], storage="memory", max_msgs=10
        ))
        self.assertEqual(info.config.max_msgs, 10)
        info = await bounded(js.stream_info(name))
        self.assertEqual(info.config.max_msgs, 10)

        self.assertIs(await bounded(js.delete_stream(name)), True)
        e = await self.assertFailure(bounded(js.stream_info(name)), StreamNotFoundError)
        self.assertEqual((e.code, e.err_code), (404, 10059))
        await self.assertFailure(bounded(js.delete_stream(name)), StreamNotFoundError)
        await self.assertFailure(bounded(js.update_stream(name=name)), StreamNotFoundError)

    async def test_stream_names_pages(self) -> None:
        """More streams than one page of names (1024) come back whole; a subject
        filter narrows them."""
        _, js = await self.connect()
        prefix = self.name()
        names = [f"{prefix}{i}" for i in range(1100)]
        await bounded(gatherResults([
            js.add_stream(name=n, subjects=[f"{n}.x"], storage="memory") for n in names
        ]), 10)

        async def drop() -> None:
            await bounded(gatherResults([js.delete_stream(n) for n in names]), 10)

        self.addCleanup(drop)
        got = await bounded(js.stream_names())
        self.assertEqual(len(got), len(set(got)))
        self.assertLessEqual(set(names), set(got))
        self.assertEqual(await bounded(js.stream_names(subject=f"{prefix}7.x")), [f"{prefix}7"])
        self.assertEqual(await bounded(js.stream_names(subject="nothing.here")), [])

    async def test_purge(self) -> None:
        """Purge by subject, then keep the newest; the count removed comes back."""
        _, js = await self.connect()
        s = await self.stream(js)
        for i in range(3):
            await bounded(js.publish(f"{s}.a", b"a%d" % i))
            await bounded(js.publish(f"{s}.b", b"b%d" % i))
        self.assertEqual(await bounded(js.purge_stream(s, subject=f"{s}.a")), 3)
        self.assertEqual(await bounded(js.purge_stream(s, keep=1)), 2)
        info = await bounded(js.stream_info(s))
        self.assertEqual(info.state.messages, 1)
        self.assertEqual((await bounded(js.get_msg(s, last_by_subject=f"{s}.b"))).data, b"b2")
        self.assertEqual(await bounded(js.purge_stream(s)), 1)


# ============================================================================ publish
class PublishTests(JetStreamCase):
    async def test_publish_and_dedupe(self) -> None:
        """A PubAck with stream and seq; the same msg_id again is a duplicate."""
        _, js = await self.connect()
        s = await self.stream(js)
        ack = await bounded(js.publish(f"{s}.x", b"one", msg_id="m-1"))
        self.assertEqual(ack, PubAck(s, 1, False, ""))
        again = await bounded(js.publish(f"{s}.x", b"one", msg_id="m-1"))
        self.assertEqual((again.seq, again.duplicate), (1, True))
        ack = await bounded(js.publish(f"{s}.x", b"two", msg_id="m-2"))
        self.assertEqual((ack.seq, ack.duplicate), (2, False))
        info = await bounded(js.stream_info(s))
        self.assertEqual(info.state.messages, 2)

    async def test_expectations(self) -> None:
        """expected_last_seq, expected_last_subject_seq, expected_last_msg_id and
        expected_stream make the stream refuse a publish unless they hold."""
        _, js = await self.connect()
        s = await self.stream(js)
        await bounded(js.publish(f"{s}.a", b"", msg_id="first"))
        e = await self.assertFailure(
            bounded(js.publish(f"{s}.a", b"", expected_last_seq=5)), WrongLastSequenceError
        )
        self.assertEqual(e.err_code, 10071)
        self.assertEqual((await bounded(js.publish(f"{s}.a", expected_last_seq=1))).seq, 2)
        await self.assertFailure(
            bounded(js.publish(f"{s}.b", expected_last_subject_seq=1)), APIError
        )
        await bounded(js.publish(f"{s}.a", expected_last_subject_seq=2))
        await self.assertFailure(
            bounded(js.publish(f"{s}.a", expected_last_msg_id="nope")), APIError
        )
        await self.assertFailure(
            bounded(js.publish(f"{s}.a", expected_stream="OTHER")), APIError
        )
        self.assertEqual((await bounded(js.publish(f"{s}.a", expected_stream=s))).seq, 4)
        info = await bounded(js.stream_info(s))
        self.assertEqual(info.state.messages, 4)

    async def test_ttl(self) -> None:
        """ttl sets Nats-TTL (whole seconds, or milliseconds); a stream that does not
        allow per-message TTLs refuses it."""
        _, js = await self.connect()
        s = await self.stream(js, allow_msg_ttl=True)
        ack = await bounded(js.publish(f"{s}.t", b"x", ttl=60))
        m = await bounded(js.get_msg(s, ack.seq))
        assert m.headers is not None
        self.assertEqual(m.headers["Nats-TTL"], "60s")
        ack = await bounded(js.publish(f"{s}.t", b"x", ttl=1.5))
        m = await bounded(js.get_msg(s, ack.seq))
        assert m.headers is not None
        self.assertEqual(m.headers["Nats-TTL"], "1500ms")
        plain = await self.stream(js, "Plain")
        await self.assertFailure(bounded(js.publish(f"{plain}.t", b"x", ttl=60)), APIError)

    async def test_no_stream(self) -> None:
        """A subject no stream takes: retried, then NoStreamResponseError."""
        _, js = await self.connect()
        start = reactor.seconds()
        await self.assertFailure(bounded(js.publish(
            f"{self.name()}.nostream", b"x", retry_attempts=2, retry_wait=0.1
        )), NoStreamResponseError)
        self.assertGreaterEqual(reactor.seconds() - start, 0.2)
        await self.assertFailure(
            bounded(js.publish_async(f"{self.name()}.nostream")), NoStreamResponseError
        )

    async def test_publish_async_10000(self) -> None:
        """10,000 publish_async, waiting for room when the window is full: every ack
        comes, in the order of the stream's sequence."""
        _, js = await self.connect()
        s = await self.stream(js)
        acks: list[Deferred[PubAck]] = []
        full = 0
        for i in range(10_000):
            if js.publish_async_pending >= js.publish_async_max_pending:
                full += 1
                await bounded(js.publish_async_room())
                self.assertLess(js.publish_async_pending, js.publish_async_max_pending)
            acks.append(js.publish_async(f"{s}.n", b"%d" % i))
        self.assertGreater(js.publish_async_pending, 0)
        await bounded(js.publish_async_complete(), 10)
        self.assertEqual(js.publish_async_pending, 0)
        seqs = [self.successResultOf(d).seq for d in acks]
        self.assertEqual(seqs, list(range(1, 10_001)))
        info = await bounded(js.stream_info(s))
        self.assertEqual(info.state.messages, 10_000)
        self.assertEqual((await bounded(js.get_msg(s, 10_000))).data, b"9999")

    async def test_publish_async_window(self) -> None:
        """With the window full, publish_async with stall_wait=0 fails at once and sends
        nothing; room and complete fire as acknowledgements come."""
        nc, _ = await self.connect()
        js = nc.jetstream(publish_async_max_pending=10)
        s = await self.stream(js)
        acks = [js.publish_async(f"{s}.w", b"%d" % i) for i in range(10)]
        self.assertEqual(js.publish_async_pending, 10)
        self.failureResultOf(
            js.publish_async(f"{s}.w", b"late", stall_wait=0), TooManyStalledMsgsError
        )
        room = js.publish_async_room()
        complete = js.publish_async_complete()
        await bounded(room)
        await bounded(complete)
        self.assertEqual(js.publish_async_pending, 0)
        self.assertEqual([self.successResultOf(d).seq for d in acks], list(range(1, 11)))
        info = await bounded(js.stream_info(s))
        self.assertEqual(info.state.messages, 10)  # the refused one was never sent
        self.successResultOf(js.publish_async_room())
        self.successResultOf(js.publish_async_complete())


# ============================================================================ reading
class GetMsgTests(JetStreamCase):
    async def test_get_and_delete(self) -> None:
        """By sequence, last by subject, next by subject; Direct Get likewise;
        MsgNotFoundError; a deleted message is gone."""
        _, js = await self.connect()
        s = await self.stream(js, allow_direct=True)
        await bounded(js.publish(f"{s}.a", b"a1", headers={"X-N": "1"}))
        await bounded(js.publish(f"{s}.b", b"b1"))
        await bounded(js.publish(f"{s}.a", b"a2"))
        for direct in (False, True):
            m = await bounded(js.get_msg(s, 1, direct=direct))
            self.assertEqual((m.subject, m.seq, m.data), (f"{s}.a", 1, b"a1"))
            assert m.headers is not None
            self.assertEqual(m.headers["X-N"], "1")
            self.assertTrue(m.time)
            m = await bounded(js.get_msg(s, last_by_subject=f"{s}.a", direct=direct))
            self.assertEqual((m.seq, m.data), (3, b"a2"))
            m = await bounded(js.get_msg(s, 2, next_by_subject=f"{s}.a", direct=direct))
            self.assertEqual((m.seq, m.data), (3, b"a2"))
            await self.assertFailure(bounded(js.get_msg(s, 99, direct=direct)), MsgNotFoundError)
            await self.assertFailure(
                bounded(js.get_msg(s, last_by_subject=f"{s}.zz", direct=direct)),
                MsgNotFoundError,
            )
        self.assertIs(await bounded(js.delete_msg(s, 2)), True)
        await self.assertFailure(bounded(js.get_msg(s, 2)), MsgNotFoundError)
        await self.assertFailure(bounded(js.get_msg(s, 2, direct=True)), MsgNotFoundError)
        await self.assertFailure(bounded(js.delete_msg(s, 2)), APIError)
        info = await bounded(js.stream_info(s))
        self.assertEqual(info.state.messages, 2)
        await self.assertFailure(bounded(js.get_msg(self.name("None"), 1)), StreamNotFoundError)


# ============================================================================ pull
class PullTests(JetStreamCase):
    js: JetStreamContext
    s: str

    async def setup_pull(self, count: int = 0, **consumer: Any) -> PullConsumer:
        """A stream with ``count`` messages and a pull consumer "P" on it."""
        _, js = await self.connect()
        s = await self.stream(js)
        for i in range(count):
            await bounded(js.publish(f"{s}.m", b"m%d" % i))
        consumer.setdefault("ack_policy", "explicit")
        await bounded(js.add_consumer(s, durable_name="P", **consumer))
        self.js, self.s = js, s
        return js.pull_consumer(s, "P")

    async def test_batch_fill_then_expires(self) -> None:
        """A full batch at once; then what is left, ending at expires."""
        pc = await self.setup_pull(8)
        msgs = await bounded(pc.fetch(5, expires=WAIT))
        self.assertEqual([m.data for m in msgs], [b"m%d" % i for i in range(5)])
        self.assertEqual([m.metadata.sequence.stream for m in msgs], [1, 2, 3, 4, 5])
        self.assertEqual(msgs[0].metadata.num_pending, 7)
        for m in msgs:
            m.ack()
        msgs = await bounded(pc.fetch(5, expires=0.5))
        self.assertEqual([m.data for m in msgs], [b"m5", b"m6", b"m7"])

    async def test_expires_without_messages(self) -> None:
        pc = await self.setup_pull()
        start = reactor.seconds()
        self.assertEqual(await bounded(pc.fetch(3, expires=0.3)), [])
        self.assertGreaterEqual(reactor.seconds() - start, 0.25)

    async def test_no_wait(self) -> None:
        """no_wait ends at once, with what there is or with nothing."""
        pc = await self.setup_pull(2)
        got = await bounded(pc.fetch(5, no_wait=True, expires=30), 2)
        self.assertEqual(len(got), 2)
        self.assertEqual(await bounded(pc.fetch(5, no_wait=True, expires=30), 2), [])

    async def test_ack_removes(self) -> None:
        pc = await self.setup_pull(2)
        [m1, m2] = await bounded(pc.fetch(2))
        m1.ack()
        self.assertIsNone(await bounded(m2.ack_sync()))
        self.assertRaises(JetStreamError, m2.ack)
        self.failureResultOf(m2.ack_sync(), JetStreamError)
        info = await bounded(pc.info())
        self.assertEqual((info.num_ack_pending, info.num_pending), (0, 0))
        self.assertEqual(await bounded(pc.fetch(1, no_wait=True)), [])

    async def test_nak_redelivers(self) -> None:
        pc = await self.setup_pull(1)
        [m] = await bounded(pc.fetch(1))
        self.assertEqual(m.metadata.num_delivered, 1)
        m.nak()
        [again] = await bounded(pc.fetch(1))
        self.assertEqual((again.data, again.metadata.num_delivered), (b"m0", 2))
        self.assertEqual(again.metadata.sequence.stream, 1)
        # 1 s, not less: a server or client stalled past the delay on a loaded machine
        # would make "not yet" false (0.3 s was too close).
        again.nak(delay=1.0)
        self.assertEqual(await bounded(pc.fetch(1, no_wait=True)), [])  # not yet
        [third] = await bounded(pc.fetch(1, expires=5))
        self.assertEqual(third.metadata.num_delivered, 3)
        third.ack()

    async def test_term_stops_redelivery(self) -> None:
        """Without an ack the message comes back after ack_wait; after term, never.

        The ack wait is 1 s: the term, and the ack of the redelivered message, must reach
        the server within it (with 0.3 s a stalled process on a loaded machine could
        see either come back)."""
        pc = await self.setup_pull(2, ack_wait=1.0)
        [m1, _m2] = await bounded(pc.fetch(2))
        m1.term("poison")
        # m2 is left unacknowledged: it comes back, m1 does not.
        [again] = await bounded(pc.fetch(1, expires=5.0))
        self.assertEqual((again.data, again.metadata.num_delivered), (b"m1", 2))
        await bounded(again.ack_sync())
        # Longer than the ack wait: neither comes back.
        self.assertEqual(await bounded(pc.fetch(2, expires=1.5)), [])

    async def test_in_progress(self) -> None:
        """in_progress, repeated, keeps a message from redelivery beyond ack_wait.

        Every 0.2 s against a 1 s ack wait: a stall of 0.8 s between two calls on a
        loaded machine would be needed to let it go (0.5 s let 0.3 s suffice)."""
        pc = await self.setup_pull(1, ack_wait=1.0)
        [m] = await bounded(pc.fetch(1))
        for _ in range(10):  # 2 s in all: twice the ack wait
            m.in_progress()
            await sleep(0.2)
        self.assertEqual(await bounded(pc.fetch(1, no_wait=True)), [])
        await bounded(m.ack_sync())
        info = await bounded(pc.info())
        self.assertEqual((info.num_ack_pending, info.num_redelivered), (0, 0))

    async def test_refusals(self) -> None:
        """A missing consumer, and a message larger than max_bytes, fail the fetch."""
        pc = await self.setup_pull(1)
        e = await self.assertFailure(
            bounded(self.js.pull_consumer(self.s, "NOPE").fetch(1)), APIError
        )
        self.assertEqual(e.code, 503)
        e = await self.assertFailure(bounded(pc.fetch(1, max_bytes=1)), APIError)
        self.assertEqual(e.code, 409)
        self.assertEqual(len(await bounded(pc.fetch(1, max_bytes=1024))), 1)
        await bounded(self.js.add_consumer(self.s, durable_name="Small", max_batch=2))
        e = await self.assertFailure(
            bounded(self.js.pull_consumer(self.s, "Small").fetch(5)), APIError
        )
        self.assertEqual(e.code, 409)
        self.assertIn("MaxRequestBatch", e.description)


# ============================================================================ ordered
class OrderedTests(JetStreamCase):
    async def consume(
        self, js: JetStreamContext, s: str, want: int, **kw: Any
    ) -> tuple[OrderedConsumer, list[JsMsg], dict[int, Deferred[None]]]:
        """Start an ordered consumer; ``waits[n]`` fires once n messages came."""
        got: list[JsMsg] = []
        waits: dict[int, Deferred[None]] = {}

        def on_msg(m: JsMsg) -> None:
            got.append(m)
            d = waits.get(len(got))
            if d is not None and not d.called:
                d.callback(None)

        oc = OrderedConsumer(js, s, on_msg, **kw)
        self.addCleanup(oc.stop)
        for n in range(1, want + 1):
            waits[n] = Deferred()
        await bounded(oc.start())
        return oc, got, waits

    def assert_in_order(self, got: list[JsMsg], n: int) -> None:
        self.assertEqual([m.metadata.sequence.stream for m in got], list(range(1, n + 1)))
        self.assertEqual([m.data for m in got], [b"%d" % i for i in range(n)])

    async def test_in_order(self) -> None:
        _, js = await self.connect()
        s = await self.stream(js)
        for i in range(200):
            js.publish_async(f"{s}.x.{i % 7}", b"%d" % i)
        await bounded(js.publish_async_complete())
        oc, got, waits = await self.consume(js, s, 200)
        await bounded(waits[200])
        self.assert_in_order(got, 200)
        self.assertEqual([m.metadata.sequence.consumer for m in got], list(range(1, 201)))
        self.assertEqual(oc.delivered, 200)

    async def test_reset_after_consumer_deleted(self) -> None:
        """Delete the consumer under it: it notices (missed heartbeats), makes a new one
        from the next stream sequence and goes on: no duplicate, no gap."""
        _, js = await self.connect()
        s = await self.stream(js)
        for i in range(50):
            js.publish_async(f"{s}.x", b"%d" % i)
        await bounded(js.publish_async_complete())
        oc, got, waits = await self.consume(js, s, 100, heartbeat=0.3)
        await bounded(waits[50])
        first = oc._name
        self.assertTrue(await bounded(js.delete_consumer(s, first)))
        for i in range(50, 100):
            js.publish_async(f"{s}.x", b"%d" % i)
        await bounded(js.publish_async_complete())
        # Missed heartbeats, then a new consumer: timers of the server's and ours, which
        # a loaded machine stretches (1.9 s with load 7 on 2 cores): 20 s, not 5.
        await bounded(waits[100], 20)
        self.assertNotEqual(oc._name, first)
        self.assert_in_order(got, 100)
        info = await bounded(js.consumer_info(s, oc._name))
        self.assertEqual(info.config.opt_start_seq, 51)

    async def test_flow_control_large_messages(self) -> None:
        """Megabytes through one ordered consumer: flow control is answered, all come."""
        nc, js = await self.connect()
        s = await self.stream(js)
        answered: list[str] = []
        publish = nc.publish

        def spy(subject: str, *args: Any, **kw: Any) -> None:
            if subject.startswith("$JS.FC."):
                answered.append(subject)
            publish(subject, *args, **kw)

        nc.publish = spy  # type: ignore[method-assign]
        big = b"x" * 60_000
        for i in range(100):
            js.publish_async(f"{s}.big", b"%d" % i + big)
        await bounded(js.publish_async_complete())
        _, got, waits = await self.consume(js, s, 100)
        await bounded(waits[100], 10)
        self.assertEqual([m.data[: len(b"%d" % i)] for i, m in enumerate(got)],
                         [b"%d" % i for i in range(100)])
        self.assertEqual([m.metadata.sequence.stream for m in got], list(range(1, 101)))
        self.assertTrue(answered, "no flow-control request came: send more")

    async def test_stream_deleted_ends_it(self) -> None:
        _, js = await self.connect()
        s = await self.stream(js)
        errors: list[Exception] = []
        failed: Deferred[None] = Deferred()

        def on_error(e: Exception) -> None:
            errors.append(e)
            failed.callback(None)

        await bounded(js.publish(f"{s}.x", b"0"))
        _, _, waits = await self.consume(js, s, 1, heartbeat=0.2, on_error=on_error)
        await bounded(waits[1])
        await bounded(js.delete_stream(s))
        await bounded(failed, 20)  # noticed through heartbeats: timers, as above
        [e] = errors
        self.assertIsInstance(e, JetStreamError)


# ============================================================================ no JetStream
class NotEnabledTests(ServerPerClass, TestCase):
    server_options: ClassVar[dict[str, Any]] = {}

    async def test_not_enabled(self) -> None:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream()
        await self.assertFailure(bounded(js.account_info()), JetStreamNotEnabledError)
        await self.assertFailure(
            bounded(js.add_stream(name="S", subjects=["s"])), JetStreamNotEnabledError
        )
        await self.assertFailure(bounded(js.publish("s", b"", retry_attempts=0)),
                                 NoStreamResponseError)


class NotEnabledForAccountTests(ServerPerClass, TestCase):
    """A server with JetStream, an account without it."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True, "config": """
        accounts {
          JS { jetstream: enabled, users [{user: js, password: js}] }
          PLAIN { users [{user: plain, password: plain}] }
        }
    """}

    async def test_not_enabled_for_account(self) -> None:
        assert self.server is not None
        nc = await bounded(txnats.connect(
            reactor, self.server.url, user="plain", password="plain"
        ))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream()
        await self.assertFailure(bounded(js.account_info()), JetStreamNotEnabledError)
        await self.assertFailure(
            bounded(js.add_stream(name="S", subjects=["s"])), JetStreamNotEnabledError
        )
        other = await bounded(txnats.connect(reactor, self.server.url, user="js", password="js"))
        self.addCleanup(lambda: bounded(other.close()))
        self.assertIsInstance(await bounded(other.jetstream().account_info()), AccountInfo)
