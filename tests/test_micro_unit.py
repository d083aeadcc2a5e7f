"""The service API (txnats/micro) against a fake server: what it subscribes, what it
answers, how it counts, how it stops. No sockets and no wall clock: a client on a
MemoryReactorClock, MSG frames in, PUB/HPUB frames out."""

from __future__ import annotations

import ast
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from twisted.internet.defer import Deferred
from twisted.trial.unittest import SynchronousTestCase

import txnats
from tests.support.clients import ClientTestMixin
from tests.support.micro import validate
from tests.support.wire import hmsg_frame, msg_frame
from txnats import Headers
from txnats.errors import (
    ConnectionClosedError,
    InvalidArgumentError,
    InvalidArgumentTypeError,
    NatsError,
    NoReplySubjectError,
)
from txnats.micro import (
    ERROR_CODE_HEADER,
    ERROR_HEADER,
    INHERIT,
    AlreadyRespondedError,
    EndpointStats,
    InfoResponse,
    InvalidResponseError,
    InvalidServiceConfigError,
    PingResponse,
    Request,
    ServiceError,
    ServiceStoppedError,
    StatsResponse,
    add_service,
    control_subject,
)
from txnats.micro.responses import format_time, parse_time
from txnats.protocol.headers import encode_headers, parse_headers

GOOD_NAMES = ["svc", "a", "A-b_9", "0", "-", "_x_"]
BAD_NAMES = ["", "a.b", "a b", "a*", "a>", "é", "a/b", " a", None, 7]
GOOD_VERSIONS = ["0.0.0", "1.2.3", "10.20.30", "1.0.0-alpha", "1.0.0-alpha.1",
                 "1.0.0-0.3.7", "1.0.0-x.7.z.92", "1.0.0+20130313144700",
                 "1.0.0-beta+exp.sha.5114f85", "1.0.0-x-y-z.--"]
BAD_VERSIONS = ["", "1", "1.2", "1.2.3.4", "01.1.1", "1.01.1", "1.1.01", "v1.2.3",
                "1.2.3-", "1.2.3+", "1.2.3-01", "1.2.3 ", " 1.2.3", "1.2.3-a..b", None, 1.0]
BAD_SUBJECTS = ["", "a b", "a>b", ">a", "a.>.b", "a\tb", 5]
BAD_QUEUES = ["", "a b", "q\t", 3]
BAD_GROUPS = ["a>", ">", "a b", "a\tb", None]
BAD_METADATA: list[Any] = [["a"], {"a": 1}, {1: "a"}, "a=b", {"a": None}]


def frames(data: bytes) -> list[tuple[Any, ...]]:
    """The client's frames: ("SUB", subject, queue, sid), ("UNSUB", sid),
    ("PUB", subject, reply, headers, payload) (HPUB too, headers parsed), (op,)."""
    out: list[tuple[Any, ...]] = []
    i = 0
    while i < len(data):
        end = data.index(b"\r\n", i)
        op, *args = data[i:end].decode().split()
        i = end + 2
        if op == "SUB":
            queue = args[1] if len(args) == 3 else None
            out.append(("SUB", args[0], queue, int(args[-1])))
        elif op == "UNSUB":
            out.append(("UNSUB", int(args[0])))
        elif op == "PUB":
            n = int(args[-1])
            reply = args[1] if len(args) == 3 else None
            out.append(("PUB", args[0], reply, None, data[i : i + n]))
            i += n + 2
        elif op == "HPUB":
            h, t = int(args[-2]), int(args[-1])
            reply = args[1] if len(args) == 4 else None
            headers = parse_headers(data[i : i + h])
            out.append(("PUB", args[0], reply, headers, data[i + h : i + t]))
            i += t + 2
        else:
            out.append((op,))
    return out


class Harness(ClientTestMixin, SynchronousTestCase):
    """A connected client on a fake server, and helpers to play requests."""

    def setUp(self) -> None:
        self.nc, self.server = self.connected()
        self.sids: dict[tuple[str, str | None], int] = {}
        self.out: list[tuple[Any, ...]] = []
        self.inbox = 0

    def read(self) -> list[tuple[Any, ...]]:
        """The frames the client wrote since the last read (SUBs are remembered)."""
        self.clock.advance(0)
        self.server.answer_pings()
        self.clock.advance(0)
        got = frames(self.server.transport.value())
        self.server.reset()
        for f in got:
            if f[0] == "SUB":
                self.sids[(f[1], f[2])] = f[3]
        self.out += got
        return got

    def sid(self, subject: str, queue: str | None = None) -> int:
        self.read()
        return self.sids[(subject, queue)]

    def request(
        self, subject: str, data: bytes = b"", queue: str | None = "q",
        headers: dict[str, str] | None = None, reply: str | None = "",
    ) -> str | None:
        """Deliver a request on ``subject`` (the subscription in ``queue``); return its
        reply subject."""
        sid = self.sid(subject, queue)
        if reply == "":
            self.inbox += 1
            reply = f"_INBOX.t.{self.inbox}"
        if headers:
            self.server.send(hmsg_frame(subject, sid, encode_headers(headers), data, reply))
        else:
            self.server.send(msg_frame(subject, sid, data, reply))
        self.clock.advance(0)
        return reply

    def replies(self, reply: str | None = None) -> list[tuple[Any, ...]]:
        """The PUB frames written since the last read (to ``reply`` if given)."""
        return [f for f in self.read() if f[0] == "PUB" and (reply is None or f[1] == reply)]

    def ask(self, verb: str, *, name: str | None = None, id: str | None = None) -> dict[str, Any]:
        """Send a monitoring request; return the decoded answer."""
        subject = control_subject(verb, name, id)
        reply = self.request(subject, queue=None)
        (answer,) = self.replies(reply)
        decoded: dict[str, Any] = json.loads(answer[4])
        return decoded


