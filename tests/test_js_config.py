"""The typed JetStream configurations and infos (``txnats.jetstream.config``) and their
conversion core: seconds here and nanoseconds on the wire, enums, nested records, times,
unknown fields kept, and the checks on what users give. No server: records and JSON."""

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError
from txnats.jetstream import (
    AccountInfo,
    AckPolicy,
    ConsumerConfig,
    ConsumerInfo,
    DeliverPolicy,
    DiscardPolicy,
    Placement,
    PubAck,
    RetentionPolicy,
    StorageType,
    StreamConfig,
    StreamInfo,
    StreamSource,
)
from txnats.jetstream._api import PubAck as ApiPubAck
from txnats.jetstream._config_core import from_ns, seconds, to_ns

#: A stream info as nats-server 2.10+ writes it (trimmed), plus fields no version of
#: this client knows, at the top and nested.
SERVER_STREAM_INFO: dict[str, Any] = {
    "type": "io.nats.jetstream.api.v1.stream_info_response",
    "total": 0,
    "config": {
        "name": "ORDERS",
        "subjects": ["orders.>"],
        "retention": "limits",
        "max_consumers": -1,
        "max_msgs": -1,
        "max_bytes": -1,
        "max_age": 3_600_000_000_000,
        "max_msgs_per_subject": -1,
        "max_msg_size": -1,
        "discard": "old",
        "storage": "file",
        "num_replicas": 1,
        "duplicate_window": 120_000_000_000,
        "compression": "none",
        "allow_direct": False,
        "mirror_direct": False,
        "sealed": False,
        "deny_delete": False,
        "deny_purge": False,
        "allow_rollup_hdrs": False,
        "consumer_limits": {"inactive_threshold": 1_500_000_000, "future_limit": 3},
        "placement": {"cluster": "east", "tags": ["ssd"]},
        "sources": [{"name": "A", "opt_start_time": "2024-05-06T07:08:09.123456Z"}],
        "a_field_from_2030": {"nested": [1, 2]},
    },
    "created": "2024-05-06T07:08:09.000001Z",
    "state": {
        "messages": 3, "bytes": 120, "first_seq": 1,
        "first_ts": "2024-05-06T07:08:10.5Z", "last_seq": 3,
        "last_ts": "2024-05-06T07:08:11.000000Z", "consumer_count": 1,
        "num_subjects": 2, "subjects": {"orders.a": 2, "orders.b": 1},
    },
    "cluster": {"leader": "n1", "replicas": [{"name": "n2", "current": True, "active": 250_000}]},
    "ts": "2024-05-06T07:09:00.000000Z",
}


