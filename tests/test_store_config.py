"""Typed store configurations (KeyValueConfig, ObjectStoreConfig): seconds in, the
server's JSON out, unknown fields kept; the stores created from them."""

from __future__ import annotations

from datetime import timedelta

from twisted.trial.unittest import SynchronousTestCase, TestCase

import txnats
from tests.support.servers import ServerPerClass
from tests.support.waits import bounded, reactor
from txnats.errors import InvalidArgumentError
from txnats.jetstream.kv import KeyValueConfig
from txnats.jetstream.object_store import ObjectStoreConfig


class RecordTests(SynchronousTestCase):
    def test_seconds_in_nanoseconds_out_and_unknown_fields_kept(self) -> None:
        cfg = KeyValueConfig(bucket="b", history=3, ttl=timedelta(minutes=1),
                             limit_marker_ttl=2)
        self.assertEqual((cfg.ttl, cfg.limit_marker_ttl), (60.0, 2.0))
        j = cfg.to_json()
        self.assertEqual((j["ttl"], j["limit_marker_ttl"]), (60_000_000_000, 2_000_000_000))
        back = KeyValueConfig.from_json({**j, "future_field": {"x": 1}})
        self.assertEqual(back.ttl, 60.0)
        self.assertEqual(back.extra, {"future_field": {"x": 1}})
        self.assertEqual(back.to_json()["future_field"], {"x": 1})
        self.assertEqual(
            cfg.create_arguments(), {"history": 3, "ttl": 60.0, "limit_marker_ttl": 2.0}
        )

    def test_bad_values_refused(self) -> None:
        with self.assertRaises(InvalidArgumentError):
            KeyValueConfig(bucket="b", ttl=-1)
        with self.assertRaises(InvalidArgumentError):
            ObjectStoreConfig.build(None, {"bucket": "b", "no_such": 1})


class CreateFromRecordTests(ServerPerClass, TestCase):
    server_options = {"jetstream": True}

    async def test_create_stores_from_records(self) -> None:
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url)
        self.addCleanup(nc.close)
        js = nc.jetstream()
        kv = await bounded(js.create_key_value(
            KeyValueConfig(bucket="typed_kv", history=4, ttl=30, description="typed")
        ))
        self.addCleanup(lambda: js.delete_key_value("typed_kv").addErrback(lambda _: None))
        st = await bounded(kv.status())
        self.assertEqual((st.history, st.ttl), (4, 30.0))
        obs = await bounded(js.create_object_store(
            ObjectStoreConfig(bucket="typed_obj", description="typed", ttl=60),
        ))
        self.addCleanup(lambda: js.delete_object_store("typed_obj").addErrback(lambda _: None))
        ost = await bounded(obs.status())
        self.assertEqual((ost.description, ost.ttl), ("typed", 60.0))
        with self.assertRaises(InvalidArgumentError):
            await js.create_key_value("typed_bad", no_such_option=1)
