"""Typed JetStream configurations and infos.

Every record here is a dataclass built on :class:`~txnats.jetstream._config_core.JsonObject`:

- **durations are seconds** (``float``; a ``timedelta`` is accepted), nanoseconds only
  in the server's JSON;
- fields with a fixed set of values are enums (``StorageType.FILE``; the string
  ``"file"`` is accepted as input and the members compare equal to their strings);
- configuration fields default to ``None``: "not set, the server's default applies";
- :meth:`~JsonObject.from_json` reads the server's JSON, :meth:`~JsonObject.to_json`
  writes it, and fields this version does not know are kept in ``extra`` and written
  back untouched.

The API takes a record or a dict of the same fields (durations in **seconds** there too:
one unit everywhere; ``js.add_stream(name="S", subjects=["s.>"], max_age=3600)`` keeps
messages an hour). Only :meth:`~txnats.jetstream.JetStreamContext.api_request` speaks
the server's raw JSON.
"""

from __future__ import annotations

import dataclasses
import enum
from datetime import datetime
from typing import Annotated, Any

from txnats.jetstream._config_core import JsonName, JsonObject, Seconds

__all__ = [
    "AccountInfo",
    "AccountLimits",
    "AckPolicy",
    "ApiStats",
    "ClusterInfo",
    "ConsumerConfig",
    "ConsumerInfo",
    "ConsumerLimits",
    "ConsumerPause",
    "DeliverPolicy",
    "DiscardPolicy",
    "ExternalStream",
    "PeerInfo",
    "Placement",
    "PriorityPolicy",
    "PubAck",
    "RePublish",
    "ReplayPolicy",
    "RetentionPolicy",
    "SequenceInfo",
    "StorageType",
    "StoreCompression",
    "StreamConfig",
    "StreamInfo",
    "StreamSource",
    "StreamSourceInfo",
    "StreamState",
    "SubjectTransform",
]


# ---------------------------------------------------------------------- enums
class RetentionPolicy(enum.StrEnum):
    """When a stream removes messages besides its limits."""

    LIMITS = "limits"
    INTEREST = "interest"
    WORK_QUEUE = "workqueue"


class StorageType(enum.StrEnum):
    """Where a stream or consumer keeps its state."""

    FILE = "file"
    MEMORY = "memory"


class DiscardPolicy(enum.StrEnum):
    """What a full stream drops: its oldest messages or the new one."""

    OLD = "old"
    NEW = "new"


class StoreCompression(enum.StrEnum):
    """How a file stream compresses its blocks (server 2.10+)."""

    NONE = "none"
    S2 = "s2"


class DeliverPolicy(enum.StrEnum):
    """Where a consumer starts."""

    ALL = "all"
    LAST = "last"
    NEW = "new"
    BY_START_SEQUENCE = "by_start_sequence"
    BY_START_TIME = "by_start_time"
    LAST_PER_SUBJECT = "last_per_subject"


class AckPolicy(enum.StrEnum):
    """Which acknowledgements a consumer wants."""

    NONE = "none"
    ALL = "all"
    EXPLICIT = "explicit"


class ReplayPolicy(enum.StrEnum):
    """How fast a consumer replays: at once, or at the pace messages were stored."""

    INSTANT = "instant"
    ORIGINAL = "original"


class PriorityPolicy(enum.StrEnum):
    """How a consumer shares out its messages among priority groups (ADR-42)."""

    NONE = "none"
    OVERFLOW = "overflow"
    PINNED_CLIENT = "pinned_client"
    PRIORITIZED = "prioritized"


# ---------------------------------------------------------------------- stream parts
@dataclasses.dataclass
class Placement(JsonObject):
    """Where a stream's replicas go: a cluster and/or server tags."""

    cluster: str | None = None
    tags: list[str] | None = None


@dataclasses.dataclass
class SubjectTransform(JsonObject):
    """A subject mapping (``src`` -> ``dest``), on a stream or one of its sources."""

    src: str | None = None
    dest: str | None = None


@dataclasses.dataclass
class RePublish(JsonObject):
    """Republish what the stream stores on another subject."""

    src: str | None = None
    dest: str | None = None
    headers_only: bool | None = None


@dataclasses.dataclass
class ExternalStream(JsonObject):
    """The API prefix of a source or mirror in another domain or account."""

    api: str | None = None
    deliver: str | None = None