class ConversionTests(SynchronousTestCase):
    """From the server's JSON and back."""

    def test_stream_info_fields_typed(self) -> None:
        """Durations become seconds, enums members, times datetimes, nested records."""
        info = StreamInfo.from_json(SERVER_STREAM_INFO)
        cfg = info.config
        self.assertEqual((cfg.max_age, cfg.duplicate_window), (3600.0, 120.0))
        self.assertIs(cfg.storage, StorageType.FILE)
        self.assertIs(cfg.retention, RetentionPolicy.LIMITS)
        self.assertIs(cfg.discard, DiscardPolicy.OLD)
        self.assertEqual(cfg.placement, Placement(cluster="east", tags=["ssd"]))
        assert cfg.consumer_limits is not None and cfg.sources is not None
        self.assertEqual(cfg.consumer_limits.inactive_threshold, 1.5)
        self.assertEqual(
            cfg.sources[0].opt_start_time, datetime(2024, 5, 6, 7, 8, 9, 123456, tzinfo=UTC)
        )
        self.assertEqual(info.state.messages, 3)
        self.assertEqual(info.state.subjects, {"orders.a": 2, "orders.b": 1})
        self.assertEqual(info.state.first_ts, datetime(2024, 5, 6, 7, 8, 10, 500000, tzinfo=UTC))
        assert info.cluster is not None and info.cluster.replicas is not None
        self.assertEqual(info.cluster.replicas[0].active, 0.00025)
        self.assertEqual(info.timestamp, datetime(2024, 5, 6, 7, 9, tzinfo=UTC))

    def test_unknown_fields_round_trip(self) -> None:
        """Fields this version does not know are kept in ``extra`` (at every level) and
        written back untouched."""
        info = StreamInfo.from_json(SERVER_STREAM_INFO)
        self.assertEqual(info.extra, {
            "type": "io.nats.jetstream.api.v1.stream_info_response", "total": 0,
        })
        self.assertEqual(info.config.extra, {"a_field_from_2030": {"nested": [1, 2]}})
        assert info.config.consumer_limits is not None
        self.assertEqual(info.config.consumer_limits.extra, {"future_limit": 3})
        out = info.to_json()
        self.assertEqual(out["config"]["a_field_from_2030"], {"nested": [1, 2]})
        self.assertEqual(out["config"]["consumer_limits"]["future_limit"], 3)
        self.assertEqual(out["type"], SERVER_STREAM_INFO["type"])

    def test_server_json_round_trips(self) -> None:
        """from_json then to_json gives back the server's JSON: every value the same
        (times to the microsecond, as written here)."""
        out = StreamInfo.from_json(SERVER_STREAM_INFO).to_json()
        want = json.loads(json.dumps(SERVER_STREAM_INFO))
        want["state"]["first_ts"] = "2024-05-06T07:08:10.500000Z"
        # Fields an info always has come back with their defaults.
        want["state"].setdefault("num_deleted", 0)
        for r in want["cluster"]["replicas"]:
            r.setdefault("offline", False)
            r.setdefault("lag", 0)
        self.assertEqual(out, want)

    def test_unknown_enum_value_kept(self) -> None:
        """A value a newer server sends for an enum field stays its string, and is
        written back."""
        cfg = StreamConfig.from_json({"name": "S", "storage": "quantum"})
        self.assertEqual(cfg.storage, "quantum")
        self.assertEqual(cfg.to_json(), {"name": "S", "storage": "quantum"})

    def test_none_fields_left_out(self) -> None:
        """Fields left None are not sent: the server's defaults apply."""
        self.assertEqual(StreamConfig("S").to_json(), {"name": "S"})
        self.assertEqual(ConsumerConfig().to_json(), {})

    def test_consumer_info(self) -> None:
        """A consumer info: nested sequences, config durations, backoff list, pause."""
        raw = {
            "stream_name": "S", "name": "C", "created": "2024-01-01T00:00:00Z",
            "config": {
                "durable_name": "C", "ack_policy": "explicit", "ack_wait": 30_000_000_000,
                "backoff": [1_000_000_000, 2_500_000_000], "deliver_policy": "all",
                "max_deliver": -1, "idle_heartbeat": 5_000_000_000,
            },
            "delivered": {
                "consumer_seq": 4, "stream_seq": 9, "last_active": "2024-01-01T00:00:01Z",
            },
            "ack_floor": {"consumer_seq": 2, "stream_seq": 7},
            "num_ack_pending": 2, "num_redelivered": 0, "num_waiting": 1, "num_pending": 10,
            "paused": True, "pause_remaining": 2_000_000_000, "ts": "2024-01-01T00:00:02Z",
        }
        info = ConsumerInfo.from_json(raw)
        self.assertEqual((info.delivered.consumer_seq, info.ack_floor.stream_seq), (4, 7))
        self.assertIs(info.config.ack_policy, AckPolicy.EXPLICIT)
        self.assertIs(info.config.deliver_policy, DeliverPolicy.ALL)
        self.assertEqual(info.config.ack_wait, 30.0)
        self.assertEqual(info.config.backoff, [1.0, 2.5])
        self.assertEqual(info.pause_remaining, 2.0)
        out = info.to_json()
        self.assertEqual(out["config"]["backoff"], raw["config"]["backoff"])
        self.assertEqual(out["config"]["ack_wait"], 30_000_000_000)

    def test_missing_fields_take_defaults(self) -> None:
        """An info missing fields (an older server) still builds, with defaults."""
        info = AccountInfo.from_json({})
        self.assertEqual((info.memory, info.limits.max_streams, info.api.total), (0, 0, 0))
        self.assertEqual(ConsumerInfo.from_json({"name": "x"}).delivered.stream_seq, 0)

    def test_pub_ack_import_paths(self) -> None:
        """PubAck lives in config and is still importable from _api, as before."""
        self.assertIs(PubAck, ApiPubAck)
        self.assertEqual(PubAck("S", 1), PubAck("S", 1, False, ""))


