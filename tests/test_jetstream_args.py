"""Every number a JetStream, key-value or object-store call takes is checked up front.

One table (:data:`ROWS`) lists each public call and each of its timeout, delay, limit,
count or sequence arguments. For every row, NaN, -1, 0 and infinity (and, by kind, a
fraction, a bool or a string) must fail with :class:`InvalidArgumentError` whose
message starts with the argument's name, and nothing may have happened: no frame
written, no message counted out, no subscription made, no timer armed, no publish
counted pending. Where 0 is legal for the argument it must be accepted instead.

The table is played twice: over a fake transport and a ``MemoryReactorClock`` (every
byte the client writes is seen, no wall clock), and against a real ``nats-server -js``
(then the good calls that follow show the client, the context and the stores still
work).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from twisted.internet.defer import Deferred
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from txnats.errors import InvalidArgumentError, StreamNotFoundError, TimeoutError
from txnats.jetstream import (
    Entry,
    JetStreamContext,
    JsMsg,
    KeyValue,
    KeyWatcher,
    ObjectStore,
    OrderedConsumer,
    PubAck,
    PullConsumer,
    StreamConfig,
    StreamInfo,
)
from txnats.protocol.events import Msg

from .support.jetstream import JsHarness, ack_subject
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor
from .support.wire import msg_frame

NAN = float("nan")
INF = float("inf")
#: What every row is fed; 0 is accepted by the rows that say so.
BAD = (NAN, -1, 0, INF)
#: Also refused, by the kind of number: a count is an ``int``, seconds are a number.
EXTRA = {"count": (1.5, True), "seconds": ("1", True)}


@dataclass
class Targets:
    """What the rows call: a context, a stream and its subject, a pull consumer, a
    message factory, a key-value bucket with a watcher, an object store, and fresh
    bucket names for the calls that create one."""

    js: JetStreamContext
    stream: str
    subject: str
    pull: PullConsumer
    msg: Callable[[], JsMsg]
    kv: KeyValue
    watcher: KeyWatcher
    obs: ObjectStore
    bucket: Callable[[], str]


@dataclass(frozen=True)
class Row:
    """One argument of one call: ``call(targets, value)`` passes ``value`` as it."""

    label: str
    argument: str
    kind: str  # "count" or "seconds"
    call: Callable[[Targets, Any], object]
    zero_ok: bool = False


def _set(obj: object, attr: str, value: object) -> None:
    setattr(obj, attr, value)


def _ignore(msg: JsMsg) -> None:
    """An ordered consumer's handler that drops what it gets."""