@dataclasses.dataclass
class StreamSource(JsonObject):
    """A stream this one mirrors or sources from."""

    name: str | None = None
    opt_start_seq: int | None = None
    opt_start_time: datetime | None = None
    filter_subject: str | None = None
    subject_transforms: list[SubjectTransform] | None = None
    external: ExternalStream | None = None


@dataclasses.dataclass
class ConsumerLimits(JsonObject):
    """Defaults a stream gives the consumers made on it."""

    inactive_threshold: Seconds | None = None
    max_ack_pending: int | None = None


@dataclasses.dataclass
class StreamConfig(JsonObject):
    """A stream's configuration (ADR-8). Every field but ``name`` may be left ``None``
    for the server's default; durations are seconds."""

    name: str
    description: str | None = None
    subjects: list[str] | None = None
    retention: RetentionPolicy | None = None
    max_consumers: int | None = None
    max_msgs: int | None = None
    max_bytes: int | None = None
    discard: DiscardPolicy | None = None
    discard_new_per_subject: bool | None = None
    max_age: Seconds | None = None
    max_msgs_per_subject: int | None = None
    max_msg_size: int | None = None
    storage: StorageType | None = None
    num_replicas: int | None = None
    no_ack: bool | None = None
    duplicate_window: Seconds | None = None
    placement: Placement | None = None
    mirror: StreamSource | None = None
    sources: list[StreamSource] | None = None
    sealed: bool | None = None
    deny_delete: bool | None = None
    deny_purge: bool | None = None
    allow_rollup_hdrs: bool | None = None
    allow_direct: bool | None = None
    mirror_direct: bool | None = None
    republish: RePublish | None = None
    subject_transform: SubjectTransform | None = None
    compression: StoreCompression | None = None
    first_seq: int | None = None
    metadata: dict[str, str] | None = None
    consumer_limits: ConsumerLimits | None = None
    allow_msg_ttl: bool | None = None
    subject_delete_marker_ttl: Seconds | None = None


# ---------------------------------------------------------------------- stream infos
@dataclasses.dataclass
class PeerInfo(JsonObject):
    """One replica of a clustered stream or consumer."""

    name: str = ""
    current: bool = False
    offline: bool = False
    #: Seconds since it was last heard from.
    active: Seconds = 0.0
    lag: int = 0


@dataclasses.dataclass
class ClusterInfo(JsonObject):
    """The cluster, raft group, leader and replicas of a stream or consumer."""

    name: str | None = None
    raft_group: str | None = None
    leader: str | None = None
    replicas: list[PeerInfo] | None = None


@dataclasses.dataclass
class StreamState(JsonObject):
    """What a stream holds."""

    messages: int = 0
    bytes: int = 0
    first_seq: int = 0
    first_ts: datetime | None = None
    last_seq: int = 0
    last_ts: datetime | None = None
    consumer_count: int = 0
    #: The deleted sequences (asked for with ``deleted_details=True``).
    deleted: list[int] | None = None
    num_deleted: int = 0
    #: Messages per subject (asked for with ``subjects_filter=``).
    subjects: dict[str, int] | None = None
    num_subjects: int = 0
    lost: dict[str, Any] | None = None


@dataclasses.dataclass
class StreamSourceInfo(JsonObject):
    """How far a mirror or source has come."""

    name: str = ""
    lag: int = 0
    #: Seconds since it last heard from its origin (negative: never).
    active: Seconds = 0.0
    filter_subject: str | None = None
    subject_transforms: list[SubjectTransform] | None = None
    external: ExternalStream | None = None
    error: dict[str, Any] | None = None


@dataclasses.dataclass
class StreamInfo(JsonObject):
    """A stream's configuration and state, as ``stream_info`` and ``add_stream`` give."""

    config: StreamConfig
    state: StreamState = dataclasses.field(default_factory=StreamState)
    created: datetime | None = None
    cluster: ClusterInfo | None = None
    mirror: StreamSourceInfo | None = None
    sources: list[StreamSourceInfo] | None = None
    #: When the server answered.
    timestamp: Annotated[datetime | None, JsonName("ts")] = None