class UserInputTests(SynchronousTestCase):
    """What users give: seconds, timedelta, strings for enums, dicts for records."""

    def test_seconds_and_timedelta(self) -> None:
        """Durations given as seconds (int or float) or timedelta go out as nanoseconds."""
        cfg = StreamConfig("S", max_age=3600, duplicate_window=timedelta(minutes=2))
        self.assertEqual(cfg.max_age, 3600.0)
        self.assertEqual(cfg.duplicate_window, 120.0)
        out = cfg.to_json()
        self.assertEqual((out["max_age"], out["duplicate_window"]), (3600 * 10**9, 120 * 10**9))
        c = ConsumerConfig(ack_wait=0.25, backoff=[1, timedelta(milliseconds=1500)])
        self.assertEqual(c.to_json(), {"ack_wait": 250_000_000, "backoff": [10**9, 1_500_000_000]})

    def test_bad_durations_refused(self) -> None:
        """Negative, NaN, infinite and non-number durations raise, naming the field."""
        for bad in (-1, float("nan"), float("inf")):
            e = self.assertRaises(InvalidArgumentError, StreamConfig, "S", max_age=bad)
            self.assertIn("StreamConfig.max_age", str(e))
        self.assertRaises(InvalidArgumentTypeError, StreamConfig, "S", max_age="1h")
        self.assertRaises(InvalidArgumentTypeError, ConsumerConfig, backoff=[1, "2"])
        self.assertRaises(InvalidArgumentError, seconds, "x", timedelta(seconds=-1))

    def test_nanoseconds_given_by_mistake_refused(self) -> None:
        """A duration too long for the server (more than ~292 years: nanoseconds given
        where seconds are taken, as dicts took before) is refused, saying so."""
        e = self.assertRaises(InvalidArgumentError, StreamConfig, "S", max_age=3_600_000_000_000)
        self.assertIn("seconds here, not nanoseconds", str(e))
        self.assertEqual(StreamConfig("S", max_age=9e9).to_json()["max_age"], 9 * 10**18)

    def test_enum_strings(self) -> None:
        """Enum fields take their values as strings; members compare equal to them."""
        cfg = StreamConfig("S", storage="memory", retention="workqueue")
        self.assertIs(cfg.storage, StorageType.MEMORY)
        self.assertEqual(cfg.storage, "memory")
        self.assertEqual(cfg.to_json()["retention"], "workqueue")
        e = self.assertRaises(InvalidArgumentError, StreamConfig, "S", storage="disk")
        self.assertIn("'file', 'memory'", str(e))

    def test_nested_dicts_and_times(self) -> None:
        """Nested records may be given as dicts (durations in seconds there too); times
        as datetimes (naive ones are UTC) or RFC 3339 strings."""
        cfg = StreamConfig(
            "S", placement={"cluster": "c"}, consumer_limits={"inactive_threshold": 2},
            sources=[{"name": "A", "opt_start_time": datetime(2024, 1, 2, 3, 4, 5)}],
        )
        self.assertEqual(cfg.placement, Placement(cluster="c"))
        out = cfg.to_json()
        self.assertEqual(out["consumer_limits"], {"inactive_threshold": 2_000_000_000})
        self.assertEqual(out["sources"], [
            {"name": "A", "opt_start_time": "2024-01-02T03:04:05.000000Z"},
        ])
        src = StreamSource(opt_start_time="2024-01-02T03:04:05+01:00")
        self.assertEqual(src.to_json()["opt_start_time"], "2024-01-02T02:04:05.000000Z")
        self.assertRaises(InvalidArgumentTypeError, StreamSource, opt_start_time=5)
        self.assertRaises(InvalidArgumentError, StreamConfig, "S", placement={"clusterr": "c"})

    def test_build_merges_and_checks(self) -> None:
        """build(config, fields): a dict or record, overridden by keyword fields; a field
        the record does not have is refused (extra= takes raw JSON fields)."""
        cfg = StreamConfig.build({"name": "S", "max_age": 10}, {"max_msgs": 5})
        self.assertEqual((cfg.name, cfg.max_age, cfg.max_msgs), ("S", 10.0, 5))
        again = StreamConfig.build(cfg, {"max_msgs": 6})
        self.assertEqual((again.max_msgs, cfg.max_msgs), (6, 5))  # the given one unchanged
        self.assertIs(StreamConfig.build(cfg, {}), cfg)
        e = self.assertRaises(
            InvalidArgumentError, StreamConfig.build, {"name": "S", "max_agee": 1}, {}
        )
        self.assertIn("'max_agee'", str(e))
        self.assertRaises(InvalidArgumentTypeError, StreamConfig.build, None, {})  # no name
        self.assertRaises(InvalidArgumentTypeError, StreamConfig.build, ["S"], {})
        raw = StreamConfig.build(None, {"name": "S", "extra": {"new_thing": 1}})
        self.assertEqual(raw.to_json(), {"name": "S", "new_thing": 1})

    def test_build_from_server_record_keeps_what_it_does_not_know(self) -> None:
        """A record read from the server, changed with keyword fields, keeps values this
        version does not know (an enum's new value) and its extra as they came; only the
        fields given are checked."""
        info = StreamInfo.from_json({"config": {"name": "S", "storage": "quantum",
                                                "max_age": 10**9, "new": 1}})
        cfg = StreamConfig.build(info.config, {"max_msgs": 5, "max_age": timedelta(seconds=2)})
        self.assertEqual(cfg.to_json(), {"name": "S", "storage": "quantum",
                                         "max_age": 2 * 10**9, "max_msgs": 5, "new": 1})
        self.assertEqual(info.config.max_msgs, None)  # the record given is not changed
        self.assertRaises(InvalidArgumentError, StreamConfig.build, info.config, {"max_age": -1})
        self.assertRaises(InvalidArgumentError, StreamConfig.build, info.config, {"nope": 1})

    def test_known_field_wins_over_extra(self) -> None:
        """A known field set on the record is what is sent, even if extra repeats it."""
        cfg = StreamConfig("S", max_msgs=5, extra={"max_msgs": 9, "x": 1})
        self.assertEqual(cfg.to_json(), {"name": "S", "max_msgs": 5, "x": 1})