class ValidationTests(Harness):
    """Names, versions, subjects, queue groups and metadata are checked per ADR-32,
    with a clear ValueError from the txnats tree, before anything is subscribed."""

    def test_good_names_and_versions(self) -> None:
        """Names of letters, digits, '-' and '_', and semver.org versions, are taken."""
        for name in GOOD_NAMES:
            self.assertEqual(add_service(self.nc, name=name, version="1.0.0").name, name)
        for version in GOOD_VERSIONS:
            self.assertEqual(add_service(self.nc, name="v", version=version).version, version)

    def test_bad_service_names(self) -> None:
        """Every bad service name is refused, naming the rule; nothing is subscribed."""
        for name in BAD_NAMES:
            with self.assertRaises(InvalidServiceConfigError) as cm:
                add_service(self.nc, name=name, version="1.0.0")  # type: ignore[arg-type]
            self.assertIn("service name", str(cm.exception))
        self.assertEqual(self.read(), [])

    def test_bad_versions(self) -> None:
        """Every version that is not semver is refused with a message saying so."""
        for version in BAD_VERSIONS:
            with self.assertRaises(InvalidServiceConfigError) as cm:
                add_service(self.nc, name="svc", version=version)  # type: ignore[arg-type]
            self.assertIn("version", str(cm.exception))
        self.assertEqual(self.read(), [])

    def test_error_is_a_value_error_from_the_tree(self) -> None:
        """The error is a ValueError, an InvalidArgumentError and a NatsError."""
        with self.assertRaises(ValueError) as cm:
            add_service(self.nc, name="a.b", version="1.0.0")
        self.assertIsInstance(cm.exception, InvalidArgumentError)
        self.assertIsInstance(cm.exception, NatsError)
        self.assertIn("'a.b'", str(cm.exception))

    def test_bad_endpoint_arguments(self) -> None:
        """Bad endpoint names, subjects, queue groups, metadata and handlers are refused
        and leave the service without the endpoint."""
        svc = add_service(self.nc, name="svc", version="1.0.0")
        self.read()
        for name in BAD_NAMES:
            with self.assertRaises(InvalidServiceConfigError):
                svc.add_endpoint(name, lambda r: None)  # type: ignore[arg-type]
        for subject in BAD_SUBJECTS:
            with self.assertRaises(InvalidServiceConfigError):
                svc.add_endpoint("e", lambda r: None, subject=subject)  # type: ignore[arg-type]
        for queue in BAD_QUEUES:
            with self.assertRaises(InvalidServiceConfigError):
                svc.add_endpoint("e", lambda r: None, queue_group=queue)  # type: ignore[arg-type]
        for meta in BAD_METADATA:
            with self.assertRaises(InvalidServiceConfigError):
                svc.add_endpoint("e", lambda r: None, metadata=meta)
        with self.assertRaises(InvalidArgumentTypeError):
            svc.add_endpoint("e", "not callable")  # type: ignore[arg-type]
        self.assertEqual(svc.endpoints, [])
        self.assertEqual(self.read(), [])

    def test_bad_group_names_and_service_arguments(self) -> None:
        """Group names with '>' or whitespace, bad service queue groups and metadata,
        and a non-callable stats handler are refused."""
        svc = add_service(self.nc, name="svc", version="1.0.0")
        for name in BAD_GROUPS:
            with self.assertRaises(InvalidServiceConfigError):
                svc.add_group(name)  # type: ignore[arg-type]
        for queue in BAD_QUEUES:
            with self.assertRaises(InvalidServiceConfigError):
                add_service(self.nc, name="s", version="1.0.0", queue_group=queue)  # type: ignore[arg-type]
        for meta in BAD_METADATA:
            with self.assertRaises(InvalidServiceConfigError):
                add_service(self.nc, name="s", version="1.0.0", metadata=meta)
        with self.assertRaises(InvalidArgumentTypeError):
            add_service(self.nc, name="s", version="1.0.0", stats_handler=3)  # type: ignore[arg-type]
        with self.assertRaises(InvalidArgumentTypeError):
            add_service("nats://x", name="s", version="1.0.0")  # type: ignore[arg-type]

    def test_metadata_is_immutable(self) -> None:
        """Metadata is copied in; changing the caller's dict or the one read changes
        nothing."""
        meta = {"a": "1"}
        svc = add_service(self.nc, name="svc", version="1.0.0", metadata=meta)
        ep = svc.add_endpoint("e", lambda r: None, metadata=meta)
        meta["a"] = "2"
        svc.metadata["a"] = "3"
        ep.metadata["a"] = "4"
        self.assertEqual(svc.metadata, {"a": "1"})
        self.assertEqual(ep.metadata, {"a": "1"})

    def test_control_subjects(self) -> None:
        """$SRV.<VERB>[.<name>[.<id>]]; an id needs a name, verbs are the three."""
        self.assertEqual(control_subject("PING"), "$SRV.PING")
        self.assertEqual(control_subject("INFO", "svc"), "$SRV.INFO.svc")
        self.assertEqual(control_subject("STATS", "svc", "ID1"), "$SRV.STATS.svc.ID1")
        with self.assertRaises(InvalidServiceConfigError):
            control_subject("STATS", None, "ID1")
        with self.assertRaises(InvalidServiceConfigError):
            control_subject("PONG")
        with self.assertRaises(InvalidServiceConfigError):
            control_subject("PING", "a.b")


