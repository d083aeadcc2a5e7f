"""Absurd numbers: huge timeouts, durations and counts are refused up front.

A number may be legal in kind (finite, positive, whole) and still absurd: ``1e308``
seconds overflows the nanoseconds JetStream reads (an int64: about 292 years) and used
to raise an untyped ``OverflowError`` after ``consume()`` had subscribed its inbox;
``2**64`` as a count is past what the server reads. Every such value must fail with an
:class:`~txnats.errors.InvalidArgumentError` that names the argument and the bound
("at most ..."), before anything is subscribed, armed or sent.

The table is played over a fake transport (every byte and timer seen) and against a
real ``nats-server -js`` (subscriptions, timers and messages out counted before and
after each call, then good calls show that nothing was spoilt).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any, ClassVar

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
import txnats.micro
from txnats.errors import InvalidArgumentError, StreamNotFoundError
from txnats.jetstream import (
    ConsumerConfig,
    JsMsg,
    KeyValue,
    KeyValueConfig,
    KeyWatcher,
    ObjectStore,
    ObjectStoreConfig,
    StreamConfig,
    StreamInfo,
)
from txnats.options import Options
from txnats.protocol.events import Msg

from .support.jetstream import JsHarness, ack_subject
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor
from .test_jetstream_args import ROWS, Row, Targets, refusal

#: The bounds (txnats._args.MAX_SECONDS, MAX_COUNT): whole seconds that fit an int64
#: of nanoseconds, and an int64.
MAX_SECONDS = float((2**63 - 1) // 10**9)
MAX_COUNT = 2**63 - 1

#: Absurd by kind: past the int64 of nanoseconds, past a float, past an int64.
ABSURD: dict[str, tuple[object, ...]] = {
    "seconds": (1e308, 1e10, MAX_SECONDS + 1, 2**64, 10**400),
    "count": (MAX_COUNT + 1, 2**64, 10**400),
}


def _handler(msg: object) -> None:
    """A handler that drops what it gets."""


def _sub_then(t: Targets, call: Callable[[Any], object]) -> object:
    """Run ``call`` on a plain subscription made before the snapshot (see ``sub``)."""
    return call(t.sub)  # type: ignore[attr-defined]


#: Calls the shared table of ``test_jetstream_args`` does not hold: continuous pulls,
#: ordered readers, watchers, push subscriptions, typed configurations, the service
#: API and the core client.
MORE_ROWS: list[Row] = [
    Row("pull.consume(expires=)", "expires", "seconds",
        lambda t, v: t.pull.consume(_handler, expires=v)),
    Row("pull.messages(expires=)", "expires", "seconds", lambda t, v: t.pull.messages(expires=v)),
    Row("pull.consume(max_messages=)", "max_messages", "count",
        lambda t, v: t.pull.consume(_handler, max_messages=v)),
    Row("pull.messages(max_bytes=)", "max_bytes", "count",
        lambda t, v: t.pull.messages(max_bytes=v)),
    Row("pull.next(timeout=)", "timeout", "seconds", lambda t, v: t.pull.next(timeout=v)),
    Row("js.ordered_consumer(heartbeat=)", "heartbeat", "seconds",
        lambda t, v: t.js.ordered_consumer(t.stream, heartbeat=v)),
    Row("js.ordered_consumer(high_water=)", "high_water", "count",
        lambda t, v: t.js.ordered_consumer(t.stream, high_water=v)),
    Row("js.ordered_consumer(max_resets=)", "max_resets", "count",
        lambda t, v: t.js.ordered_consumer(t.stream, _handler, max_resets=v)),
    Row("kv.watch(max_pending=)", "max_pending", "count",
        lambda t, v: t.kv.watch("k", max_pending=v)),
    Row("kv.watch(resume_from_revision=)", "resume_from_revision", "count",
        lambda t, v: t.kv.watch("k", resume_from_revision=v)),
    Row("kv.put(ttl=)", "ttl", "seconds", lambda t, v: t.kv.put("k", b"v", ttl=v)),
    Row("kv.create(ttl=)", "ttl", "seconds", lambda t, v: t.kv.create("k2", b"v", ttl=v)),
    Row("obs.watch(max_pending=)", "max_pending", "count",
        lambda t, v: t.obs.watch(max_pending=v)),
    Row("js.subscribe(idle_heartbeat=)", "idle_heartbeat", "seconds",
        lambda t, v: t.js.subscribe(t.subject, _handler, stream=t.stream, idle_heartbeat=v)),
    Row("js.subscribe(ack_wait=)", "ack_wait", "seconds",
        lambda t, v: t.js.subscribe(t.subject, _handler, stream=t.stream, ack_wait=v)),
    Row("js.subscribe(max_ack_pending=)", "max_ack_pending", "count",
        lambda t, v: t.js.subscribe(t.subject, _handler, stream=t.stream, max_ack_pending=v)),
    Row("js.subscribe(pending_msgs_limit=)", "pending_msgs_limit", "count",
        lambda t, v: t.js.subscribe(t.subject, stream=t.stream, pending_msgs_limit=v)),
    Row("KeyValueConfig(ttl=)", "KeyValueConfig.ttl", "seconds",
        lambda t, v: KeyValueConfig("b", ttl=v)),
    Row("KeyValueConfig(limit_marker_ttl=)", "KeyValueConfig.limit_marker_ttl", "seconds",
        lambda t, v: KeyValueConfig("b", limit_marker_ttl=v)),
    Row("KeyValueConfig(max_bytes=)", "KeyValueConfig.max_bytes", "count",
        lambda t, v: KeyValueConfig("b", max_bytes=v)),
    Row("ObjectStoreConfig(ttl=)", "ObjectStoreConfig.ttl", "seconds",
        lambda t, v: ObjectStoreConfig("b", ttl=v)),
    Row("js.create_key_value(limit_marker_ttl=)", "limit_marker_ttl", "seconds",
        lambda t, v: t.js.create_key_value("b", limit_marker_ttl=v, storage="memory")),
    Row("js.subscribe(config={inactive_threshold})", "ConsumerConfig.inactive_threshold",
        "seconds",
        lambda t, v: t.js.subscribe(t.subject, _handler, stream=t.stream,
                                    config={"inactive_threshold": v})),
    # Typed configurations: the record refuses the field, naming it, before any request.
    Row("js.add_stream(max_age=)", "StreamConfig.max_age", "seconds",
        lambda t, v: t.js.add_stream(name="X", subjects=["x"], max_age=v)),
    Row("js.add_stream(duplicate_window=)", "StreamConfig.duplicate_window", "seconds",
        lambda t, v: t.js.add_stream(name="X", subjects=["x"], duplicate_window=v)),
    Row("js.add_stream(subject_delete_marker_ttl=)", "StreamConfig.subject_delete_marker_ttl",
        "seconds", lambda t, v: t.js.add_stream(name="X", subject_delete_marker_ttl=v)),
    Row("js.add_stream(max_bytes=)", "StreamConfig.max_bytes", "count",
        lambda t, v: t.js.add_stream(name="X", subjects=["x"], max_bytes=v)),
    Row("js.add_stream(max_msgs=)", "StreamConfig.max_msgs", "count",
        lambda t, v: t.js.add_stream(name="X", subjects=["x"], max_msgs=v)),
    Row("js.add_stream(max_msgs_per_subject=)", "StreamConfig.max_msgs_per_subject", "count",
        lambda t, v: t.js.add_stream(name="X", max_msgs_per_subject=v)),
    Row("js.update_stream(max_msg_size=)", "StreamConfig.max_msg_size", "count",
        lambda t, v: t.js.update_stream(name="X", max_msg_size=v)),
    Row("js.add_consumer(ack_wait=)", "ConsumerConfig.ack_wait", "seconds",
        lambda t, v: t.js.add_consumer(t.stream, durable_name="D", ack_wait=v)),
    Row("js.add_consumer(backoff=)", "ConsumerConfig.backoff", "seconds",
        lambda t, v: t.js.add_consumer(t.stream, durable_name="D", backoff=[1.0, v])),
    Row("js.add_consumer(inactive_threshold=)", "ConsumerConfig.inactive_threshold",
        "seconds", lambda t, v: t.js.add_consumer(t.stream, inactive_threshold=v)),
    Row("js.add_consumer(idle_heartbeat=)", "ConsumerConfig.idle_heartbeat", "seconds",
        lambda t, v: t.js.add_consumer(t.stream, idle_heartbeat=v, deliver_subject="d")),
    Row("js.add_consumer(max_expires=)", "ConsumerConfig.max_expires", "seconds",
        lambda t, v: t.js.add_consumer(t.stream, durable_name="D", max_expires=v)),
    Row("js.add_consumer(max_bytes=)", "ConsumerConfig.max_bytes", "count",
        lambda t, v: t.js.add_consumer(t.stream, durable_name="D", max_bytes=v)),
    Row("js.add_consumer(max_ack_pending=)", "ConsumerConfig.max_ack_pending", "count",
        lambda t, v: t.js.add_consumer(t.stream, durable_name="D", max_ack_pending=v)),
    Row("js.add_consumer(max_deliver=)", "ConsumerConfig.max_deliver", "count",
        lambda t, v: t.js.add_consumer(t.stream, durable_name="D", max_deliver=v)),
    Row("js.add_consumer(opt_start_seq=)", "ConsumerConfig.opt_start_seq", "count",
        lambda t, v: t.js.add_consumer(t.stream, deliver_policy="by_start_sequence",
                                       opt_start_seq=v)),
    Row("ConsumerConfig(max_waiting=)", "ConsumerConfig.max_waiting", "count",
        lambda t, v: ConsumerConfig(max_waiting=v)),
    Row("StreamConfig(first_seq=)", "StreamConfig.first_seq", "count",
        lambda t, v: StreamConfig("X", first_seq=v)),
    # The service API.
    Row("micro.ping(timeout=)", "timeout", "seconds",
        lambda t, v: ensureDeferred(txnats.micro.ping(t.js.client, timeout=v))),
    Row("micro.stats(stall=)", "stall", "seconds",
        lambda t, v: ensureDeferred(txnats.micro.stats(t.js.client, stall=v))),
    # The core client.
    Row("nc.flush(timeout=)", "timeout", "seconds", lambda t, v: t.js.client.flush(timeout=v)),
    Row("nc.subscribe(pending_msgs_limit=)", "pending_msgs_limit", "count",
        lambda t, v: t.js.client.subscribe("s", _handler, pending_msgs_limit=v)),
    Row("nc.subscribe(pending_bytes_limit=)", "pending_bytes_limit", "count",
        lambda t, v: t.js.client.subscribe("s", _handler, pending_bytes_limit=v)),
    Row("nc.subscribe(max_msgs=)", "max_msgs", "count",
        lambda t, v: t.js.client.subscribe("s", _handler, max_msgs=v)),
    Row("nc.subscribe(concurrency=)", "concurrency", "count",
        lambda t, v: t.js.client.subscribe("s", _handler, concurrency=v)),
    Row("sub.auto_unsubscribe(max_msgs)", "max_msgs", "count",
        lambda t, v: _sub_then(t, lambda s: s.auto_unsubscribe(v))),
    Row("sub.drain(timeout=)", "timeout", "seconds",
        lambda t, v: _sub_then(t, lambda s: s.drain(timeout=v))),
]

#: Calls whose float fast path (``0 < timeout < inf``, in txnats/client.py and
#: txnats/subscription.py, owned elsewhere) skips the upper bound: refused only once
#: that test reads ``<= MAX_SECONDS``. An int, a huge int or a Fraction is refused now.
FAST_PATH_ROWS: list[Row] = [
    Row("nc.request(timeout=)", "timeout", "seconds",
        lambda t, v: t.js.client.request("svc", b"", timeout=v)),
    Row("sub.next_msg(timeout=)", "timeout", "seconds",
        lambda t, v: _sub_then(t, lambda s: ensureDeferred(s.next_msg(timeout=v)))),
]

#: Connection options (checked by ``Options.check`` before any dial).
OPTION_ROWS: list[tuple[str, str]] = [
    ("connect_timeout", "seconds"), ("ping_interval", "seconds"),
    ("drain_timeout", "seconds"), ("reconnect_wait", "seconds"),
    ("reconnect_jitter", "seconds"), ("max_pings_out", "count"),
    ("pending_msgs_limit", "count"), ("pending_bytes_limit", "count"),
    ("max_outbound_bytes", "count"), ("max_reconnect_attempts", "count"),
    ("reconnect_buffer_size", "count"), ("max_control_line", "count"),
]


class AbsurdTable:
    """Plays :data:`ROWS` and :data:`MORE_ROWS` with :data:`ABSURD` values."""

    def snapshot(self) -> dict[str, int]:
        raise NotImplementedError

    def written_since_clear(self) -> str:
        return ""

    def clear_wire(self) -> None:
        """Forget what was written so far."""

    def play_absurd(self, t: Targets, rows: tuple[Row, ...] = (*ROWS, *MORE_ROWS)) -> None:
        problems: list[str] = []
        cases = 0
        for row in rows:
            for value in ABSURD[row.kind]:
                cases += 1
                self.clear_wire()
                before = self.snapshot()
                got = refusal(lambda: row.call(t, value))  # noqa: B023 (called at once)
                after = self.snapshot()
                shown = f"{row.label} {str(value)[:24]}"
                if isinstance(got, str):
                    problems.append(f"{shown}: not refused: {got}")
                    continue
                text = str(got)
                if not text.startswith(row.argument + " "):
                    problems.append(f"{shown}: the error does not name {row.argument}: {text}")
                elif "at most" not in text:
                    problems.append(f"{shown}: the error does not give the bound: {text}")
                if before != after:
                    problems.append(f"{shown}: something changed: {before} -> {after}")
                wrote = self.written_since_clear()
                if wrote:
                    problems.append(f"{shown}: {wrote}")
        if problems:
            self.fail(  # type: ignore[attr-defined]
                f"{len(problems)} of {cases} cases went wrong:\n" + "\n".join(problems)
            )


class BoundsTests(SynchronousTestCase):
    """The checks themselves, and the connection options."""

    def test_bounds_fit_the_wire(self) -> None:
        """The largest accepted duration still fits an int64 of nanoseconds once
        converted (as the configurations and the pull requests convert it)."""
        from txnats import _args
        from txnats.jetstream._config_core import to_ns as config_to_ns

        self.assertEqual((_args.MAX_SECONDS, _args.MAX_COUNT), (MAX_SECONDS, MAX_COUNT))
        self.assertLessEqual(int(MAX_SECONDS * 1e9), 2**63 - 1)
        self.assertLessEqual(config_to_ns(MAX_SECONDS), 2**63 - 1)
        self.assertEqual(StreamConfig("X", max_age=MAX_SECONDS).to_json()["max_age"],
                         int(MAX_SECONDS) * 10**9)

    def test_options_refuse_absurd_numbers(self) -> None:
        """Every numeric connection option refuses an absurd value, naming the option
        and the bound."""
        problems = []
        for name, kind in OPTION_ROWS:
            for value in ABSURD[kind]:
                try:
                    Options(**{name: value}).check()
                except InvalidArgumentError as e:
                    if not str(e).startswith(name + " ") or "at most" not in str(e):
                        problems.append(f"{name}={str(value)[:20]}: {e}")
                else:
                    problems.append(f"{name}={str(value)[:20]}: accepted")
        self.assertEqual(problems, [])

    def test_connect_refuses_before_dialling(self) -> None:
        """connect() with an absurd connect_timeout fails at once, no dial made."""
        from twisted.internet.testing import MemoryReactorClock

        clock = MemoryReactorClock()
        d = txnats.connect(clock, "nats://127.0.0.1:4222", connect_timeout=1e308)
        f = self.failureResultOf(d, InvalidArgumentError)
        self.assertIn("connect_timeout must be at most", str(f.value))
        self.assertEqual((clock.tcpClients, clock.getDelayedCalls()), ([], []))


class FakeWireTests(JsHarness, AbsurdTable, SynchronousTestCase):
    """The tables over a fake transport: no frame written, no timer armed."""

    def setUp(self) -> None:
        super().setUp()
        self.names = (f"b{i}" for i in itertools.count())
        self.kv = KeyValue(self.js, "kvb", StreamInfo(StreamConfig("KV_kvb", allow_direct=True)))
        self.watcher = KeyWatcher(self.kv, ["$KV.kvb.k"])
        self.targets = Targets(
            js=self.js, stream="S", subject="S.a", pull=self.js.pull_consumer("S", "C"),
            msg=lambda: JsMsg(Msg("S.a", ack_subject("S", "C", 1, 1), b"x", None, 1),
                              self.client),
            kv=self.kv, watcher=self.watcher, obs=ObjectStore(self.js, "obb"),
            bucket=lambda: next(self.names),
        )
        self.targets.sub = self.client.subscribe("plain")  # type: ignore[attr-defined]
        self.written()

    def snapshot(self) -> dict[str, int]:
        return {
            "timers": len(self.clock.getDelayedCalls()),
            "subscriptions": len(self.client.subscriptions),
            "out_msgs": self.client.stats.out_msgs,
            "publish_async_pending": self.js.publish_async_pending,
        }

    def clear_wire(self) -> None:
        self.written()

    def written_since_clear(self) -> str:
        frames = self.written()
        return f"frames were written: {frames}" if frames else ""

    def test_absurd_table(self) -> None:
        """Each row refuses absurd seconds (1e308, 1e10, 2**64, 10**400) or counts
        (2**63, 2**64, 10**400) with an InvalidArgumentError naming the argument and
        its bound; no frame, no subscription, no timer, no pending publish."""
        self.play_absurd(self.targets)

    def test_core_float_fast_path(self) -> None:
        """nc.request() and sub.next_msg() refuse absurd float timeouts too."""
        self.play_absurd(self.targets, tuple(FAST_PATH_ROWS))

    def test_fetch_expires_1e308(self) -> None:
        """The probe's case: fetch(expires=1e308) fails typed, and consume() and
        messages() with it, called 50 times, leave no subscription behind."""
        pull = self.targets.pull
        f = self.failureResultOf(pull.fetch(1, expires=1e308), InvalidArgumentError)
        self.assertIn("expires must be at most 9223372036 seconds", str(f.value))
        subs = len(self.client.subscriptions)
        for _ in range(50):
            with self.assertRaises(InvalidArgumentError):
                pull.consume(_handler, expires=1e308)
            with self.assertRaises(InvalidArgumentError):
                pull.messages(expires=1e308)
        self.assertEqual(len(self.client.subscriptions), subs)
        self.assertEqual(self.written(), [])


class RealServerTests(ServerPerClass, AbsurdTable, TestCase):
    """The tables against ``nats-server -js``; then the client still works."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 60

    def snapshot(self) -> dict[str, int]:
        return {
            "timers": len(reactor.getDelayedCalls()),
            "subscriptions": len(self.nc.subscriptions),
            "out_msgs": self.nc.stats.out_msgs,
            "publish_async_pending": self.js.publish_async_pending,
        }

    async def drop(self, stream: str) -> None:
        try:
            await bounded(self.js.delete_stream(stream))
        except StreamNotFoundError:
            pass

    async def test_absurd_table_then_good_calls(self) -> None:
        """On a real connection every row refuses its absurd values (argument and
        bound named) with nothing subscribed, armed or sent; the connection stays up
        and a publish, a fetch and a consume() with sane numbers work after it."""
        assert self.server is not None
        self.nc = nc = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(lambda: bounded(nc.close()))
        self.js = js = nc.jetstream()
        stream = "ABSURD"
        await bounded(js.add_stream(name=stream, subjects=["absurd.>"], storage="memory"))
        self.addCleanup(self.drop, stream)
        await bounded(js.add_consumer(stream, durable_name="C", ack_policy="explicit"))
        kv = await bounded(js.create_key_value("absurdkv", storage="memory"))
        self.addCleanup(self.drop, "KV_absurdkv")
        watcher = await bounded(kv.watch("k"))
        self.addCleanup(watcher.stop)
        obs = await bounded(js.create_object_store("absurdobj", storage="memory"))
        self.addCleanup(self.drop, "OBJ_absurdobj")
        counter = itertools.count()
        targets = Targets(
            js=js, stream=stream, subject="absurd.a", pull=js.pull_consumer(stream, "C"),
            msg=lambda: JsMsg(Msg("absurd.a", ack_subject(stream, "NONE", 1, 1), b"x", None, 1),
                              nc),
            kv=kv, watcher=watcher, obs=obs, bucket=lambda: f"absurdnew{next(counter)}",
        )
        sub = nc.subscribe("absurd.plain")
        targets.sub = sub  # type: ignore[attr-defined]
        await bounded(nc.flush())
        self.play_absurd(targets)
        self.assertTrue(nc.is_connected)
        self.assertEqual(await bounded(js.stream_names()), sorted(await bounded(js.stream_names())))
        ack = await bounded(js.publish("absurd.a", b"sane"))
        got: Deferred[JsMsg] = Deferred()
        ctx = targets.pull.consume(lambda m: got.called or got.callback(m), expires=5.0)
        self.addCleanup(ctx.stop)
        msg = await bounded(got)
        self.assertEqual(msg.metadata.sequence.stream, ack.seq)
        msg.ack()
        self.assertTrue(nc.is_connected)