ROWS: list[Row] = [
    # ---------------------------------------------------------------- context options
    Row("JetStreamContext(timeout=)", "timeout", "seconds",
        lambda t, v: JetStreamContext(t.js.client, timeout=v)),
    Row("nc.jetstream(timeout=)", "timeout", "seconds",
        lambda t, v: t.js.client.jetstream(timeout=v)),
    Row("JetStreamContext(publish_async_max_pending=)", "publish_async_max_pending", "count",
        lambda t, v: JetStreamContext(t.js.client, publish_async_max_pending=v)),
    # (On a context of their own: one the table would spoil, were they accepted.)
    Row("js.timeout = ", "timeout", "seconds",
        lambda t, v: _set(JetStreamContext(t.js.client), "timeout", v)),
    Row("js.publish_async_max_pending = ", "publish_async_max_pending", "count",
        lambda t, v: _set(JetStreamContext(t.js.client), "publish_async_max_pending", v)),
    # ---------------------------------------------------------------- API, streams
    Row("js.api_request(timeout=)", "timeout", "seconds",
        lambda t, v: t.js.api_request("INFO", timeout=v)),
    Row("js.purge_stream(seq=)", "seq", "count",
        lambda t, v: t.js.purge_stream(t.stream, seq=v)),
    Row("js.purge_stream(keep=)", "keep", "count",
        lambda t, v: t.js.purge_stream(t.stream, subject=t.subject + ".none", keep=v),
        zero_ok=True),
    Row("js.get_msg(seq)", "seq", "count", lambda t, v: t.js.get_msg(t.stream, v)),
    Row("js.get_msg(seq, direct=True)", "seq", "count",
        lambda t, v: t.js.get_msg(t.stream, v, direct=True)),
    Row("js.get_msg(seq, next_by_subject=)", "seq", "count",
        lambda t, v: t.js.get_msg(t.stream, v, next_by_subject=t.subject), zero_ok=True),
    Row("js.delete_msg(seq)", "seq", "count", lambda t, v: t.js.delete_msg(t.stream, v)),
    # ---------------------------------------------------------------- publish
    Row("js.publish(timeout=)", "timeout", "seconds",
        lambda t, v: t.js.publish(t.subject, b"x", timeout=v)),
    Row("js.publish(ttl=)", "ttl", "seconds", lambda t, v: t.js.publish(t.subject, ttl=v)),
    Row("js.publish(retry_attempts=)", "retry_attempts", "count",
        lambda t, v: t.js.publish(t.subject, b"x", retry_attempts=v), zero_ok=True),
    Row("js.publish(retry_wait=)", "retry_wait", "seconds",
        lambda t, v: t.js.publish(t.subject, b"x", retry_wait=v), zero_ok=True),
    Row("js.publish(expected_last_seq=)", "expected_last_seq", "count",
        lambda t, v: t.js.publish(t.subject, expected_last_seq=v), zero_ok=True),
    Row("js.publish(expected_last_subject_seq=)", "expected_last_subject_seq", "count",
        lambda t, v: t.js.publish(t.subject, expected_last_subject_seq=v), zero_ok=True),
    Row("js.publish_async(ttl=)", "ttl", "seconds",
        lambda t, v: t.js.publish_async(t.subject, ttl=v)),
    Row("js.publish_async(expected_last_seq=)", "expected_last_seq", "count",
        lambda t, v: t.js.publish_async(t.subject, expected_last_seq=v), zero_ok=True),
    Row("js.publish_async(expected_last_subject_seq=)", "expected_last_subject_seq",
        "count", lambda t, v: t.js.publish_async(t.subject, expected_last_subject_seq=v),
        zero_ok=True),
    # ---------------------------------------------------------------- consumers
    Row("pull.fetch(batch)", "batch", "count", lambda t, v: t.pull.fetch(v)),
    Row("pull.fetch(expires=)", "expires", "seconds", lambda t, v: t.pull.fetch(1, expires=v)),
    Row("pull.fetch(expires=, no_wait=True)", "expires", "seconds",
        lambda t, v: t.pull.fetch(1, expires=v, no_wait=True)),
    Row("pull.fetch(max_bytes=)", "max_bytes", "count",
        lambda t, v: t.pull.fetch(1, max_bytes=v, no_wait=True, expires=1.0), zero_ok=True),
    Row("OrderedConsumer(heartbeat=)", "heartbeat", "seconds",
        lambda t, v: OrderedConsumer(t.js, t.stream, _ignore, heartbeat=v)),
    Row("OrderedConsumer(opt_start_seq=)", "opt_start_seq", "count",
        lambda t, v: OrderedConsumer(
            t.js, t.stream, _ignore, deliver_policy="by_start_sequence", opt_start_seq=v
        )),
    Row("JsMsg.nak(delay)", "delay", "seconds", lambda t, v: t.msg().nak(v), zero_ok=True),
    Row("JsMsg.ack_sync(timeout)", "timeout", "seconds", lambda t, v: t.msg().ack_sync(v)),
    # ---------------------------------------------------------------- key-value
    Row("js.create_key_value(history=)", "history", "count",
        lambda t, v: t.js.create_key_value(t.bucket(), history=v, storage="memory")),
    Row("js.create_key_value(ttl=)", "ttl", "seconds",
        lambda t, v: t.js.create_key_value(t.bucket(), ttl=v, storage="memory"), zero_ok=True),
    Row("js.create_key_value(max_bytes=)", "max_bytes", "count",
        lambda t, v: t.js.create_key_value(t.bucket(), max_bytes=v, storage="memory"),
        zero_ok=True),
    Row("js.create_key_value(max_value_size=)", "max_value_size", "count",
        lambda t, v: t.js.create_key_value(t.bucket(), max_value_size=v, storage="memory"),
        zero_ok=True),
    Row("js.create_key_value(replicas=)", "replicas", "count",
        lambda t, v: t.js.create_key_value(t.bucket(), replicas=v, storage="memory")),
    Row("kv.get(revision=)", "revision", "count", lambda t, v: t.kv.get("k", revision=v)),
    Row("kv.update(last)", "last", "count", lambda t, v: t.kv.update("k", b"v", v),
        zero_ok=True),
    Row("kv.delete(last=)", "last", "count", lambda t, v: t.kv.delete("k", last=v),
        zero_ok=True),
    Row("kv.purge(last=)", "last", "count", lambda t, v: t.kv.purge("k", last=v),
        zero_ok=True),
    Row("kv.purge_deletes(older_than=)", "older_than", "seconds",
        lambda t, v: t.kv.purge_deletes(older_than=v), zero_ok=True),
    Row("watcher.next_update(timeout=)", "timeout", "seconds",
        lambda t, v: t.watcher.next_update(timeout=v)),
    # ---------------------------------------------------------------- object store
    Row("js.create_object_store(ttl=)", "ttl", "seconds",
        lambda t, v: t.js.create_object_store(t.bucket(), ttl=v, storage="memory"),
        zero_ok=True),
    Row("js.create_object_store(max_bytes=)", "max_bytes", "count",
        lambda t, v: t.js.create_object_store(t.bucket(), max_bytes=v, storage="memory"),
        zero_ok=True),
    Row("js.create_object_store(replicas=)", "replicas", "count",
        lambda t, v: t.js.create_object_store(t.bucket(), replicas=v, storage="memory")),
    Row("obs.put(chunk_size=)", "chunk_size", "count",
        lambda t, v: t.obs.put("o", b"data", chunk_size=v)),
]