class SubscriptionTests(Harness):
    """What a service subscribes: nine monitoring subjects, and each endpoint on its
    subject in the queue group the service, group or endpoint says (or none)."""

    def test_monitoring_subjects(self) -> None:
        """PING, INFO and STATS for all, for the name, for the id; no queue group."""
        svc = add_service(self.nc, name="svc", version="1.0.0")
        subs = {(f[1], f[2]) for f in self.read() if f[0] == "SUB"}
        expected = {
            (f"$SRV.{verb}{tail}", None)
            for verb in ("PING", "INFO", "STATS")
            for tail in ("", ".svc", f".svc.{svc.id}")
        }
        self.assertEqual(subs, expected)

    def test_other_prefix(self) -> None:
        """prefix= moves the monitoring subjects (ADR-32: overridable like $JS); a
        prefix with wildcards or empty tokens is refused."""
        svc = add_service(self.nc, name="svc", version="1.0.0", prefix="$SRV.acct")
        subs = {f[1] for f in self.read() if f[0] == "SUB"}
        self.assertEqual(len(subs), 9)
        self.assertIn(f"$SRV.acct.STATS.svc.{svc.id}", subs)
        self.assertTrue(all(s.startswith("$SRV.acct.") for s in subs))
        self.assertEqual(control_subject("PING", "svc", prefix="X"), "X.PING.svc")
        for bad in ("", "a.*", ">", "a..b", "a b", ".a", 5):
            with self.assertRaises(InvalidServiceConfigError):
                add_service(self.nc, name="s", version="1.0.0", prefix=bad)  # type: ignore[arg-type]
            with self.assertRaises(InvalidServiceConfigError):
                control_subject("PING", prefix=bad)  # type: ignore[arg-type]
        self.assertEqual(self.read(), [])

    def test_queue_groups(self) -> None:
        """Default q; the service's, a group's and an endpoint's own queue group each
        win over the one above; None means a plain subscription."""
        svc = add_service(self.nc, name="svc", version="1.0.0")
        svc.add_endpoint("a", lambda r: None)
        svc.add_endpoint("b", lambda r: None, queue_group="mine")
        svc.add_endpoint("c", lambda r: None, queue_group=None)
        g = svc.add_group("g", queue_group="gq")
        g.add_endpoint("d", lambda r: None)
        g.add_endpoint("e", lambda r: None, subject="e.*", queue_group=None)
        nested = g.add_group("h")
        nested.add_endpoint("f", lambda r: None)
        nested.add_group("i", queue_group=None).add_endpoint("j", lambda r: None)
        other = add_service(self.nc, name="other", version="1.0.0", queue_group=None)
        other.add_endpoint("k", lambda r: None)
        other.add_group("x").add_endpoint("l", lambda r: None, queue_group=INHERIT)
        empty = svc.add_group("")
        empty.add_endpoint("m", lambda r: None)
        subs = {(f[1], f[2]) for f in self.read() if f[0] == "SUB" and not f[1].startswith("$")}
        self.assertEqual(subs, {
            ("a", "q"), ("b", "mine"), ("c", None), ("g.d", "gq"), ("g.e.*", None),
            ("g.h.f", "gq"), ("g.h.i.j", None), ("k", None), ("x.l", None), ("m", "q"),
        })
        info = {e.name: (e.subject, e.queue_group) for e in svc.info().endpoints}
        self.assertEqual(info["c"], ("c", ""))
        self.assertEqual(info["f"], ("g.h.f", "gq"))

    def test_closed_client(self) -> None:
        """add_service on a closed client fails with ConnectionClosedError."""
        self.nc.close()
        self.pump(self.server)
        with self.assertRaises(ConnectionClosedError):
            add_service(self.nc, name="svc", version="1.0.0")


