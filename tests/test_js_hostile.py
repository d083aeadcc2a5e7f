"""Bytes a server merely relays are not trusted.

Another client may publish anything to the subjects JetStream readers consume: object
metadata (``$O.<bucket>.M.<name>``) that is not JSON, nests past Python's stack or holds
numbers no int holds; a reply subject that looks like ``$JS.ACK`` with the wrong tokens;
status messages whose count headers are not numbers; an ordered consumer's inbox; a
foreign responder on ``$JS.API.>`` answering with anything. None of it may raise inside
a delivery, end a reader silently or take the connection down: each is reported
(``error_cb``) and skipped, or becomes the call's typed error.

Unit tests feed the bytes over a fake wire; the integration tests publish them to a
real ``nats-server`` with the client's own publish.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

from twisted.internet.defer import Deferred, ensureDeferred
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from txnats import micro
from txnats.errors import (
    APIError,
    JetStreamError,
    NatsError,
    ObjectStoreError,
    StreamNotFoundError,
)
from txnats.jetstream import ConsumerInfo, JsMsg, OrderedConsumer, StreamInfo
from txnats.jetstream._api import api_error
from txnats.jetstream._kv_entry import time_from_ns
from txnats.jetstream._obj_info import ObjectInfo, encode_name
from txnats.protocol.events import Msg

from .support.jetstream import JsHarness, ack_subject, status_block
from .support.rawclient import hpub, send_raw
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor, sleep
from .support.wire import hmsg_frame, msg_frame

#: JSON nested deeper than Python's recursion limit: json.loads raises RecursionError.
DEEP = b"[" * 100_000 + b"]" * 100_000

#: Object metadata another client could publish, none of it an object's info.
BAD_META = [
    b"not json",
    DEEP,
    b'{"name": "x", "size": 1e400}',  # inf: int() raises OverflowError
    b'{"name": "x", "chunks": -1e400}',
    b'{"name": "x", "options": "not an object"}',
    b'{"name": "x", "metadata": [1, 2]}',
    b'["a", "list"]',
    b'{"size": 1}',  # no name
]


class RelayedBytesUnitTests(JsHarness, SynchronousTestCase):
    """Over a fake wire."""

    def test_reply_subject_tokens(self) -> None:
        """A ``$JS.ACK`` reply with the wrong number of tokens, or tokens that are not
        plain ASCII digits (a sign, an underscore, another script's digits, a
        superscript, 5,000 digits), is no JetStream delivery: metadata raises
        JetStreamError. (int() took '-2', '1_0' and '٣'.)"""
        good = "$JS.ACK.S.C.1.2.3.1700000000000000000.0"
        bad = [
            "$JS.ACK.S.C.1.2.3.4",  # 8 tokens
            "$JS.ACK.S.C.1.2.3.4.5.6",  # 10 tokens
            "$JS.ACK.S.C.1.-2.3.4.5",
            "$JS.ACK.S.C.1.1_0.3.4.5",
            "$JS.ACK.S.C.1.٣.3.4.5",
            "$JS.ACK.S.C.1.².3.4.5",
            "$JS.ACK.S.C.1.2." + "9" * 5000 + ".4.5",
            "$JS.ACK.D.A.S.C.1.+2.3.4.5.x",  # v2, 12 tokens
            "$JS.ACK.S.C.1.2.3.4.",
        ]
        self.assertEqual(JsMsg(Msg("s", good, b"", None, 1), self.client).metadata.sequence.stream,
                         2)
        problems = []
        for reply in bad:
            m = JsMsg(Msg("s", reply, b"", None, 1), self.client)
            try:
                meta = m.metadata
            except JetStreamError:
                continue
            except Exception as e:
                problems.append(f"{reply[:40]}: {e!r}")
            else:
                problems.append(f"{reply[:40]}: accepted as {meta}")
        self.assertEqual(problems, [])

    def test_object_meta_not_an_info(self) -> None:
        """Each bad metadata payload is an ObjectStoreError, never another exception
        (RecursionError, OverflowError used to escape)."""
        problems = []
        for data in BAD_META:
            try:
                ObjectInfo.from_json(data)
            except ObjectStoreError:
                continue
            except BaseException as e:
                problems.append(f"{data[:30]!r}: {type(e).__name__}")
            else:
                problems.append(f"{data[:30]!r}: accepted")
        self.assertEqual(problems, [])

    def test_times_no_datetime_holds(self) -> None:
        """A delivery's timestamp past the year 9999 gives no time, not an error."""
        self.assertIsNone(time_from_ns(10**30))
        self.assertIsNone(time_from_ns(-(10**30)))
        self.assertEqual(time_from_ns(1_700_000_000_000_000_000).year, 2023)

    def test_api_answers_of_the_wrong_types(self) -> None:
        """Typed infos read from answers with wrong-typed fields keep their defaults
        (no AttributeError when code reads info.delivered.consumer_seq); an answer that
        is no object, and malformed error objects, give JetStream errors."""
        info = ConsumerInfo.from_json({
            "name": 7, "num_pending": "many", "delivered": "x", "config": [],
            "created": 5, "cluster": "c", "push_bound": "yes",
        })
        self.assertEqual((info.name, info.num_pending, info.delivered.consumer_seq),
                         ("", 0, 0))
        self.assertIsNone(info.config.ack_wait)
        self.assertEqual((info.created, info.cluster, info.push_bound), (None, None, False))
        s = StreamInfo.from_json({"config": {"name": "S", "max_age": "1h", "subjects": "a"},
                                  "state": {"messages": "lots", "deleted": "x"}})
        self.assertEqual((s.config.max_age, s.config.subjects, s.state.messages),
                         (None, None, 0))
        with self.assertRaises(JetStreamError):
            StreamInfo.from_json("not an object")  # type: ignore[arg-type]
        for resp in ({"error": "a string"}, {"error": {"err_code": "abc", "code": "x"}},
                     {"error": [1]}, {"error": {"description": {"deep": 1}}}):
            e = api_error(resp)
            self.assertIsInstance(e, APIError)
            self.assertEqual(e.err_code, 0)

    def started_ordered(self) -> tuple[OrderedConsumer, str, int, str, list[JsMsg]]:
        got: list[JsMsg] = []
        oc = OrderedConsumer(self.js, "S", got.append, heartbeat=1.0)
        d = oc.start()
        frames = self.written()
        [req] = [f for f in frames if f.op == "PUB" and ".CONSUMER.CREATE." in f.subject]
        cfg = req.json()["config"]
        [sub] = [f for f in frames if f.op == "SUB" and f.subject == cfg["deliver_subject"]]
        self.answer(req, {"name": cfg["name"], "num_pending": 0})
        self.successResultOf(d)
        self.addCleanup(oc.stop)
        return oc, sub.subject, sub.sid, cfg["name"], got

    def test_ordered_heartbeat_counts_not_numbers(self) -> None:
        """Heartbeats whose Nats-Last-Consumer is no number ('²' passed isdigit() and
        made int() raise inside the delivery) are ignored: no reset, no error, and the
        next delivery comes through."""
        errors: list[Exception] = []
        self.client.options.error_cb = errors.append
        oc, inbox, sid, name, got = self.started_ordered()
        for last in ("²", "٣", "-1", "x", "9" * 5000):
            self.send(hmsg_frame(inbox, sid, status_block(
                100, "Idle Heartbeat", Nats_Last_Consumer=last)))
        self.send(msg_frame(inbox, sid, b"m1", reply=ack_subject("S", name, 1, 1)))
        self.clock.advance(0)
        self.assertEqual(([m.data for m in got], oc.resets, errors), ([b"m1"], 0, []))

    def test_ordered_foreign_message_reported(self) -> None:
        """A message in an ordered consumer's inbox that is no delivery (another
        client's publish: no reply, or a bogus $JS.ACK one) is skipped and reported to
        error_cb; the consumer goes on."""
        errors: list[Exception] = []
        self.client.options.error_cb = errors.append
        oc, inbox, sid, name, got = self.started_ordered()
        self.send(msg_frame(inbox, sid, b"x"))
        self.send(msg_frame(inbox, sid, b"y", reply="$JS.ACK.S.C.x"))
        self.send(msg_frame(inbox, sid, b"m1", reply=ack_subject("S", name, 1, 1)))
        self.clock.advance(0)
        self.assertEqual([m.data for m in got], [b"m1"])
        self.assertEqual([type(e) for e in errors], [JetStreamError, JetStreamError])
        self.assertIn("no JetStream delivery", str(errors[0]))
        self.assertEqual(oc.resets, 0)

    def test_consume_status_counts_not_numbers(self) -> None:
        """A 408 whose Nats-Pending-Messages/Bytes are not numbers ('²', '٣') is read
        as giving nothing back (int() raised inside the delivery); the pull goes on."""
        errors: list[NatsError] = []
        got: list[JsMsg] = []
        ctx = self.js.pull_consumer("S", "P").consume(got.append, error_cb=errors.append,
                                                      max_messages=10, expires=2)
        self.addCleanup(ctx.stop)
        frames = self.written()
        [sub] = [f for f in frames if f.op == "SUB"]
        for value in ("²", "٣", "x"):
            self.send(hmsg_frame(sub.subject, sub.sid, status_block(
                408, "Request Timeout", Nats_Pending_Messages=value, Nats_Pending_Bytes=value)))
        self.assertEqual(errors, [])
        self.assertTrue(ctx.is_active)