# ---------------------------------------------------------------------- consumers
@dataclasses.dataclass
class ConsumerConfig(JsonObject):
    """A consumer's configuration (ADR-13). Every field may be left ``None`` for the
    server's default; durations are seconds. A consumer without ``name`` or
    ``durable_name`` is ephemeral and named by the server."""

    name: str | None = None
    durable_name: str | None = None
    description: str | None = None
    deliver_policy: DeliverPolicy | None = None
    opt_start_seq: int | None = None
    opt_start_time: datetime | None = None
    ack_policy: AckPolicy | None = None
    ack_wait: Seconds | None = None
    max_deliver: int | None = None
    #: Seconds between redeliveries, one per attempt.
    backoff: list[Seconds] | None = None
    filter_subject: str | None = None
    filter_subjects: list[str] | None = None
    replay_policy: ReplayPolicy | None = None
    rate_limit_bps: int | None = None
    sample_freq: str | None = None
    max_waiting: int | None = None
    max_ack_pending: int | None = None
    headers_only: bool | None = None
    max_batch: int | None = None
    max_expires: Seconds | None = None
    max_bytes: int | None = None
    inactive_threshold: Seconds | None = None
    num_replicas: int | None = None
    mem_storage: bool | None = None
    metadata: dict[str, str] | None = None
    pause_until: datetime | None = None
    # push consumers
    deliver_subject: str | None = None
    deliver_group: str | None = None
    flow_control: bool | None = None
    idle_heartbeat: Seconds | None = None
    # priority groups (ADR-42)
    priority_policy: PriorityPolicy | None = None
    priority_groups: list[str] | None = None
    priority_timeout: Seconds | None = None


@dataclasses.dataclass
class SequenceInfo(JsonObject):
    """A consumer's position: its own sequence and the stream's."""

    consumer_seq: int = 0
    stream_seq: int = 0
    last_active: datetime | None = None


@dataclasses.dataclass
class ConsumerInfo(JsonObject):
    """A consumer's configuration and state."""

    stream_name: str = ""
    name: str = ""
    config: ConsumerConfig = dataclasses.field(default_factory=ConsumerConfig)
    created: datetime | None = None
    delivered: SequenceInfo = dataclasses.field(default_factory=SequenceInfo)
    ack_floor: SequenceInfo = dataclasses.field(default_factory=SequenceInfo)
    num_ack_pending: int = 0
    num_redelivered: int = 0
    num_waiting: int = 0
    num_pending: int = 0
    cluster: ClusterInfo | None = None
    push_bound: bool = False
    paused: bool = False
    #: Seconds the pause has still to run.
    pause_remaining: Seconds | None = None
    #: When the server answered.
    timestamp: Annotated[datetime | None, JsonName("ts")] = None


@dataclasses.dataclass
class ConsumerPause(JsonObject):
    """A consumer's pause, as ``pause_consumer`` and ``resume_consumer`` give."""

    paused: bool = False
    #: When it resumes (the zero time, year 1, when not paused).
    pause_until: datetime | None = None
    #: Seconds the pause has still to run.
    pause_remaining: Seconds | None = None


# ---------------------------------------------------------------------- account
@dataclasses.dataclass
class AccountLimits(JsonObject):
    """An account's JetStream limits (-1: none)."""

    max_memory: int = 0
    max_storage: int = 0
    max_streams: int = 0
    max_consumers: int = 0
    max_ack_pending: int = 0
    memory_max_stream_bytes: int = 0
    storage_max_stream_bytes: int = 0
    max_bytes_required: bool = False


@dataclasses.dataclass
class ApiStats(JsonObject):
    """The JetStream API calls an account made."""

    total: int = 0
    errors: int = 0


@dataclasses.dataclass
class AccountInfo(JsonObject):
    """An account's JetStream usage and limits, as ``account_info`` gives."""

    memory: int = 0
    storage: int = 0
    reserved_memory: int = 0
    reserved_storage: int = 0
    streams: int = 0
    consumers: int = 0
    limits: AccountLimits = dataclasses.field(default_factory=AccountLimits)
    domain: str | None = None
    api: ApiStats = dataclasses.field(default_factory=ApiStats)
    #: Usage per storage tier, as the server sent it.
    tiers: dict[str, Any] | None = None


# ---------------------------------------------------------------------- publishing
@dataclasses.dataclass(slots=True)
class PubAck:
    """The stream's acknowledgement of a publish (a plain record, not a
    :class:`JsonObject` and not frozen: one is built per publish, and a frozen or
    generic one costs several times as much)."""

    stream: str
    seq: int
    duplicate: bool = False
    domain: str = ""