def refusal(call: Callable[[], object]) -> InvalidArgumentError | str:
    """Run ``call``: the :class:`InvalidArgumentError` it raised, or failed its Deferred
    with before returning; otherwise a description of what it did instead."""
    try:
        result = call()
    except InvalidArgumentError as e:
        return e
    except Exception as e:  # reported as the test's failure
        return f"raised {e!r}"
    if isinstance(result, Deferred):
        got: list[object] = []
        result.addBoth(got.append)  # consumes the result: nothing is left unhandled
        if not got:
            return "returned a Deferred that has not failed"
        if isinstance(got[0], Failure):
            if got[0].check(InvalidArgumentError):
                return got[0].value  # type: ignore[return-value]
            return f"failed with {got[0].value!r}"
        return f"succeeded with {got[0]!r}"
    return f"returned {result!r}"


class TableMixin:
    """Plays :data:`ROWS`; subclasses say how to look at the wire and the timers."""

    def snapshot(self) -> dict[str, int]:
        """Counters that any I/O or new state would change."""
        raise NotImplementedError

    def clear_wire(self) -> None:
        """Forget what earlier (accepted) calls wrote."""

    def written_since_clear(self) -> str:
        """What the client wrote since :meth:`clear_wire` ("" if nothing)."""
        return ""

    def accepted(self, result: object) -> tuple[Deferred[object] | None, str]:
        """Look at what a call that had to accept 0 returned: what to wait for, if
        anything, and what was wrong ("" if nothing)."""
        if not isinstance(result, Deferred):
            return None, ""
        seen: list[object] = []

        def note(r: object) -> None:
            seen.append(r)  # other errors (the server's) are fine: 0 was accepted

        result.addBoth(note)
        if seen and isinstance(seen[0], Failure) and seen[0].check(InvalidArgumentError):
            return None, f"0 refused: {seen[0].value}"
        return result, ""

    def check_case(self, t: Targets, row: Row, value: object) -> str:
        """Feed ``value`` to ``row``: what was wrong ("" if nothing)."""
        self.clear_wire()
        before = self.snapshot()
        got = refusal(lambda: row.call(t, value))
        after = self.snapshot()
        if isinstance(got, str):
            return f"not refused: {got}"
        if str(got).split(" ", 1)[0] != row.argument:
            return f"the error does not start with the argument's name: {got}"
        if before != after:
            return f"something changed: {before} -> {after}"
        return self.written_since_clear()

    def play(self, t: Targets) -> list[Deferred[object]]:
        """Feed every row its bad values (and 0 where legal); fail, listing every case
        that went wrong, or return the Deferreds of the accepted calls."""
        case: Any = self
        pending: list[Deferred[object]] = []
        problems: list[str] = []
        cases = 0
        for row in ROWS:
            for value in (*BAD, *EXTRA[row.kind]):
                cases += 1
                if value == 0 and not isinstance(value, bool) and row.zero_ok:
                    try:
                        d, problem = self.accepted(row.call(t, value))
                    except InvalidArgumentError as e:
                        d, problem = None, f"0 refused: {e}"
                    except Exception as e:  # reported with the other problems
                        d, problem = None, f"0 accepted, then raised {e!r}"
                    if d is not None:
                        pending.append(d)
                else:
                    problem = self.check_case(t, row, value)
                if problem:
                    problems.append(f"{row.label} {value!r}: {problem}")
        if problems:
            case.fail(f"{len(problems)} of {cases} cases went wrong:\n" + "\n".join(problems))
        return pending