class RelayedBytesIntegrationTests(ServerPerClass, TestCase):
    """Against ``nats-server -js``: bytes published by a client of our own."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 60

    async def test_object_meta_from_another_client(self) -> None:
        """Malformed metadata published to ``$O.<bucket>.M.<name>``: a watcher and a
        listing skip each with an ObjectStoreError to error_cb (RecursionError and
        OverflowError escaped the delivery, as HandlerErrors), and give the real
        object; the connection stays up."""
        assert self.server is not None
        errors: list[Exception] = []
        nc = await bounded(txnats.connect(reactor, self.server.url, error_cb=errors.append))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream()
        obs = await bounded(js.create_object_store("HOSTILE", storage="memory"))
        w = await bounded(obs.watch(updates_only=True))
        self.addCleanup(w.stop)
        self.assertIsNone(await bounded(w.next_update(timeout=5)))
        for i, data in enumerate(BAD_META):
            await bounded(js.publish(f"$O.HOSTILE.M.{encode_name(f'bad{i}')}", data))
        await bounded(obs.put("real", b"data"))
        info = await bounded(w.next_update(timeout=5))
        self.assertEqual(info.name if info else None, "real")
        listed = await bounded(obs.list())
        self.assertEqual([i.name for i in listed], ["real"])
        await sleep(0.1)  # (the reports come in the client's next batch)
        self.assertEqual(len(errors), 2 * len(BAD_META), errors)
        for e in errors:
            self.assertIsInstance(e, ObjectStoreError)
        self.assertTrue(nc.is_connected)


class ForeignResponderTests(ServerPerClass, TestCase):
    """A server without JetStream and a foreign client answering ``$JS.API.>``: every
    JetStream call ends with a result or a NatsError, never another exception, and
    the connection stays up."""

    server_options: ClassVar[dict[str, Any]] = {}
    timeout = 60

    ANSWERS: ClassVar[list[bytes]] = [
        b"not json",
        DEEP,
        b"[]",
        b'{"error": "a string"}',
        b'{"error": {"err_code": "abc", "code": "x", "description": 5}}',
        json.dumps({"config": [], "state": "x", "streams": "abc", "total": "many",
                    "consumers": {"a": 1}, "success": "yes", "purged": "all",
                    "num_pending": "x", "delivered": "y", "name": 5}).encode(),
        json.dumps({"type": "io.nats.jetstream.api.v1.stream_info_response",
                    "config": {"name": "KV_B", "max_msgs_per_subject": "ten",
                               "allow_direct": "maybe"},
                    "state": {"messages": -1, "bytes": "many"},
                    "streams": [5, None, "KV_B", {"x": 1}], "total": 1}).encode(),
    ]

    async def test_garbage_answers(self) -> None:
        assert self.server is not None
        foreign = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(lambda: bounded(foreign.close()))
        answer = {"i": 0}

        def respond(msg: Msg) -> None:
            msg.respond(self.ANSWERS[answer["i"]])

        foreign.subscribe("$JS.API.>", respond)
        await bounded(foreign.flush())
        errors: list[Exception] = []
        nc = await bounded(txnats.connect(reactor, self.server.url, error_cb=errors.append))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream(timeout=2.0)
        calls: dict[str, Any] = {
            "account_info": js.account_info,
            "stream_info": lambda: js.stream_info("S"),
            "consumer_info": lambda: js.consumer_info("S", "C"),
            "stream_names": js.stream_names,
            "streams": lambda: js.streams().all(),
            "consumers": lambda: js.consumers("S").all(),
            "delete_stream": lambda: js.delete_stream("S"),
            "purge_stream": lambda: js.purge_stream("S"),
            "add_stream": lambda: js.add_stream(name="S", subjects=["s"]),
            "key_value": lambda: js.key_value("B"),
            "kv status": lambda: js.key_value("B").addCallback(lambda kv: kv.status()),
            "object_store": lambda: js.object_store("O"),
            "key_value_names": js.key_value_names,
            "ordered_consumer": lambda: js.ordered_consumer("S", max_resets=1),
            "get_msg": lambda: js.get_msg("S", 1),
        }
        problems = []
        for i in range(len(self.ANSWERS)):
            answer["i"] = i
            for label, call in calls.items():
                d = call()
                d = d if isinstance(d, Deferred) else ensureDeferred(d)
                try:
                    result = await bounded(d, 10)
                except NatsError:
                    continue
                except Exception as e:
                    problems.append(f"answer {i}, {label}: {type(e).__name__}: {e}")
                else:
                    stop = getattr(result, "stop", None)
                    if callable(stop):
                        stop()
        self.assertEqual(problems, [])
        self.assertTrue(nc.is_connected)
        unexpected = [e for e in errors if not isinstance(e, NatsError)]
        self.assertEqual(unexpected, [])
        self.assertEqual([e for e in errors if isinstance(e, StreamNotFoundError)], [])


class ServiceHostileTests(ServerPerClass, TestCase):
    """The service API against another client's bytes (a real ``nats-server``)."""

    server_options: ClassVar[dict[str, Any]] = {}
    timeout = 60

    async def test_foreign_answers_to_ping(self) -> None:
        """Foreign responders on ``$SRV.PING`` answering with JSON nested past
        Python's stack (RecursionError escaped ping()), non-JSON, a list or wrong
        types: ping(), info() and stats() give the real service's answers only."""
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(lambda: bounded(nc.close()))
        svc = micro.add_service(nc, name="real", version="1.0.0")
        self.addCleanup(svc.stop)
        for body in (DEEP, b"not json", b"[1, 2]", b'{"name": 5, "id": [], "type": 7}'):
            nc.subscribe("$SRV.>", lambda m, body=body: m.respond(body))
        await bounded(nc.flush())
        for call in (micro.ping, micro.info, micro.stats):
            found = await bounded(ensureDeferred(call(nc, timeout=0.5)))
            self.assertEqual([r.name for r in found], ["real"], call.__name__)

    async def test_malformed_requests(self) -> None:
        """Requests with header blocks that do not parse, to the monitoring subjects
        and to an endpoint, sent from a raw socket: the service answers them and then
        a well-formed request, and its client stays connected."""
        assert self.server is not None
        errors: list[Exception] = []
        nc = await bounded(txnats.connect(reactor, self.server.url, error_cb=errors.append))
        self.addCleanup(lambda: bounded(nc.close()))
        svc = micro.add_service(nc, name="svc", version="1.0.0")
        self.addCleanup(svc.stop)
        svc.add_endpoint("echo", lambda req: req.respond(req.data), subject="svc.echo")
        watcher = await bounded(txnats.connect(reactor, self.server.url))
        self.addCleanup(lambda: bounded(watcher.close()))
        answers = watcher.subscribe("raw.reply")
        await bounded(watcher.flush())
        await bounded(nc.flush())
        frames = b"".join(
            hpub(subject, block, b"hi", reply=b"raw.reply")
            for subject in (b"$SRV.PING", b"$SRV.INFO.svc", b"svc.echo")
            for block in (b"NATS/1.0\r\nno colon here\r\n\r\n", b"garbage\r\n\r\n")
        )
        await send_raw(self.server.port, frames)
        got = [await answers.next_msg(timeout=5) for _ in range(6)]
        self.assertEqual(len(got), 6)
        reply = await bounded(nc.request("svc.echo", b"after", timeout=2))
        self.assertEqual(reply.data, b"after")
        self.assertTrue(nc.is_connected)
        self.assertEqual(svc.stats().endpoints[0].num_errors, 0)
