"""Stream and consumer management with typed configurations and infos, against a real
``nats-server -js`` (and, for the lazy paging, over a fake wire).

Durations are seconds in everything the API takes and gives; ``create_consumer``
refuses to change an existing consumer; listings are read a page at a time.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from twisted.internet.defer import Deferred
from twisted.internet.threads import deferToThread
from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from txnats.errors import (
    ConsumerDoesNotExistError,
    ConsumerExistsError,
    ConsumerNotFoundError,
    InvalidArgumentError,
    StreamNotFoundError,
)
from txnats.jetstream import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    JetStreamContext,
    StorageType,
    StreamConfig,
    StreamInfo,
)

from .support.jetstream import JsHarness
from .support.servers import ServerPerClass
from .support.waits import bounded, reactor
from .test_examples import run_example


class ManageCase(ServerPerClass, TestCase):
    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 30

    async def js(self) -> JetStreamContext:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, name=self._testMethodName))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc.jetstream()

    def name(self, suffix: str = "") -> str:
        return re.sub(r"[^A-Za-z0-9]", "", self._testMethodName.title()) + suffix

    async def stream(self, js: JetStreamContext, suffix: str = "", **fields: Any) -> str:
        name = self.name(suffix)
        fields.setdefault("subjects", [f"{name}.>"])
        fields.setdefault("storage", "memory")
        await bounded(js.add_stream(name=name, **fields))

        async def drop() -> None:
            try:
                await bounded(js.delete_stream(name))
            except StreamNotFoundError:
                pass

        self.addCleanup(lambda: Deferred.fromCoroutine(drop()))
        return name


class StreamManageTests(ManageCase):
    async def test_durations_in_seconds(self) -> None:
        """add_stream(max_age=3600) keeps messages an hour (it failed with "max age needs
        to be >= 100ms" when kwargs were nanoseconds); a timedelta and a StreamConfig
        work the same, and the info gives seconds back."""
        js = await self.js()
        s = await self.stream(js, max_age=3600, duplicate_window=timedelta(seconds=30))
        info = await bounded(js.stream_info(s))
        self.assertIsInstance(info, StreamInfo)
        self.assertEqual((info.config.max_age, info.config.duplicate_window), (3600.0, 30.0))
        self.assertIs(info.config.storage, StorageType.MEMORY)
        cfg = StreamConfig(self.name("B"), subjects=[self.name("B") + ".x"], max_age=0.5,
                           storage="memory")
        info = await bounded(js.add_stream(cfg))
        self.addCleanup(js.delete_stream, cfg.name)
        self.assertEqual(info.config.max_age, 0.5)
        info = await bounded(js.update_stream(info.config, max_age=timedelta(minutes=2)))
        self.assertEqual(info.config.max_age, 120.0)
        # A dict is taken in seconds too; a field StreamConfig lacks is refused at once.
        info = await bounded(js.update_stream({"name": cfg.name, "subjects": cfg.subjects,
                                               "storage": "memory", "max_age": 7}))
        self.assertEqual(info.config.max_age, 7.0)
        await self.assertFailure(js.add_stream(name="X", max_agee=1), InvalidArgumentError)

    async def test_unknown_fields_round_trip_through_the_server(self) -> None:
        """A field this version does not model, given in extra, reaches the server and
        comes back in the info's extra; update_stream(info.config) keeps it."""
        js = await self.js()
        s = await self.stream(js, extra={"allow_msg_counter": True})
        info = await bounded(js.stream_info(s))
        self.assertIs(info.config.extra.get("allow_msg_counter"), True)
        again = await bounded(js.update_stream(info.config, max_msgs=100))
        self.assertEqual(again.config.max_msgs, 100)
        self.assertIs(again.config.extra.get("allow_msg_counter"), True)

    async def test_stream_info_details(self) -> None:
        """deleted_details lists deleted sequences; subjects_filter counts per subject."""
        js = await self.js()
        s = await self.stream(js)
        for i in range(6):
            await bounded(js.publish(f"{s}.{'a' if i % 2 else 'b'}", b"%d" % i))
        await bounded(js.delete_msg(s, 3))
        plain = await bounded(js.stream_info(s))
        self.assertIsNone(plain.state.deleted)
        self.assertEqual(plain.state.num_deleted, 1)
        info = await bounded(js.stream_info(s, deleted_details=True, subjects_filter=f"{s}.>"))
        self.assertEqual(info.state.deleted, [3])
        self.assertEqual(info.state.subjects, {f"{s}.a": 3, f"{s}.b": 2})
        self.assertIsInstance(info.state.first_ts, datetime)

    async def test_streams_listing(self) -> None:
        """streams(subject) gives the infos of the streams taking that subject."""
        js = await self.js()
        names = [await self.stream(js, suffix, subjects=[f"{self.name(suffix)}.x"])
                 for suffix in ("A", "B", "C")]
        got = [i.config.name async for i in js.streams(subject=f"{names[1]}.x")]
        self.assertEqual(got, [names[1]])
        every = await bounded(js.streams().all())
        self.assertTrue(set(names) <= {i.config.name for i in every})
        self.assertTrue(all(isinstance(i, StreamInfo) for i in every))

    async def test_account_info_typed(self) -> None:
        """account_info counts this test's stream."""
        js = await self.js()
        before = await bounded(js.account_info())
        await self.stream(js)
        after = await bounded(js.account_info())
        self.assertIsInstance(after, AccountInfo)
        self.assertEqual(after.streams, before.streams + 1)


class ConsumerManageTests(ManageCase):
    async def test_create_refuses_another_config(self) -> None:
        """create_consumer with the same config gives the consumer; with another it fails
        with ConsumerExistsError and changes nothing; update_consumer changes it."""
        js = await self.js()
        s = await self.stream(js)
        info = await bounded(js.create_consumer(s, durable_name="C", ack_wait=30,
                                                ack_policy="explicit"))
        self.assertIsInstance(info, ConsumerInfo)
        self.assertEqual((info.name, info.config.ack_wait), ("C", 30.0))
        self.assertIs(info.config.ack_policy, AckPolicy.EXPLICIT)
        same = await bounded(js.create_consumer(s, ConsumerConfig(
            durable_name="C", ack_wait=timedelta(seconds=30), ack_policy=AckPolicy.EXPLICIT,
        )))
        self.assertEqual(same.name, "C")
        await self.assertFailure(
            js.create_consumer(s, durable_name="C", ack_wait=10, ack_policy="explicit"),
            ConsumerExistsError,
        )
        self.assertEqual((await bounded(js.consumer_info(s, "C"))).config.ack_wait, 30.0)
        updated = await bounded(js.update_consumer(s, info.config, ack_wait=10))
        self.assertEqual(updated.config.ack_wait, 10.0)
        # add_consumer keeps its old meaning: create or update.
        again = await bounded(js.add_consumer(s, durable_name="C", ack_wait=20,
                                              ack_policy="explicit"))
        self.assertEqual(again.config.ack_wait, 20.0)

    async def test_update_needs_an_existing_consumer(self) -> None:
        """update_consumer of a consumer that is not there fails (and creates nothing);
        create_or_update_consumer creates it."""
        js = await self.js()
        s = await self.stream(js)
        e = await self.assertFailure(
            js.update_consumer(s, name="N", ack_policy="explicit"), ConsumerDoesNotExistError
        )
        self.assertIsInstance(e, ConsumerNotFoundError)
        await self.assertFailure(js.consumer_info(s, "N"), ConsumerNotFoundError)
        created = await bounded(js.create_or_update_consumer(s, name="N", max_deliver=3))
        self.assertEqual(created.config.max_deliver, 3)
        changed = await bounded(js.create_or_update_consumer(s, name="N", max_deliver=5))
        self.assertEqual(changed.config.max_deliver, 5)
        self.assertIs(await bounded(js.delete_consumer(s, "N")), True)
        await self.assertFailure(js.consumer_info(s, "N"), ConsumerNotFoundError)
        await self.assertFailure(js.update_consumer(s, ack_policy="none"), InvalidArgumentError)

    async def test_listings(self) -> None:
        """consumers() and consumer_names() list every consumer of the stream."""
        js = await self.js()
        s = await self.stream(js)
        for i in range(4):
            await bounded(js.create_consumer(s, name=f"c{i}", filter_subject=f"{s}.{i}"))
        names = sorted([n async for n in js.consumer_names(s)])
        self.assertEqual(names, ["c0", "c1", "c2", "c3"])
        infos = await bounded(js.consumers(s).all())
        self.assertEqual(sorted(i.config.filter_subject or "" for i in infos),
                         [f"{s}.{i}" for i in range(4)])
        self.assertRaises(InvalidArgumentError, js.consumers, "a.b")

    async def test_pause_and_resume(self) -> None:
        """pause_consumer(until) pauses it (the info says so), resume_consumer ends it."""
        js = await self.js()
        s = await self.stream(js)
        await bounded(js.create_consumer(s, name="P"))
        paused = await bounded(js.pause_consumer(s, "P", 60))
        self.assertTrue(paused.paused)
        assert paused.pause_until is not None and paused.pause_remaining is not None
        self.assertGreater(paused.pause_until, datetime.now(UTC) + timedelta(seconds=50))
        self.assertGreater(paused.pause_remaining, 50)
        self.assertTrue((await bounded(js.consumer_info(s, "P"))).paused)
        resumed = await bounded(js.resume_consumer(s, "P"))
        self.assertFalse(resumed.paused)
        self.assertFalse((await bounded(js.consumer_info(s, "P"))).paused)
        await self.assertFailure(js.pause_consumer(s, "P", "soon"), InvalidArgumentError)


class ExampleTests(ManageCase):
    async def test_js_manage_example(self) -> None:
        """examples/js_manage.py runs against a server and prints what it promises."""
        assert self.server is not None
        result = await deferToThread(run_example, "js_manage", "--server", self.server.url)
        self.assertEqual(result.returncode, 0, result.stderr)
        lines = result.stdout.splitlines()
        for want in [
            "stream ORDERS: max_age=3600.0s storage=memory",
            "published again: duplicate=True seq=1",
            "consumer billing: ack_wait=30.0s pending=3",
            "create with another config: refused (ConsumerExistsError)",
            "updated: ack_wait=10.0s",
            "listed consumer audit (pending 1)",
            "listed consumer billing (pending 3)",
            "audit paused: True",
            "audit paused after resume: False",
            "done",
        ]:
            self.assertIn(want, lines)


class PagingTests(JsHarness, SynchronousTestCase):
    """The listings ask for one page at a time, and only when the last one is used up."""

    def test_one_page_at_a_time(self) -> None:
        got: list[str] = []

        async def read() -> None:
            async for name in self.js.consumer_names("S"):
                got.append(name)

        d = Deferred.fromCoroutine(read())
        first = self.one_request("$JS.API.CONSUMER.NAMES.S")
        self.assertEqual(first.json(), {"offset": 0})
        self.answer(first, {"total": 5, "offset": 0, "limit": 2, "consumers": ["a", "b"]})
        self.assertEqual(got, ["a", "b"])
        second = self.one_request("$JS.API.CONSUMER.NAMES.S")  # asked only now
        self.assertEqual(second.json(), {"offset": 2})
        self.answer(second, {"total": 5, "offset": 2, "limit": 2, "consumers": ["c", "d"]})
        third = self.one_request("$JS.API.CONSUMER.NAMES.S")
        self.assertEqual(third.json(), {"offset": 4})
        self.answer(third, {"total": 5, "offset": 4, "limit": 2, "consumers": ["e"]})
        self.successResultOf(d)
        self.assertEqual(got, ["a", "b", "c", "d", "e"])
        self.assertEqual(self.pubs(), [])

    def test_stopping_early_asks_no_more(self) -> None:
        """Leaving the loop after the first item asks for no further page."""

        async def first() -> ConsumerInfo:
            async for info in self.js.consumers("S"):
                return info
            raise AssertionError("no consumer")

        d = Deferred.fromCoroutine(first())
        req = self.one_request("$JS.API.CONSUMER.LIST.S")
        self.answer(req, {"total": 500, "offset": 0, "limit": 256,
                          "consumers": [{"name": "a", "config": {"ack_wait": 2_000_000_000}}]})
        info = self.successResultOf(d)
        self.assertEqual((info.name, info.config.ack_wait), ("a", 2.0))
        self.assertEqual(self.pubs(), [])

    def test_stream_info_pages_subject_counts(self) -> None:
        """stream_info(subjects_filter=) asks again from the next offset while the server
        pages the per-subject counts, and gives them all in one StreamInfo."""
        d = self.js.stream_info("S", subjects_filter=">", deleted_details=True)
        first = self.one_request("$JS.API.STREAM.INFO.S")
        self.assertEqual(first.json(), {"deleted_details": True, "subjects_filter": ">"})
        self.answer(first, {"total": 3, "offset": 0, "limit": 2, "config": {"name": "S"},
                            "state": {"messages": 3, "subjects": {"a": 1, "b": 1},
                                      "deleted": [7]}})
        second = self.one_request("$JS.API.STREAM.INFO.S")
        self.assertEqual(second.json(),
                         {"deleted_details": True, "subjects_filter": ">", "offset": 2})
        self.answer(second, {"total": 3, "offset": 2, "limit": 2, "config": {"name": "S"},
                             "state": {"messages": 3, "subjects": {"c": 1}}})
        info = self.successResultOf(d)
        self.assertEqual(info.state.subjects, {"a": 1, "b": 1, "c": 1})
        self.assertEqual(info.state.deleted, [7])
        self.assertNotIn("total", info.extra)  # paging fields are not the stream's
        self.assertEqual(self.pubs(), [])

    def test_bad_arguments_fail_without_io(self) -> None:
        """Bad names, a name and durable_name that differ, a bad pause time and an empty
        subject filter fail at once, sending nothing."""
        for d in [
            self.js.create_consumer("S", name="a", durable_name="b"),
            self.js.create_consumer("S.x", name="a"),
            self.js.update_consumer("S"),
            self.js.pause_consumer("S", "c", -5),
            self.js.pause_consumer("S", "c.d", 5),
            self.js.stream_info("S", subjects_filter=""),
            self.js.add_stream({"name": "S", "max_msgs": 1, "nope": 2}),
        ]:
            self.failureResultOf(d, InvalidArgumentError)
        self.assertRaises(InvalidArgumentError, self.js.consumer_names, "a b")
        self.assertEqual(self.pubs(), [])

    def test_pause_request_is_rfc3339_utc(self) -> None:
        """pause_consumer sends the time in UTC (a naive datetime is taken as UTC)."""
        self.js.pause_consumer("S", "C", datetime(2030, 1, 2, 3, 4, 5))
        req = self.one_request("$JS.API.CONSUMER.PAUSE.S.C")
        self.assertEqual(req.json(), {"pause_until": "2030-01-02T03:04:05Z"})
        d = self.js.resume_consumer("S", "C")
        req = self.one_request("$JS.API.CONSUMER.PAUSE.S.C")
        self.assertEqual(req.json(), {})  # no time: resume (as nats.go sends it)
        self.answer(req, {"paused": False, "pause_until": "0001-01-01T00:00:00Z"})
        self.assertFalse(self.successResultOf(d).paused)

    def test_stream_listing_subject_and_errors(self) -> None:
        """streams(subject) sends the subject filter; an API error fails the iteration."""
        d = self.js.streams(subject="orders.*").all()
        req = self.one_request("$JS.API.STREAM.LIST")
        self.assertEqual(req.json(), {"subject": "orders.*", "offset": 0})
        self.answer(req, {"error": {"code": 500, "err_code": 10000, "description": "boom"}})
        self.assertIn("boom", str(self.failureResultOf(d).value))