class RequestTests(Harness):
    """Handlers get a Request; it is answered once; errors carry both headers."""

    def test_respond(self) -> None:
        """The handler sees subject, data and headers; respond() answers the reply."""
        seen: list[Request] = []

        def handler(req: Request) -> None:
            seen.append(req)
            req.respond(req.data.upper(), headers={"X-A": "1"})

        svc = add_service(self.nc, name="svc", version="1.0.0")
        svc.add_endpoint("up", handler)
        reply = self.request("up", b"hi", headers={"X-In": "v"})
        (req,) = seen
        self.assertEqual((req.subject, req.data, req.reply), ("up", b"hi", reply))
        self.assertEqual(req.headers, Headers({"X-In": "v"}))
        self.assertTrue(req.responded)
        self.assertIsNone(req.error)
        (out,) = self.replies(reply)
        self.assertEqual(out[4], b"HI")
        self.assertEqual(out[3], Headers({"X-A": "1"}))
        self.assertIn("Request on 'up'", repr(req))

    def test_responding_twice_is_refused(self) -> None:
        """A second respond() or respond_error() raises AlreadyRespondedError and sends
        nothing."""
        errors: list[Exception] = []

        def handler(req: Request) -> None:
            req.respond(b"one")
            for again in (lambda: req.respond(b"two"), lambda: req.respond_error(500, "x")):
                try:
                    again()
                except AlreadyRespondedError as e:
                    errors.append(e)

        svc = add_service(self.nc, name="svc", version="1.0.0")
        ep = svc.add_endpoint("once", handler)
        reply = self.request("once")
        self.assertEqual([f[4] for f in self.replies(reply)], [b"one"])
        self.assertEqual(len(errors), 2)
        self.assertEqual((ep.num_requests, ep.num_errors), (1, 0))

    def test_respond_error(self) -> None:
        """respond_error sets both headers over the caller's, sends data, counts."""
        svc = add_service(self.nc, name="svc", version="1.0.0")
        ep = svc.add_endpoint(
            "bad",
            lambda r: r.respond_error(
                404, "not\r\nfound", b"body", headers={"X-Keep": "k", ERROR_HEADER: "old"}
            ),
        )
        reply = self.request("bad")
        (out,) = self.replies(reply)
        self.assertEqual(out[4], b"body")
        self.assertEqual(out[3][ERROR_HEADER], "not found")
        self.assertEqual(out[3].get_all(ERROR_HEADER), ["not found"])
        self.assertEqual(out[3][ERROR_CODE_HEADER], "404")
        self.assertEqual(out[3]["X-Keep"], "k")
        self.assertEqual((ep.num_requests, ep.num_errors, ep.last_error), (1, 1, "404:not found"))

    def test_respond_error_argument_types(self) -> None:
        """A code that is not an int, or a description that is not a str, is refused
        before anything is sent (the request can still be answered)."""
        outcomes: list[str] = []

        def handler(req: Request) -> None:
            for code, description in (("500", "x"), (True, "x"), (500, b"x")):
                try:
                    req.respond_error(code, description)  # type: ignore[arg-type]
                except InvalidArgumentTypeError:
                    outcomes.append("refused")
            req.respond(b"ok")

        add_service(self.nc, name="svc", version="1.0.0").add_endpoint("e", handler)
        reply = self.request("e")
        self.assertEqual(outcomes, ["refused"] * 3)
        self.assertEqual([f[4] for f in self.replies(reply)], [b"ok"])

    def test_exception_becomes_500(self) -> None:
        """A handler that raises answers 500 with the exception named, is counted and
        logged."""
        def handler(req: Request) -> None:
            raise ZeroDivisionError("division by zero")

        svc = add_service(self.nc, name="svc", version="1.0.0")
        ep = svc.add_endpoint("e", handler)
        reply = self.request("e")
        (out,) = self.replies(reply)
        self.assertEqual(out[3][ERROR_CODE_HEADER], "500")
        self.assertEqual(out[3][ERROR_HEADER], "ZeroDivisionError: division by zero")
        self.assertEqual((ep.num_errors, ep.last_error),
                         (1, "500:ZeroDivisionError: division by zero"))
        self.assertEqual(len(self.flushLoggedErrors(ZeroDivisionError)), 1)

    def test_service_error(self) -> None:
        """A ServiceError raised answers with its code, description and data, and is
        not logged as a failure."""
        def handler(req: Request) -> None:
            raise ServiceError(400, "bad input", b"{}")

        ep = add_service(self.nc, name="svc", version="1.0.0").add_endpoint("e", handler)
        (out,) = self.replies(self.request("e"))
        self.assertEqual((out[3][ERROR_CODE_HEADER], out[3][ERROR_HEADER], out[4]),
                         ("400", "bad input", b"{}"))
        self.assertEqual(ep.last_error, "400:bad input")
        self.assertEqual(self.flushLoggedErrors(), [])

    def test_bad_service_error(self) -> None:
        """A ServiceError built with a code that is not an int (nats-py's "409" say)
        fails as it is made; the request is still answered, with 500."""
        def handler(req: Request) -> None:
            raise ServiceError("409", "conflict")  # type: ignore[arg-type]

        ep = add_service(self.nc, name="svc", version="1.0.0").add_endpoint("e", handler)
        (out,) = self.replies(self.request("e"))
        self.assertEqual(out[3][ERROR_CODE_HEADER], "500")
        self.assertIn("InvalidArgumentTypeError: code must be a whole number", out[3][ERROR_HEADER])
        self.assertEqual(ep.num_errors, 1)
        self.assertEqual(len(self.flushLoggedErrors(InvalidArgumentTypeError)), 1)
        for bad in ((400, b"x"), (400, "x", "data")):
            with self.assertRaises(InvalidArgumentTypeError):
                ServiceError(*bad)  # type: ignore[arg-type]

    def test_exception_after_responding(self) -> None:
        """A handler that answered and then raised sends nothing more; it counts."""
        def handler(req: Request) -> None:
            req.respond(b"done")
            raise KeyError("late")

        ep = add_service(self.nc, name="svc", version="1.0.0").add_endpoint("e", handler)
        self.assertEqual([f[4] for f in self.replies(self.request("e"))], [b"done"])
        self.assertEqual(ep.num_errors, 1)
        self.assertEqual(len(self.flushLoggedErrors(KeyError)), 1)

    def test_request_without_reply(self) -> None:
        """A request without a reply subject: respond() raises NoReplySubjectError,
        the endpoint counts an error that says the reply was not sent."""
        ep = add_service(self.nc, name="svc", version="1.0.0").add_endpoint(
            "e", lambda r: r.respond(b"x")
        )
        self.request("e", reply=None)
        self.assertEqual(self.replies(), [])
        self.assertEqual(ep.num_errors, 1)
        self.assertIn("not sent", ep.last_error)
        self.assertEqual(len(self.flushLoggedErrors(NoReplySubjectError)), 1)

    def test_deferred_handler(self) -> None:
        """A handler returning a Deferred: the request is handled (and timed) when it
        fires; with concurrency 1 the next waits for it."""
        pending: list[tuple[Request, Deferred[None]]] = []

        def handler(req: Request) -> Deferred[None]:
            d: Deferred[None] = Deferred()
            pending.append((req, d))
            return d

        ep = add_service(self.nc, name="svc", version="1.0.0").add_endpoint("e", handler)
        r1 = self.request("e", b"1")
        r2 = self.request("e", b"2")
        self.assertEqual(len(pending), 1)
        req, d = pending[0]
        req.respond(b"one")
        d.callback(None)
        self.clock.advance(0)
        self.assertEqual(len(pending), 2)
        pending[1][1].errback(ServiceError(503, "later"))
        self.clock.advance(0)
        out = {f[1]: f for f in self.replies()}
        self.assertEqual(out[r1][4], b"one")
        self.assertEqual(out[r2][3][ERROR_CODE_HEADER], "503")
        self.assertEqual((ep.num_requests, ep.num_errors), (2, 1))

    def test_coroutine_handler(self) -> None:
        """An async def handler is awaited: it may wait, then answer."""
        gate: Deferred[None] = Deferred()

        async def handler(req: Request) -> None:
            await gate
            req.respond(b"after")

        ep = add_service(self.nc, name="svc", version="1.0.0").add_endpoint("e", handler)
        reply = self.request("e")
        self.assertEqual(self.replies(reply), [])
        self.assertEqual(ep.processing_time, 0)
        gate.callback(None)
        self.assertEqual([f[4] for f in self.replies(reply)], [b"after"])
        self.assertGreater(ep.processing_time, 0)

    def test_failing_coroutine(self) -> None:
        """A coroutine that raises answers 500."""
        async def handler(req: Request) -> None:
            raise RuntimeError("no")

        add_service(self.nc, name="svc", version="1.0.0").add_endpoint("e", handler)
        (out,) = self.replies(self.request("e"))
        self.assertEqual(out[3][ERROR_HEADER], "RuntimeError: no")
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_concurrency(self) -> None:
        """concurrency=N lets N handler calls run at once, not N+1."""
        running: list[Deferred[None]] = []

        def handler(req: Request) -> Deferred[None]:
            d: Deferred[None] = Deferred()
            d.addCallback(lambda _: req.respond(b"ok"))
            running.append(d)
            return d

        ep = add_service(self.nc, name="svc", version="1.0.0").add_endpoint(
            "e", handler, concurrency=3
        )
        for _ in range(5):
            self.request("e")
        self.assertEqual(len(running), 3)
        running[0].callback(None)
        self.clock.advance(0)
        self.assertEqual(len(running), 4)
        for d in running[1:]:
            d.callback(None)
        self.clock.advance(0)
        running[-1].callback(None)
        self.clock.advance(0)
        self.assertEqual(len(self.replies()), 5)
        self.assertEqual(ep.num_requests, 5)
        with self.assertRaises(InvalidArgumentError):
            add_service(self.nc, name="s", version="1.0.0").add_endpoint(
                "e", handler, concurrency=0
            )