# ---------------------------------------------------------------------- properties
_ns = st.integers(min_value=0, max_value=2**52 - 1)
_us = st.integers(min_value=0, max_value=2**52 - 1).map(lambda us: us * 1000)
_times = st.datetimes(
    min_value=datetime(1970, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
)
_extra = st.dictionaries(
    st.text("abcdefgh_", min_size=1, max_size=6).map(lambda k: "x_" + k),
    st.one_of(st.integers(), st.text(max_size=5), st.booleans(), st.none()),
    max_size=3,
)


def _stream_configs() -> st.SearchStrategy[StreamConfig]:
    opt = st.none() | _ns.map(from_ns)
    return st.builds(
        StreamConfig,
        name=st.text("ABCxyz_-0", min_size=1, max_size=8),
        subjects=st.none() | st.lists(st.text("abc.>*", min_size=1, max_size=5), max_size=3),
        max_age=opt, duplicate_window=opt,
        storage=st.none() | st.sampled_from(StorageType),
        retention=st.none() | st.sampled_from(RetentionPolicy),
        max_msgs=st.none() | st.integers(-1, 2**40),
        placement=st.none() | st.builds(Placement, cluster=st.none() | st.text(max_size=4)),
        sources=st.none() | st.lists(
            st.builds(StreamSource, name=st.text("ab", min_size=1, max_size=3),
                      opt_start_time=st.none() | _times), max_size=2,
        ),
        extra=_extra,
    )


class PropertyTests(SynchronousTestCase):
    """Round trips over generated values."""

    @settings(max_examples=300, deadline=None)
    @given(_ns)
    def test_ns_exact_below_2_52(self, ns: int) -> None:
        """Any number of nanoseconds below 2**52 survives seconds and back exactly."""
        self.assertEqual(to_ns(from_ns(ns)), ns)

    @settings(max_examples=300, deadline=None)
    @given(_us)
    def test_us_exact_for_142_years(self, ns: int) -> None:
        """Any whole number of microseconds below 2**52 survives exactly."""
        self.assertEqual(to_ns(from_ns(ns)), ns)

    @settings(max_examples=200, deadline=None)
    @given(_stream_configs())
    def test_record_json_record(self, cfg: StreamConfig) -> None:
        """record -> server JSON (through a real JSON encoding) -> record is the same
        record, extra included."""
        wire = json.loads(json.dumps(cfg.to_json()))
        self.assertEqual(StreamConfig.from_json(wire), cfg)

    @settings(max_examples=200, deadline=None)
    @given(_stream_configs())
    def test_dict_input_in_seconds(self, cfg: StreamConfig) -> None:
        """A dict of the record's fields (seconds) builds the same record."""
        fields = {f.name: getattr(cfg, f.name) for f in dataclasses.fields(cfg)}
        self.assertEqual(StreamConfig.build(fields, {}), cfg)