# ============================================================================ unit
class FakeWireTests(JsHarness, TableMixin, SynchronousTestCase):
    """The table over a fake transport: every byte and every timer is seen."""

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
        self.written()

    def snapshot(self) -> dict[str, int]:
        return {
            "timers": len(self.clock.getDelayedCalls()),
            "subscriptions": len(self.client.subscriptions),
            "out_msgs": self.client.stats.out_msgs,
            "publish_async_pending": self.js.publish_async_pending,
            "watcher_waiters": len(self.watcher._buffer.waiters),
        }

    def clear_wire(self) -> None:
        self.written()

    def written_since_clear(self) -> str:
        frames = self.written()
        return f"frames were written: {frames}" if frames else ""

    def test_table(self) -> None:
        """Each row refuses NaN, -1, 0 (unless legal), infinity and the wrong kind of
        number with an InvalidArgumentError naming the argument, and writes no frame,
        counts no message out, makes no subscription, arms no timer and leaves the
        publish window and the watcher's waiters alone; a legal 0 is accepted."""
        self.play(self.targets)
        self.assertEqual(self.js.timeout, 5.0)
        self.assertEqual(self.js.publish_async_max_pending, 4000)

    def test_publish_ttl_below_one_second_still_refused(self) -> None:
        """A per-message ttl under the server's 1 s minimum is refused (both publish
        calls), naming ttl; 1 s is the least accepted."""
        for ttl in (0.5, 0.999):
            f = self.failureResultOf(self.js.publish("S.a", ttl=ttl), InvalidArgumentError)
            self.assertRegex(str(f.value), r"^ttl must be at least 1 second")
            with self.assertRaisesRegex(InvalidArgumentError, r"^ttl "):
                self.js.publish_async("S.a", ttl=ttl)
        self.assertEqual(self.written(), [])
        self.js.publish("S.a", ttl=1)
        [f] = self.pubs("S.a")
        assert f.headers is not None
        self.assertEqual(f.headers["Nats-TTL"], "1s")

    def test_option_setters_keep_the_old_value(self) -> None:
        """A refused timeout or window leaves the context's option as it was; a good one
        is taken (and a smaller window moves its low-water mark)."""
        self.js.timeout = 2.5
        self.js.publish_async_max_pending = 10
        for bad in (NAN, -1, 0, INF):
            with self.assertRaises(InvalidArgumentError):
                self.js.timeout = bad
            with self.assertRaises(InvalidArgumentError):
                self.js.publish_async_max_pending = bad  # type: ignore[assignment]
        self.assertEqual((self.js.timeout, self.js.publish_async_max_pending), (2.5, 10))
        self.assertEqual(self.js._window._low_water, 5)
        self.js.publish_async_stall_wait = 1.5
        for bad in (NAN, -1, INF, "1"):
            with self.assertRaises(InvalidArgumentError):
                self.js.publish_async_stall_wait = bad  # type: ignore[assignment]
        self.assertEqual(self.js.publish_async_stall_wait, 1.5)
        d = self.js.api_request("INFO")
        self.one_request("$JS.API.INFO")
        self.clock.advance(2.5)
        self.failureResultOf(d, TimeoutError)

    def test_next_update_bad_timeout_takes_nothing(self) -> None:
        """A refused next_update takes no entry from the queue and leaves no waiter:
        the next good call gets the entry that was waiting."""
        entry = Entry("kvb", "k", b"v", 3, None)
        self.watcher._push(entry)
        for bad in (NAN, -1, 0, INF):
            self.failureResultOf(self.watcher.next_update(timeout=bad), InvalidArgumentError)
        self.assertEqual(list(self.watcher._buffer.waiters), [])
        self.assertIs(self.successResultOf(self.watcher.next_update(timeout=1.0)), entry)

    def test_good_calls_after_refusals(self) -> None:
        """After the whole table, a publish, a fetch and a nak with a delay still go
        out and complete."""
        self.play(self.targets)
        self.written()
        d = self.js.publish("S.a", b"after")
        f = self.one_request("S.a")
        self.answer(f, {"stream": "S", "seq": 9})
        self.assertEqual(self.successResultOf(d), PubAck("S", 9))

        fetched = self.targets.pull.fetch(1, expires=1.0)
        [req] = self.pubs("$JS.API.CONSUMER.MSG.NEXT.S.C")
        assert req.reply is not None
        self.send(msg_frame("S.a", self.subs[req.reply], b"m", ack_subject("S", "C", 4, 2)))
        [m] = self.successResultOf(fetched)
        m.nak(delay=0.25)
        [nak] = self.pubs()
        self.assertEqual(nak.data, b'-NAK {"delay": 250000000}')