class MonitoringTests(Harness):
    """PING, INFO and STATS answers: the ADR-32 JSON, validated against the schemas."""

    def service(self, **kwargs: Any) -> Any:
        svc = add_service(
            self.nc, name="svc", version="1.2.3-rc.1", description="a test service",
            metadata={"region": "eu"}, **kwargs,
        )
        svc.add_endpoint("ok", lambda r: r.respond(b"ok"), metadata={"k": "v"})
        svc.add_group("g").add_endpoint("fail", lambda r: r.respond_error(418, "teapot"))
        return svc

    def test_ping_at_every_level(self) -> None:
        """The service answers $SRV.PING, $SRV.PING.svc and $SRV.PING.svc.<id>."""
        svc = self.service()
        for name, id in ((None, None), ("svc", None), ("svc", svc.id)):
            answer = self.ask("PING", name=name, id=id)
            validate(answer, "io.nats.micro.v1.ping_response")
            self.assertEqual(answer, {
                "type": "io.nats.micro.v1.ping_response", "name": "svc", "id": svc.id,
                "version": "1.2.3-rc.1", "metadata": {"region": "eu"},
            })

    def test_info(self) -> None:
        """INFO lists every endpoint with subject, queue group and metadata."""
        svc = self.service()
        later = svc.add_endpoint("later", lambda r: None, queue_group=None)
        answer = self.ask("INFO", name="svc")
        validate(answer, "io.nats.micro.v1.info_response")
        self.assertEqual(answer["description"], "a test service")
        self.assertEqual(answer["endpoints"], [
            {"name": "ok", "subject": "ok", "queue_group": "q", "metadata": {"k": "v"}},
            {"name": "fail", "subject": "g.fail", "queue_group": "q", "metadata": {}},
            {"name": "later", "subject": "later", "queue_group": "", "metadata": {}},
        ])
        self.assertEqual(InfoResponse.from_dict(answer), svc.info())
        self.assertEqual(svc.endpoints[-1], later)

    def test_stats_count_and_reset(self) -> None:
        """STATS counts requests, errors and time per endpoint; reset() zeroes them
        and moves ``started``."""
        svc = self.service()
        for _ in range(3):
            self.request("ok")
        self.request("g.fail")
        answer = self.ask("STATS", name="svc", id=svc.id)
        validate(answer, "io.nats.micro.v1.stats_response")
        ok, fail = answer["endpoints"]
        self.assertEqual((ok["num_requests"], ok["num_errors"], ok["last_error"]), (3, 0, ""))
        self.assertEqual((fail["num_requests"], fail["num_errors"], fail["last_error"]),
                         (1, 1, "418:teapot"))
        self.assertGreater(ok["processing_time"], 0)
        self.assertEqual(ok["average_processing_time"], ok["processing_time"] // 3)
        self.assertIsNone(ok["data"])
        self.assertEqual(parse_time(answer["started"]), svc.started)
        before = svc.started
        svc.reset()
        answer = self.ask("STATS", name="svc")
        for e in answer["endpoints"]:
            self.assertEqual(
                (e["num_requests"], e["num_errors"], e["last_error"], e["processing_time"],
                 e["average_processing_time"]), (0, 0, "", 0, 0),
            )
        self.assertGreaterEqual(svc.started, before)

    def test_stats_handler(self) -> None:
        """The stats handler's result is each endpoint's ``data``; one that raises or
        returns what JSON cannot hold gives null and is logged."""
        def data(endpoint: Any) -> Any:
            if endpoint.name == "fail":
                raise ValueError("stats broke")
            return {"seen": endpoint.num_requests, "name": endpoint.name}

        svc = self.service(stats_handler=data)
        self.request("ok")
        answer = self.ask("STATS")
        validate(answer)
        self.assertEqual([e["data"] for e in answer["endpoints"]],
                         [{"seen": 1, "name": "ok"}, None])
        self.assertEqual(svc.stats().endpoints[0].data, {"seen": 1, "name": "ok"})
        self.assertEqual(len(self.flushLoggedErrors(ValueError)), 2)
        odd = add_service(self.nc, name="odd", version="1.0.0", stats_handler=lambda e: {1, 2})
        odd.add_endpoint("x", lambda r: None)
        self.assertIsNone(odd.stats().endpoints[0].data)
        self.assertEqual(len(self.flushLoggedErrors(TypeError)), 1)

    def test_monitoring_without_reply_is_ignored(self) -> None:
        """A PING without a reply subject is not answered and breaks nothing."""
        self.service()
        self.request("$SRV.PING", queue=None, reply=None)
        self.assertEqual(self.replies(), [])
        self.ask("PING")


class StopTests(Harness):
    """stop() drains endpoints and monitoring; a closed client stops the service."""

    def test_stop_drains_and_fires_when_stopped(self) -> None:
        """A request in progress is finished and answered after stop(); stop()'s
        Deferred and when_stopped() fire once every subscription drained; no new
        endpoint is taken."""
        gate: Deferred[None] = Deferred()

        def handler(req: Request) -> Deferred[None]:
            return gate.addCallback(lambda _: req.respond(b"finished"))

        svc = add_service(self.nc, name="svc", version="1.0.0")
        svc.add_endpoint("slow", handler)
        reply = self.request("slow")
        stopped = svc.when_stopped()
        done = svc.stop()
        again = svc.stop()
        self.assertTrue(svc.is_stopped)
        unsubs = [f for f in self.read() if f[0] == "UNSUB"]
        self.assertEqual(len(unsubs), 10)
        self.assertNoResult(done)
        self.assertNoResult(stopped)
        gate.callback(None)
        self.assertEqual([f[4] for f in self.replies(reply)], [b"finished"])
        self.assertIsNone(self.successResultOf(done))
        self.assertIsNone(self.successResultOf(again))
        self.assertIsNone(self.successResultOf(stopped))
        self.assertIsNone(self.successResultOf(svc.when_stopped()))
        self.assertFalse(svc.endpoints[0].is_active)
        with self.assertRaises(ServiceStoppedError):
            svc.add_endpoint("late", lambda r: None)

    def test_stop_with_timeout(self) -> None:
        """stop(timeout=) fires after the timeout when a handler never finishes; the
        unfinished drain is logged, not raised; a bad timeout stops nothing."""
        svc = add_service(self.nc, name="svc", version="1.0.0")
        svc.add_endpoint("stuck", lambda r: Deferred())
        self.request("stuck")
        for bad in (0, -1, float("nan"), "1"):
            with self.assertRaises(InvalidArgumentError):
                svc.stop(timeout=bad)  # type: ignore[arg-type]
        self.assertFalse(svc.is_stopped)
        done = svc.stop(timeout=2.0)
        self.read()
        self.assertNoResult(done)
        self.clock.advance(2.0)
        self.assertIsNone(self.successResultOf(done))
        self.assertIsNone(self.successResultOf(svc.when_stopped()))

    def test_stop_with_error(self) -> None:
        """stop(error) hands the error to when_stopped() waiters."""
        svc = add_service(self.nc, name="svc", version="1.0.0")
        stopped = svc.when_stopped()
        boom = RuntimeError("shutting down")
        svc.stop(boom)
        self.read()
        self.assertIs(self.successResultOf(stopped), boom)
        self.assertIn("stopped", repr(svc))

    def test_client_close_stops_the_service(self) -> None:
        """Closing the client stops every service on it: when_stopped() fires with
        ConnectionClosedError."""
        a = add_service(self.nc, name="a", version="1.0.0")
        b = add_service(self.nc, name="b", version="1.0.0")
        b.add_endpoint("e", lambda r: None)
        waits = [a.when_stopped(), b.when_stopped()]
        self.nc.close()
        self.pump(self.server)
        for d in waits:
            self.assertIsInstance(self.successResultOf(d), ConnectionClosedError)
        self.assertTrue(a.is_stopped and b.is_stopped)

    def test_stopped_service_ignores_client_close(self) -> None:
        """A service stopped before its client closes keeps its own reason."""
        svc = add_service(self.nc, name="svc", version="1.0.0")
        svc.stop()
        self.read()
        self.nc.close()
        self.pump(self.server)
        self.assertIsNone(self.successResultOf(svc.when_stopped()))


class ResponseTests(SynchronousTestCase):
    """The typed responses read what nats.go and nats-py write and write ADR-32."""

    def test_time_formats(self) -> None:
        """Times are written with microseconds and Z; read with up to nanoseconds,
        without a fraction, or with an offset."""
        when = datetime(2026, 12, 3, 12, 0, 1, 123456, tzinfo=UTC)
        self.assertEqual(format_time(when), "2026-12-03T12:00:01.123456Z")
        self.assertEqual(parse_time("2026-12-03T12:00:01.123456789Z"), when)
        self.assertEqual(parse_time("2026-12-03T12:00:01.123456Z"), when)
        self.assertEqual(parse_time("2026-12-03T12:00:01Z"), when.replace(microsecond=0))
        self.assertEqual(parse_time("2026-12-03T14:00:01.123456+02:00"), when)
        for bad in ("2026-12-03 12:00:01Z", "yesterday", "", 5):
            with self.assertRaises(InvalidResponseError):
                parse_time(bad)  # type: ignore[arg-type]

    def test_lenient_reading(self) -> None:
        """null metadata and description, missing data and queue_group, are read."""
        ping = PingResponse.from_dict(
            {"type": "io.nats.micro.v1.ping_response", "name": "n", "id": "i",
             "version": "1.0.0", "metadata": None}
        )
        self.assertEqual(ping.metadata, {})
        info = InfoResponse.from_dict({
            "type": "io.nats.micro.v1.info_response", "name": "n", "id": "i",
            "version": "1.0.0", "metadata": {}, "description": None,
            "endpoints": [{"name": "e", "subject": "s", "metadata": None}],
        })
        self.assertEqual((info.description, info.endpoints[0].queue_group), ("", ""))
        stats = StatsResponse.from_dict({
            "type": "io.nats.micro.v1.stats_response", "name": "n", "id": "i",
            "version": "1.0.0", "started": "2026-12-03T12:00:01.5Z", "endpoints": [
                {"name": "e", "subject": "s", "queue_group": "q", "num_requests": 2,
                 "num_errors": 0, "last_error": "", "processing_time": 10,
                 "average_processing_time": 5},
            ],
        })
        self.assertEqual(stats.endpoints[0], EndpointStats("e", "s", "q", 2, 0, "", 10, 5))

    def test_round_trip(self) -> None:
        """to_dict() validates against the schemas and reads back equal."""
        when = datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=UTC)
        stats = StatsResponse("n", "i", "1.0.0", when, (EndpointStats("e", "s", "q", data=[1]),))
        validate(stats.to_dict())
        self.assertEqual(StatsResponse.from_dict(stats.to_dict()), stats)
        ping = PingResponse("n", "i", "1.0.0", {"a": "b"})
        validate(ping.to_dict())
        self.assertEqual(PingResponse.from_dict(ping.to_dict()), ping)

    def test_malformed(self) -> None:
        """Wrong types, a wrong ``type`` or a non-object raise InvalidResponseError
        (a ValueError)."""
        base = {"type": "io.nats.micro.v1.ping_response", "name": "n", "id": "i",
                "version": "1.0.0", "metadata": {}}
        for bad in (
            [], "x", {**base, "type": "io.nats.micro.v1.info_response"},
            {**base, "name": 3}, {**base, "metadata": {"a": 1}}, {**base, "metadata": []},
        ):
            with self.assertRaises(ValueError):
                PingResponse.from_dict(bad)
        stats = {**base, "type": "io.nats.micro.v1.stats_response", "started": "x",
                 "endpoints": []}
        with self.assertRaises(InvalidResponseError):
            StatsResponse.from_dict(stats)
        stats["started"] = "2026-12-03T12:00:01Z"
        for endpoints in ("x", [3], [{"name": "e", "subject": "s", "num_requests": "1"}],
                          [{"name": "e", "subject": "s", "num_errors": True}]):
            with self.assertRaises(InvalidResponseError):
                StatsResponse.from_dict({**stats, "endpoints": endpoints})
        with self.assertRaises(InvalidResponseError):
            InfoResponse.from_dict({**base, "type": "io.nats.micro.v1.info_response",
                                    "endpoints": [7]})


