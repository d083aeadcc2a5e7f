"""Every number (and callable, and payload) a caller passes to the core client is
checked at the call, before anything is sent, queued, timed or changed.

Each test plays a table of rows: one public call, one argument, one bad value (NaN,
-1, 0, infinity, and by kind a fraction, a string, a bool or ``None``). For every row
the call must fail with :class:`~txnats.errors.InvalidArgumentError` (its subclass
:class:`~txnats.errors.InvalidArgumentTypeError`, also a ``TypeError``, for a value of
the wrong type) whose message names the argument; and after ``clock.advance(0)`` the
server side must have received no new bytes, the subscriptions, statistics, pending
bytes, state and timers must be as they were. After the rows, a good call shows the
client still works. Where zero (or -1) is legal it must be accepted.

A table reports every failing row at once (see :meth:`ArgsMixin.each_row`), so one
gap does not hide another. No sockets, no server, no wall clock: a
``MemoryReactorClock`` and the fake server side of :mod:`txnats.testing.fakes`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable
from random import Random
from typing import Any

from twisted.internet.defer import Deferred
from twisted.internet.error import ConnectionRefusedError
from twisted.internet.testing import MemoryReactorClock
from twisted.python.failure import Failure
from twisted.trial.unittest import SynchronousTestCase

from txnats import Client, ClientState, Options, connect, errors
from txnats.errors import (
    FlushTimeoutError,
    InvalidArgumentError,
    OutboundBufferFullError,
    TimeoutError,
)
from txnats.protocol.events import Msg
from txnats.testing import ServerSide

from .support.clients import ClientTestMixin, endpoint
from .support.wire import info_line, msg_frame

# InvalidArgumentTypeError came with the up-front checks (24307e0). Looked up by name so
# that this file also runs, row by row, against the code from before them (where every
# row expecting it then fails, as it should) instead of failing to import.
InvalidArgumentTypeError: type[InvalidArgumentError] = getattr(
    errors,
    "InvalidArgumentTypeError",
    type("MissingInvalidArgumentTypeError", (InvalidArgumentError,), {}),
)

NAN = math.nan
INF = math.inf

#: The kinds of refusal: out of range (a ValueError) or of the wrong type (a TypeError).
RANGE = InvalidArgumentError
TYPE = InvalidArgumentTypeError

Row = tuple[Any, type[InvalidArgumentError]]

#: A timeout where None means "no limit": NaN, infinity, zero and negatives refused.
TIMEOUT_ROWS: list[Row] = [
    (NAN, RANGE), (-1, RANGE), (-0.5, RANGE), (0, RANGE), (0.0, RANGE), (INF, RANGE),
    (-INF, RANGE), ("1", TYPE), (True, TYPE), (b"1", TYPE),
]
#: A timeout that must be given (None refused too).
REQUIRED_TIMEOUT_ROWS: list[Row] = [*TIMEOUT_ROWS, (None, TYPE)]
#: A delay or interval: zero legal; NaN, infinity and negatives refused.
DELAY_ROWS: list[Row] = [
    (NAN, RANGE), (-1, RANGE), (-0.001, RANGE), (INF, RANGE), ("1", TYPE), (True, TYPE),
    (None, TYPE),
]
#: A count of at least 1: a whole number (floats, NaN, infinity and bools refused).
COUNT_ROWS: list[Row] = [
    (NAN, TYPE), (-1, RANGE), (0, RANGE), (INF, TYPE), (1.5, TYPE), ("1", TYPE),
    (True, TYPE), (False, TYPE),
]
#: A count given in an Options field (None is no default there).
REQUIRED_COUNT_ROWS: list[Row] = [*COUNT_ROWS, (None, TYPE)]

CALLBACK_OPTIONS = [
    "error_cb", "disconnected_cb", "reconnected_cb", "closed_cb", "lame_duck_cb",
    "discovered_servers_cb", "token_handler", "user_jwt_cb", "signature_cb",
]

#: Every numeric connect() option, with its bad rows.
OPTION_ROWS: dict[str, list[Row]] = {
    "connect_timeout": REQUIRED_TIMEOUT_ROWS,
    "ping_interval": DELAY_ROWS,
    "max_pings_out": REQUIRED_COUNT_ROWS,
    "pending_msgs_limit": REQUIRED_COUNT_ROWS,
    "pending_bytes_limit": REQUIRED_COUNT_ROWS,
    "drain_timeout": REQUIRED_TIMEOUT_ROWS,
    "max_outbound_bytes": REQUIRED_COUNT_ROWS,
    # -1 is "forever", 0 "never": below that, or not a whole number, is refused.
    "max_reconnect_attempts": [
        (NAN, TYPE), (-2, RANGE), (-100, RANGE), (INF, TYPE), (1.5, TYPE), ("1", TYPE),
        (True, TYPE), (None, TYPE),
    ],
    "reconnect_wait": DELAY_ROWS,
    "reconnect_jitter": DELAY_ROWS,
    # 0 is "buffer nothing while disconnected".
    "reconnect_buffer_size": [
        (NAN, TYPE), (-1, RANGE), (INF, TYPE), (1.5, TYPE), ("1", TYPE), (True, TYPE),
        (None, TYPE),
    ],
}

#: Values that are legal although they look like edge cases.
LEGAL_OPTIONS: list[dict[str, Any]] = [
    {"ping_interval": 0},
    {"ping_interval": 0.0},
    {"reconnect_wait": 0},
    {"reconnect_jitter": 0},
    {"reconnect_wait": 0, "reconnect_jitter": 0.0},
    {"reconnect_buffer_size": 0},
    {"max_reconnect_attempts": -1},
    {"max_reconnect_attempts": 0},
    {"max_pings_out": 1},
    {"pending_msgs_limit": 1, "pending_bytes_limit": 1},
    {"max_outbound_bytes": 1},
    {"connect_timeout": 0.001, "drain_timeout": 0.001},
    {"connect_timeout": 5, "drain_timeout": 5},  # ints are seconds too
    {"error_cb": print, "closed_cb": lambda: None, "discovered_servers_cb": None},
]


def reply_of(server: ServerSide, subject: str) -> str:
    m = re.search(rb"PUB " + subject.encode() + rb" (\S+) ", server.transport.value())
    assert m is not None, server.transport.value()
    return m.group(1).decode()


def sid_of(server: ServerSide, subject: str) -> int:
    m = re.search(rb"SUB " + re.escape(subject.encode()) + rb" (\d+)\r\n", server.transport.value())
    assert m is not None, server.transport.value()
    return int(m.group(1))


class StrictClock(MemoryReactorClock):
    """A test clock that refuses a negative or NaN delay, as Twisted's reactors do
    (``ReactorBase.callLater`` asserts ``delay >= 0``)."""

    def callLater(
        self, delay: float, callable: Callable[..., object], *args: object, **kw: object
    ) -> Any:
        assert delay >= 0, f"{delay} is not greater than or equal to 0 seconds"
        return super().callLater(delay, callable, *args, **kw)


class ArgsMixin(ClientTestMixin):
    """Playing tables of refused arguments against a connected client."""

    server: ServerSide

    def each_row(self, rows: Iterable[Any], check: Callable[[Any], None]) -> None:
        """Run ``check(row)`` for every row; fail once, listing every row that failed."""
        failures: list[str] = []
        count = 0
        for row in rows:
            count += 1
            try:
                check(row)
            except Exception as e:  # an assertion, or whatever the old code raised
                failures.append(f"  {row!r}: {type(e).__name__}: {e}")
        if failures:
            self.fail(f"{len(failures)} of {count} rows failed:\n" + "\n".join(failures))

    def check_error(self, err: BaseException, kind: type[InvalidArgumentError], name: str) -> None:
        """``err`` is an InvalidArgumentError of ``kind`` whose message names ``name``."""
        self.assertIsInstance(err, InvalidArgumentError)
        if kind is TYPE:
            self.assertIsInstance(err, InvalidArgumentTypeError)
            self.assertIsInstance(err, TypeError)
        else:
            self.assertNotIsInstance(err, TypeError)
            self.assertIsInstance(err, ValueError)
        self.assertRegex(str(err), rf"(?<![\w.]){re.escape(name)}(?!\w)")

    def start(self, **opts: Any) -> Client:
        """A connected client (no PING timer, so any timer left behind shows), its
        server side in ``self.server``."""
        opts.setdefault("ping_interval", 0)
        client, self.server = self.connected(**opts)
        self.clock.advance(0)
        self.server.reset()
        return client

    def snapshot(self) -> dict[str, object]:
        """What a refused call must not change (``clock.advance(0)`` first)."""
        self.clock.advance(0)
        c = self.client
        return {
            "wire": self.server.transport.value(),
            "state": c.state,
            "stats": c.stats,
            "pending_bytes": c.pending_bytes,
            "subscriptions": [
                (s.sid, s.subject, s.queue, s.max_msgs, s.pending_msgs, s.delivered,
                 s.is_active)
                for s in c.subscriptions
            ],
            "timers": set(self.clock.getDelayedCalls()),
        }

    def assert_unchanged(self, before: dict[str, object]) -> None:
        """Nothing in :meth:`snapshot` changed; the message lists what did."""
        after = self.snapshot()
        changed = [
            f"{key}: {before[key]!r:.200} -> {after[key]!r:.200}"
            for key in before
            if before[key] != after[key] and key != "wire"
        ]
        wire_before, wire_after = before["wire"], after["wire"]
        assert isinstance(wire_before, bytes) and isinstance(wire_after, bytes)
        if wire_after != wire_before:
            changed.insert(0, f"sent {wire_after[len(wire_before):]!r}")
        if changed:
            self.fail("changed: " + "; ".join(changed))

    def refused_at_once(
        self, call: Callable[[], object], kind: type[InvalidArgumentError], name: str
    ) -> None:
        """``call()`` raises (or returns a Deferred that has already failed) with
        ``kind`` naming ``name``, and changes nothing."""
        before = self.snapshot()
        try:
            result = call()
        except Exception as e:
            err: BaseException = e
        else:
            if not isinstance(result, Deferred):
                self.fail(f"accepted: returned {result!r}")
            err = self.failureResultOf(result).value
        self.check_error(err, kind, name)
        self.assert_unchanged(before)

    def raises_at_once(
        self, call: Callable[[], object], kind: type[InvalidArgumentError], name: str
    ) -> None:
        """Like :meth:`refused_at_once`, for a call documented to raise."""
        before = self.snapshot()
        try:
            result = call()
        except Exception as e:
            self.check_error(e, kind, name)
        else:
            if isinstance(result, Deferred):
                result.addErrback(lambda _: None)
            self.fail(f"did not raise: returned {result!r}")
        self.assert_unchanged(before)

    def fails_at_once(
        self, call: Callable[[], Deferred[Any]], kind: type[InvalidArgumentError], name: str
    ) -> None:
        """Like :meth:`refused_at_once`, for a call documented to return a failed Deferred."""
        before = self.snapshot()
        result = call()
        self.assertIsInstance(result, Deferred)
        self.check_error(self.failureResultOf(result).value, kind, name)
        self.assert_unchanged(before)


# ====================================================================== connect()
class ConnectOptionTests(ArgsMixin, SynchronousTestCase):
    def test_bad_numeric_option_fails_connect_at_once(self) -> None:
        """connect() with a bad numeric option returns a Deferred that has already failed
        with InvalidArgumentError naming the option: nothing dialled, no timer armed, no
        shutdown trigger added (before, NaN and friends left it never firing).
        Client(..., Options(...)) raises the same error."""
        rows = [(name, value, kind) for name, bad in OPTION_ROWS.items() for value, kind in bad]

        def check(row: tuple[str, Any, type[InvalidArgumentError]]) -> None:
            name, value, kind = row
            clock = MemoryReactorClock()
            d = connect(clock, endpoint(), **{name: value})
            self.check_error(self.failureResultOf(d).value, kind, name)
            clock.advance(0)
            self.assertEqual(clock.tcpClients, [])
            self.assertEqual(clock.getDelayedCalls(), [])
            self.assertEqual(clock.triggers, {})
            try:
                Client(clock, [endpoint()], Options(**{name: value}))
            except Exception as e:
                self.check_error(e, kind, name)
            else:
                self.fail("Client() accepted it")

        self.each_row(rows, check)

    def test_callbacks_must_be_callable(self) -> None:
        """Every callback option refuses a value that is not callable (at connect(), not
        when the callback is first due), with InvalidArgumentTypeError naming it."""
        rows = [(name, value) for name in CALLBACK_OPTIONS for value in ("x", 1, True, b"cb")]

        def check(row: tuple[str, Any]) -> None:
            name, value = row
            clock = MemoryReactorClock()
            d = connect(clock, endpoint(), **{name: value})
            self.check_error(self.failureResultOf(d).value, TYPE, name)
            clock.advance(0)
            self.assertEqual(clock.tcpClients, [])
            self.assertEqual(clock.getDelayedCalls(), [])

        self.each_row(rows, check)

    def test_legal_edge_values_are_accepted(self) -> None:
        """Zero where zero means something (no PINGs, no reconnect wait or jitter, no
        reconnect buffer), -1 and 0 reconnect attempts, the smallest counts and
        timeouts: connect() dials and fires with a connected client."""

        def check(opts: dict[str, Any]) -> None:
            clock = MemoryReactorClock()
            d = connect(clock, endpoint(), **opts)
            clock.advance(0)
            self.assertEqual(len(clock.tcpClients), 1)
            server = ServerSide(clock)
            server.send(info_line())
            server.send(b"PONG\r\n")
            clock.advance(0)
            client = self.successResultOf(d)
            self.assertEqual(client.state, ClientState.CONNECTED)
            for name, value in opts.items():
                self.assertEqual(getattr(client.options, name), value)

        self.each_row(LEGAL_OPTIONS, check)

    def test_connect_without_a_reactor(self) -> None:
        """connect("nats://...") (the URL where the reactor belongs) raises at once
        InvalidArgumentTypeError saying the first argument must be a reactor; so does
        Client() and any other object without callLater."""
        for bad in ("nats://127.0.0.1:4222", b"nats://127.0.0.1:4222", None, object()):
            with self.assertRaises(InvalidArgumentTypeError) as cm:
                connect(bad)
            self.assertIn("the first argument must be a reactor", str(cm.exception))
            self.assertIsInstance(cm.exception, TypeError)
            with self.assertRaises(InvalidArgumentTypeError) as cm2:
                Client(bad, [endpoint()])
            self.assertIn("the first argument must be a reactor", str(cm2.exception))

    def test_ping_interval_zero_sends_no_pings(self) -> None:
        """ping_interval=0 means no PINGs: an hour passes with nothing written, no timer
        pending, and the connection kept."""
        client, server = self.connected(ping_interval=0)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        for _ in range(60):
            self.clock.advance(60)
        self.assertEqual(server.transport.value(), b"")
        self.assertEqual(client.state, ClientState.CONNECTED)

    def test_smallest_max_pings_out_keeps_a_healthy_connection(self) -> None:
        """max_pings_out=1 (the smallest accepted): a server answering every PING keeps
        the connection; one that stops is declared stale at the next tick after the
        unanswered PING."""
        client, server = self.connected(max_pings_out=1, ping_interval=10)
        for _ in range(5):
            self.clock.advance(10)
            self.assertEqual(server.answer_pings(), 1)
        self.assertEqual(client.state, ClientState.CONNECTED)
        self.clock.advance(10)  # a PING, unanswered
        self.assertFalse(server.transport.disconnecting)
        self.clock.advance(10)
        self.assertTrue(server.transport.disconnecting)

    def test_zero_reconnect_wait_and_jitter_redial_at_once(self) -> None:
        """reconnect_wait=0 with reconnect_jitter=0 redials in the next turn; jitter 0
        with a wait redials at exactly the wait."""
        client, server = self.connected(reconnect_wait=0, reconnect_jitter=0, ping_interval=0)
        server.lose()
        self.assertEqual(client.state, ClientState.RECONNECTING)
        self.clock.advance(0)
        self.assertEqual(len(self.clock.tcpClients), 2)
        self.accept()
        self.assertEqual(client.state, ClientState.CONNECTED)

        client, server = self.connected(reconnect_wait=1.5, reconnect_jitter=0, ping_interval=0)
        server.lose()
        self.clock.advance(1.5 - 1 / 64)
        self.assertEqual(len(self.clock.tcpClients), 1)
        self.clock.advance(1 / 64)
        self.assertEqual(len(self.clock.tcpClients), 2)

    def test_reconnect_buffer_size_zero_buffers_nothing(self) -> None:
        """reconnect_buffer_size=0: while disconnected every publish is refused with
        OutboundBufferFullError and nothing is kept (nor sent on reconnecting)."""
        client, server = self.connected(
            reconnect_buffer_size=0, reconnect_wait=1, reconnect_jitter=0, ping_interval=0
        )
        server.lose()
        self.assertRaises(OutboundBufferFullError, client.publish, "a", b"x")
        self.assertRaises(OutboundBufferFullError, client.publish, "a", b"")
        self.assertEqual(client.pending_bytes, 0)
        self.clock.advance(1)
        new = self.accept(reset=False)
        self.assertNotIn(b"PUB", new.transport.value())

    def test_max_reconnect_attempts_minus_one_retries_forever(self) -> None:
        """max_reconnect_attempts=-1 keeps redialling: 200 refused dials (more than the
        default 60) later it is still RECONNECTING, and the next dial that answers
        connects."""
        client, server = self.connected(
            max_reconnect_attempts=-1, reconnect_wait=1, reconnect_jitter=0, ping_interval=0
        )
        server.lose()
        clock = self.clock
        for _ in range(200):
            seen = len(clock.tcpClients)
            clock.advance(1)
            self.assertEqual(len(clock.tcpClients), seen + 1)
            clock.tcpClients[-1][2].clientConnectionFailed(
                clock.connectors[-1], Failure(ConnectionRefusedError())
            )
            self.assertEqual(client.state, ClientState.RECONNECTING)
        clock.advance(1)
        self.accept()
        self.assertEqual(client.state, ClientState.CONNECTED)

    def test_negative_jitter_cannot_wedge_reconnecting(self) -> None:
        """A reconnect_jitter below zero (or NaN, or infinite) is refused by connect()
        at once, on a clock that, like Twisted's reactors, refuses a negative delay: it
        can no longer leave the client in RECONNECTING with no redial scheduled (the
        old failure: callLater raising in the middle of connection_lost). With the
        smallest legal wait and jitter the client does redial and reconnect."""
        for bad in (-1, -0.001, NAN, INF):
            clock = StrictClock()
            d = connect(clock, endpoint(), reconnect_jitter=bad)
            self.check_error(self.failureResultOf(d).value, RANGE, "reconnect_jitter")
            self.assertEqual(clock.tcpClients, [])

        self.clock = clock = StrictClock()
        self.client = client = Client(
            clock, [endpoint()],
            Options(reconnect_wait=0, reconnect_jitter=0, ping_interval=0), rng=Random(1),
        )
        d = client.start()
        clock.advance(0)
        server = self.accept()
        self.successResultOf(d)
        server.lose()
        self.assertEqual(client.state, ClientState.RECONNECTING)
        clock.advance(0)
        self.assertEqual(len(clock.tcpClients), 2)  # redialled
        self.accept()
        self.assertEqual(client.state, ClientState.CONNECTED)


# ====================================================================== publish()
class PublishArgumentTests(ArgsMixin, SynchronousTestCase):
    BAD_DATA = ["1", "", 1, 0, 1.5, NAN, INF, True, None, ["x"], {"k": "v"}]

    def test_publish_refuses_data_that_is_not_bytes(self) -> None:
        """publish() with a str, number, bool, None, list or dict payload (plain, with a
        reply, with headers) raises InvalidArgumentTypeError naming data; nothing is
        queued or counted, and a good publish after it goes out alone."""
        client = self.start()
        shapes: list[dict[str, Any]] = [{}, {"reply": "r"}, {"headers": {"K": "v"}}]
        rows = [(data, shape) for data in self.BAD_DATA for shape in shapes]

        def check(row: tuple[Any, dict[str, Any]]) -> None:
            data, shape = row
            self.raises_at_once(lambda: client.publish("a", data, **shape), TYPE, "data")
            client.publish("a", b"ok")
            self.clock.advance(0)
            self.assertTrue(self.server.transport.value().endswith(b"PUB a 2\r\nok\r\n"))

        self.each_row(rows, check)

    def test_publish_accepts_bytes_like_data(self) -> None:
        """bytes, bytearray and memoryview payloads are accepted and sent as bytes."""
        client = self.start()
        for data in (b"ab", bytearray(b"ab"), memoryview(b"ab")):
            client.publish("a", data)
        self.clock.advance(0)
        self.assertEqual(self.server.transport.value(), b"PUB a 2\r\nab\r\n" * 3)
        self.assertEqual(client.stats.out_bytes, 6)


# ====================================================================== subscribe()
class SubscribeArgumentTests(ArgsMixin, SynchronousTestCase):
    def test_subscribe_refuses_bad_counts(self) -> None:
        """max_msgs, pending_msgs_limit, pending_bytes_limit and concurrency refuse NaN,
        -1, 0 (which once meant "default" for the limits), infinity, fractions, strings
        and bools (and concurrency None): no SUB, no subscription, no sid used up."""
        client = self.start()
        names = ["max_msgs", "pending_msgs_limit", "pending_bytes_limit", "concurrency"]
        rows = [(name, value, kind) for name in names for value, kind in COUNT_ROWS]
        rows.append(("concurrency", None, TYPE))

        def check(row: tuple[str, Any, type[InvalidArgumentError]]) -> None:
            name, value, kind = row
            self.raises_at_once(
                lambda: client.subscribe("q.x", None, **{name: value}), kind, name
            )
            self.raises_at_once(
                lambda: client.subscribe("q.x", lambda m: None, **{name: value}), kind, name
            )

        self.each_row(rows, check)
        sub = client.subscribe("q.x")
        self.clock.advance(0)
        self.assertEqual(self.server.transport.value(), b"SUB q.x 1\r\n")
        self.assertEqual(sub.sid, 1)

    def test_subscribe_refuses_a_handler_that_is_not_callable(self) -> None:
        """A handler that is not callable (the queue group passed where the handler goes,
        above all) raises InvalidArgumentTypeError naming handler, pointing a string
        at queue=; nothing is sent."""
        client = self.start()

        def check(value: Any) -> None:
            self.raises_at_once(lambda: client.subscribe("q.x", value), TYPE, "handler")

        self.each_row(["workers", b"workers", 1, True, 1.5, NAN, object()], check)
        with self.assertRaises(InvalidArgumentTypeError) as cm:
            client.subscribe("q.x", "workers")
        self.assertIn("queue=", str(cm.exception))

    def test_queue_and_limits_are_keyword_only(self) -> None:
        """Every subscribe() argument after handler is keyword-only: a positional queue
        raises TypeError and sends nothing; queue=... works."""
        client = self.start()

        def check(args: tuple[Any, ...]) -> None:
            before = self.snapshot()
            with self.assertRaises(TypeError):
                client.subscribe("q.x", *args)  # type: ignore[misc]
            self.assert_unchanged(before)

        self.each_row([(None, "workers"), (print, "workers"), (print, None, 5)], check)
        client.subscribe("q.x", print, queue="workers")
        self.clock.advance(0)
        self.assertEqual(self.server.transport.value(), b"SUB q.x workers 1\r\n")

    def test_legal_limits(self) -> None:
        """None takes the client's defaults; 1 is the smallest limit and is honoured (one
        message kept, the next dropped: not "default", not "drop everything");
        max_msgs=1 sends UNSUB 1 1."""
        client = self.start()
        default = client.subscribe("d")
        self.assertEqual(default.pending_msgs_limit, client.options.pending_msgs_limit)
        self.assertEqual(default.pending_bytes_limit, client.options.pending_bytes_limit)
        self.assertIsNone(default.max_msgs)
        tight = client.subscribe("t", pending_msgs_limit=1, pending_bytes_limit=1, concurrency=1)
        self.assertEqual((tight.pending_msgs_limit, tight.pending_bytes_limit), (1, 1))
        self.server.send(msg_frame("t", tight.sid, b"a") + msg_frame("t", tight.sid, b"b"))
        self.assertEqual((tight.pending_msgs, tight.dropped), (1, 1))
        client.subscribe("m", max_msgs=1)
        self.clock.advance(0)
        self.assertTrue(self.server.transport.value().endswith(b"SUB m 3\r\nUNSUB 3 1\r\n"))


# ====================================================================== request()
class RequestArgumentTests(ArgsMixin, SynchronousTestCase):
    def answer(self, d: Deferred[Msg], body: bytes) -> None:
        """Answer the request ``d`` made on "svc" (the last one written) with ``body``."""
        self.clock.advance(0)
        reply = reply_of(self.server, "svc")
        inbox = reply.rsplit(".", 1)[0] + ".*"
        (sid,) = [s.sid for s in self.client.subscriptions if s.subject == inbox]
        self.server.send(msg_frame(reply, sid, body))
        self.assertEqual(self.successResultOf(d).data, body)

    def test_request_refuses_bad_timeouts(self) -> None:
        """request() with a timeout of NaN, <= 0, infinity, a string or a bool returns a
        Deferred that has already failed with InvalidArgumentError naming timeout: no
        inbox subscription, no PUB, no timer. A good request then goes out and is
        answered."""
        client = self.start()

        def check(row: Row) -> None:
            value, kind = row
            self.fails_at_once(
                lambda: client.request("svc", b"x", timeout=value), kind, "timeout"
            )

        self.each_row(TIMEOUT_ROWS, check)
        self.assertEqual(client.subscriptions, [])
        self.answer(client.request("svc", b"x", timeout=1), b"ok")
        # ... and again, with the request inbox already there.
        self.each_row(TIMEOUT_ROWS, check)
        self.server.reset()
        self.answer(client.request("svc", b"y", timeout=1), b"ok2")

    def test_refused_nan_timeout_leaves_no_timer_rearming(self) -> None:
        """A request refused for a NaN (or infinite) timeout leaves nothing in the
        request queue: a request pending before it and one made after it each time out
        at exactly their own timeout, and then no timer is left re-arming itself."""
        client = self.start()
        first = client.request("svc", b"1", timeout=1)
        self.clock.advance(0.5)
        for bad in (NAN, INF):
            self.failureResultOf(client.request("svc", b"x", timeout=bad), InvalidArgumentError)
        second = client.request("svc", b"2", timeout=1)  # due at 1.5
        self.clock.advance(0.5 - 1 / 64)
        self.assertNoResult(first)
        self.clock.advance(1 / 64)
        self.failureResultOf(first, TimeoutError)
        self.clock.advance(0.5 - 1 / 64)
        self.assertNoResult(second)
        self.clock.advance(1 / 64)
        self.failureResultOf(second, TimeoutError)
        self.clock.advance(0)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        third = client.request("svc", b"3", timeout=0.25)
        self.clock.advance(0.25)
        self.failureResultOf(third, TimeoutError)
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_request_timeout_none_waits_without_a_timer(self) -> None:
        """timeout=None is legal: no timer is armed, and the response fires the request."""
        client = self.start()
        d = client.request("svc", b"x", timeout=None)
        self.clock.advance(3600)
        self.assertNoResult(d)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.answer(d, b"late")

    def test_request_refuses_data_that_is_not_bytes(self) -> None:
        """request() with a payload that is not bytes fails at once with
        InvalidArgumentTypeError naming data, having sent nothing and made no inbox
        subscription (on a client's first request too)."""

        def check(data: Any) -> None:
            client = self.start()
            self.fails_at_once(lambda: client.request("svc", data, timeout=1), TYPE, "data")
            self.answer(client.request("svc", b"x", timeout=1), b"ok")

        self.each_row(["x", 1, NAN, True, None], check)


# ====================================================================== request_many()
class RequestManyArgumentTests(ArgsMixin, SynchronousTestCase):
    def test_request_many_refuses_bad_arguments(self) -> None:
        """request_many() with a bad timeout (None included), stall or max_msgs returns a
        Deferred that has already failed with InvalidArgumentError naming it: no inbox
        subscription left behind, no SUB/UNSUB/PUB, no timer. Then a good one gathers."""
        client = self.start()
        rows = (
            [("timeout", v, k) for v, k in REQUIRED_TIMEOUT_ROWS]
            + [("stall", v, k) for v, k in TIMEOUT_ROWS]
            + [("max_msgs", v, k) for v, k in COUNT_ROWS]
        )

        def check(row: tuple[str, Any, type[InvalidArgumentError]]) -> None:
            name, value, kind = row
            self.fails_at_once(
                lambda: client.request_many("svc", b"x", **{name: value}), kind, name
            )

        self.each_row(rows, check)
        self.assertEqual(client.subscriptions, [])
        d = client.request_many("svc", b"x", timeout=1, stall=None, max_msgs=2)
        self.clock.advance(0)
        reply = reply_of(self.server, "svc")
        self.assertEqual(sid_of(self.server, reply), 1)  # no sid used up before
        self.server.send(msg_frame(reply, 1, b"a") + msg_frame(reply, 1, b"b"))
        self.assertEqual([m.data for m in self.successResultOf(d)], [b"a", b"b"])
        self.clock.advance(0)
        self.assertEqual(client.subscriptions, [])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_request_many_refuses_data_that_is_not_bytes(self) -> None:
        """request_many() with a payload that is not bytes fails at once naming data,
        with no inbox subscribed (not even subscribed and unsubscribed again)."""
        client = self.start()

        def check(data: Any) -> None:
            self.fails_at_once(lambda: client.request_many("svc", data), TYPE, "data")

        self.each_row(["x", 1, NAN, True, None], check)


# ====================================================================== flush(), rtt()
class FlushArgumentTests(ArgsMixin, SynchronousTestCase):
    def test_flush_refuses_bad_timeouts(self) -> None:
        """flush() with a bad timeout fails at once naming timeout: no PING, no timer.
        Then flush(None) and a good flush each send one PING and fire on the PONG."""
        client = self.start()

        def check(row: Row) -> None:
            value, kind = row
            self.fails_at_once(lambda: client.flush(timeout=value), kind, "timeout")

        self.each_row(TIMEOUT_ROWS, check)
        for timeout in (None, 2):
            self.server.reset()
            d = client.flush(timeout=timeout)
            self.clock.advance(0)
            self.assertEqual(self.server.transport.value(), b"PING\r\n")
            self.server.send(b"PONG\r\n")
            self.assertIsNone(self.successResultOf(d))
        self.assertEqual(self.clock.getDelayedCalls(), [])
        d = client.flush(timeout=0.5)
        self.clock.advance(0.5)
        self.failureResultOf(d, FlushTimeoutError)

    def test_rtt_refuses_bad_timeouts(self) -> None:
        """rtt() with a bad timeout fails at once naming timeout, sending nothing; a good
        rtt() then measures the PING/PONG round trip."""
        client = self.start()

        def check(row: Row) -> None:
            value, kind = row
            self.fails_at_once(lambda: client.rtt(timeout=value), kind, "timeout")

        self.each_row(TIMEOUT_ROWS, check)
        d = client.rtt(timeout=5)
        self.clock.advance(0.25)
        self.assertEqual(self.server.transport.value(), b"PING\r\n")
        self.server.send(b"PONG\r\n")
        self.assertEqual(self.successResultOf(d), 0.25)


# ====================================================================== Subscription
class SubscriptionArgumentTests(ArgsMixin, SynchronousTestCase):
    def next_msg(self, sub: Any, timeout: object) -> Deferred[Msg]:
        return sub.next_msg(timeout)

    def test_next_msg_refuses_bad_timeouts_and_swallows_nothing(self) -> None:
        """next_msg() with a bad timeout fails at once naming timeout, leaving no waiter
        and no timer: the next message goes to the next good next_msg() (before, a
        waiter with a NaN or infinite timeout stayed queued and took it)."""
        client = self.start()
        sub = client.subscribe("q")
        n = iter(range(1000))

        def check(row: Row) -> None:
            value, kind = row
            self.refused_at_once(lambda: self.next_msg(sub, value), kind, "timeout")
            body = b"%d" % next(n)
            self.server.send(msg_frame("q", sub.sid, body))
            self.clock.advance(0)
            self.assertEqual(self.successResultOf(self.next_msg(sub, 1)).data, body)

        self.each_row(TIMEOUT_ROWS, check)

    def test_next_msg_refused_with_a_message_queued_keeps_it(self) -> None:
        """With a message waiting in the mailbox, a refused next_msg() does not take it:
        it stays pending for the next good call."""
        client = self.start()
        sub = client.subscribe("q")
        self.server.send(msg_frame("q", sub.sid, b"kept"))
        self.clock.advance(0)

        def check(row: Row) -> None:
            value, kind = row
            self.refused_at_once(lambda: self.next_msg(sub, value), kind, "timeout")
            self.assertEqual(sub.pending_msgs, 1)

        self.each_row(TIMEOUT_ROWS, check)
        self.assertEqual(self.successResultOf(self.next_msg(sub, 1)).data, b"kept")

    def test_next_msg_timeouts_still_work(self) -> None:
        """After refused calls, next_msg(None) waits without a timer and next_msg(t)
        times out at exactly t."""
        client = self.start()
        sub = client.subscribe("q")
        for bad in (NAN, INF, -1, 0):
            self.failureResultOf(self.next_msg(sub, bad), InvalidArgumentError)
        d = self.next_msg(sub, 0.5)
        self.clock.advance(0.5 - 1 / 64)
        self.assertNoResult(d)
        self.clock.advance(1 / 64)
        self.failureResultOf(d, TimeoutError)
        forever = self.next_msg(sub, None)
        self.assertEqual(self.clock.getDelayedCalls(), [])
        self.server.send(msg_frame("q", sub.sid, b"m"))
        self.clock.advance(0)
        self.assertEqual(self.successResultOf(forever).data, b"m")

    def test_drain_refuses_bad_timeouts(self) -> None:
        """Subscription.drain() with a bad timeout raises naming timeout: the
        subscription stays active and registered, no UNSUB or PING, no timer. A good
        drain then unsubscribes, flushes and ends it."""
        client = self.start()
        sub = client.subscribe("q")
        self.clock.advance(0)
        self.server.reset()

        def check(row: Row) -> None:
            value, kind = row
            self.raises_at_once(lambda: sub.drain(timeout=value), kind, "timeout")
            self.assertTrue(sub.is_active)

        self.each_row(TIMEOUT_ROWS, check)
        d = sub.drain(timeout=5)
        self.clock.advance(0)
        self.assertEqual(self.server.transport.value(), b"UNSUB 1\r\nPING\r\n")
        self.server.send(b"PONG\r\n")
        self.clock.advance(0)
        self.successResultOf(d)
        self.assertFalse(sub.is_active)
        self.assertEqual(client.subscriptions, [])
        self.assertEqual(self.clock.getDelayedCalls(), [])

    def test_auto_unsubscribe_refuses_bad_counts(self) -> None:
        """auto_unsubscribe() with NaN, -1, 0, infinity, a fraction, a string, a bool or
        None raises naming max_msgs: no UNSUB, max_msgs unchanged. A good one then
        sends UNSUB and ends the subscription at that count."""
        client = self.start()
        sub = client.subscribe("q")
        self.clock.advance(0)
        self.server.reset()

        def check(row: Row) -> None:
            value, kind = row
            self.raises_at_once(lambda: sub.auto_unsubscribe(value), kind, "max_msgs")
            self.assertIsNone(sub.max_msgs)

        self.each_row([*COUNT_ROWS, (None, TYPE)], check)
        sub.auto_unsubscribe(2)
        self.clock.advance(0)
        self.assertEqual(self.server.transport.value(), b"UNSUB 1 2\r\n")
        self.server.send(msg_frame("q", 1, b"a") + msg_frame("q", 1, b"b"))
        self.clock.advance(0)
        self.assertEqual(client.subscriptions, [])