# ============================================================================ server
class RealServerTests(ServerPerClass, TableMixin, TestCase):
    """The table against ``nats-server -js``, then a good call of every kind."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 60

    def snapshot(self) -> dict[str, int]:
        return {
            "timers": len(reactor.getDelayedCalls()),
            "subscriptions": len(self.nc.subscriptions),
            "out_msgs": self.nc.stats.out_msgs,
            "publish_async_pending": self.js.publish_async_pending,
            "watcher_waiters": len(self.watcher._buffer.waiters),
        }

    async def drop(self, stream: str) -> None:
        try:
            await bounded(self.js.delete_stream(stream))
        except StreamNotFoundError:
            pass

    async def test_table_then_good_calls(self) -> None:
        """On a real connection each row refuses its bad values with the argument named
        while no message goes out, no subscription is made and no timer armed; legal
        zeros are accepted; then publishing, fetching and acking, reading and deleting
        a stored message, the key-value bucket and its watcher, the object store and
        an ordered consumer all still work."""
        assert self.server is not None
        self.nc = nc = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(lambda: bounded(nc.close()))
        self.js = js = nc.jetstream()
        stream = "ARGS"
        await bounded(js.add_stream(name=stream, subjects=["args.>"], storage="memory"))
        self.addCleanup(self.drop, stream)
        await bounded(js.publish("args.a", b"first"))
        await bounded(js.add_consumer(stream, durable_name="C", ack_policy="explicit"))
        kv = await bounded(js.create_key_value("argskv", storage="memory"))
        self.addCleanup(self.drop, "KV_argskv")
        await bounded(kv.put("k", b"v1"))
        self.watcher = watcher = await bounded(kv.watch("k"))
        self.addCleanup(watcher.stop)
        obs = await bounded(js.create_object_store("argsobj", storage="memory"))
        self.addCleanup(self.drop, "OBJ_argsobj")
        counter = itertools.count()

        def bucket() -> str:
            name = f"argsnew{next(counter)}"
            for prefix in ("KV_", "OBJ_"):
                self.addCleanup(self.drop, prefix + name)
            return name

        targets = Targets(
            js=js, stream=stream, subject="args.a", pull=js.pull_consumer(stream, "C"),
            msg=lambda: JsMsg(
                Msg("args.a", ack_subject(stream, "NONE", 1, 1), b"x", None, 1), nc
            ),
            kv=kv, watcher=watcher, obs=obs, bucket=bucket,
        )
        for d in self.play(targets):
            await bounded(d)
        self.assertEqual((js.timeout, js.publish_async_max_pending), (5.0, 4000))

        # The context: a publish, a publish_async, reading and deleting what was stored.
        ack = await bounded(js.publish("args.b", b"after", ttl=None))
        raw = await bounded(js.get_msg(stream, ack.seq))
        self.assertEqual(raw.data, b"after")
        self.assertIs(await bounded(js.delete_msg(stream, ack.seq)), True)
        self.assertEqual((await bounded(js.publish_async("args.c", b"async"))).stream, stream)
        self.assertIn("limits", await bounded(js.api_request("INFO", timeout=2.0)))
        # A fetch, and the server confirming an ack.
        await bounded(js.publish("args.d", b"to fetch"))
        got = await bounded(targets.pull.fetch(5, expires=1.0), 10)
        self.assertGreaterEqual(len(got), 1)
        for m in got:
            await bounded(m.ack_sync(timeout=2.0))
        # The watcher: what it had waiting (the initial value, then the marker) is
        # still there, and a new value comes through.
        first = await bounded(watcher.next_update(timeout=2.0))
        self.assertEqual((first.key, first.value) if first else None, ("k", b"v1"))
        self.assertIsNone(await bounded(watcher.next_update(timeout=2.0)))
        rev = await bounded(kv.put("k", b"v2"))
        nxt = await bounded(watcher.next_update(timeout=2.0))
        self.assertEqual((nxt.value, nxt.revision) if nxt else None, (b"v2", rev))
        self.assertEqual((await bounded(kv.get("k", revision=rev))).value, b"v2")
        self.assertGreater(await bounded(kv.update("k", b"v3", rev)), rev)
        # The object store.
        await bounded(obs.put("o", b"0123456789", chunk_size=4))
        self.assertEqual(await bounded(obs.get("o")), b"0123456789")
        # An ordered consumer from a given sequence delivers.
        delivered: Deferred[JsMsg] = Deferred()

        def on_msg(m: JsMsg) -> None:
            if not delivered.called:
                delivered.callback(m)

        oc = OrderedConsumer(js, stream, on_msg, heartbeat=1.0,
                             deliver_policy="by_start_sequence", opt_start_seq=1)
        self.addCleanup(oc.stop)
        await bounded(oc.start())
        self.assertEqual((await bounded(delivered)).subject, "args.a")