class PublicSurfaceTests(SynchronousTestCase):
    """What ``txnats.micro`` exports, its errors' places in the tree, and that the
    client does not load it."""

    def test_exports(self) -> None:
        """The names are exactly the documented ones (a change here is an API change)."""
        import txnats.micro as m

        self.assertEqual(set(m.__all__), {
            "API_PREFIX", "DEFAULT_QUEUE_GROUP", "ERROR_CODE_HEADER", "ERROR_HEADER",
            "INFO_RESPONSE_TYPE", "INHERIT", "PING_RESPONSE_TYPE", "STATS_RESPONSE_TYPE",
            "AlreadyRespondedError", "Endpoint", "EndpointInfo", "EndpointStats", "ErrorHandler",
            "Group",
            "Handler", "InfoResponse", "InvalidResponseError", "InvalidServiceConfigError",
            "PingResponse", "Request", "Service", "ServiceError", "ServiceStoppedError",
            "StatsHandler", "StatsResponse", "add_service", "control_subject", "info",
            "ping", "stats",
        })
        for name in m.__all__:
            self.assertTrue(hasattr(m, name), name)
        self.assertEqual((m.DEFAULT_QUEUE_GROUP, m.API_PREFIX), ("q", "$SRV"))
        self.assertEqual((m.ERROR_HEADER, m.ERROR_CODE_HEADER),
                         ("Nats-Service-Error", "Nats-Service-Error-Code"))

    def test_error_tree(self) -> None:
        """Every error is a NatsError; the bad-input ones are ValueErrors too."""
        for cls in (AlreadyRespondedError, InvalidResponseError, InvalidServiceConfigError,
                    ServiceError, ServiceStoppedError):
            self.assertTrue(issubclass(cls, NatsError), cls)
        self.assertTrue(issubclass(InvalidServiceConfigError, InvalidArgumentError))
        self.assertTrue(issubclass(InvalidServiceConfigError, ValueError))
        self.assertTrue(issubclass(InvalidResponseError, ValueError))

    def test_client_does_not_import_micro(self) -> None:
        """No module of the client (txnats outside the packages built on it: micro,
        cli, bridge) imports txnats.micro: the service API is built on the client,
        never the reverse."""
        root = Path(txnats.__file__).resolve().parent
        offenders = []
        for path in root.rglob("*.py"):
            rel = path.relative_to(root).parts
            if rel[0] in ("micro", "cli", "bridge"):
                continue
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = []
                if isinstance(node, ast.ImportFrom) and node.module:
                    names = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                elif isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                if any(n == "txnats.micro" or n.startswith("txnats.micro.") for n in names):
                    offenders.append(f"{'/'.join(rel)}:{node.lineno}")
        self.assertEqual(offenders, [])
