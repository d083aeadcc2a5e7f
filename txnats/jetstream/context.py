"""The JetStream context: the ``$JS.API`` request/reply API, publishing with acks.

Built on the client's public API only (``request``, ``publish``, ``subscribe``,
``new_inbox``). Stream and consumer configurations and infos are the typed records of
:mod:`txnats.jetstream.config` (durations in seconds; a field a newer server adds is
kept in their ``extra`` and round-trips untouched); dicts of the same fields are taken
as input. Only :meth:`JetStreamContext.api_request` speaks the server's raw JSON.

The context is the top of ``txnats.jetstream``: the pull consumer and the stores it
hands out take it as an argument and know it only as a type, so it imports them and
they import nothing of it at run time.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, fail
from twisted.python.failure import Failure

from txnats._args import check_count, check_delay, check_timeout
from txnats.errors import (
    InvalidArgumentError,
    JetStreamError,
    JetStreamNotEnabledError,
    NatsError,
    NoRespondersError,
    NoStreamResponseError,
)
from txnats.jetstream._api import (
    RawStreamMsg,
    answer_value,
    api_error,
    bucket_not_found,
    check_name,
    check_publish_args,
    headers_for,
    parse_pub_ack,
    raw_from_direct,
    raw_from_json,
    subject_room,
)
from txnats.jetstream._domain import check_api_prefix, domain_api_prefix
from txnats.jetstream._manage import (
    Paged,
    consumer_listing,
    consumer_request,
    consumer_subject,
    pause_request,
    pause_time,
    stream_info_pages,
    stream_info_request,
    stream_listing,
)
from txnats.jetstream._window import PublishWindow
from txnats.jetstream.config import (
    AccountInfo,
    ConsumerConfig,
    ConsumerInfo,
    ConsumerPause,
    PubAck,
    StreamConfig,
    StreamInfo,
)
from txnats.jetstream.kv import KeyValue, KeyValueStatus
from txnats.jetstream.kv import bucket_names as kv_bucket_names
from txnats.jetstream.kv import list_buckets as kv_list_buckets
from txnats.jetstream.msg import JsMsg
from txnats.jetstream.object_store import ObjectStore, ObjectStoreStatus
from txnats.jetstream.object_store import list_stores as obj_list_stores
from txnats.jetstream.object_store import store_names as obj_store_names
from txnats.jetstream.ordered import OrderedConsumer, OrderedMessages
from txnats.jetstream.pull import PullConsumer
from txnats.jetstream.push import PushSubscription
from txnats.jetstream.push import subscribe as push_subscribe
from txnats.protocol.events import Msg
from txnats.protocol.headers import HeaderInput

if TYPE_CHECKING:
    from txnats.client import Client

# PubAck, RawStreamMsg, bucket_not_found and check_name live in _api now; they stay
# importable from here, where they used to be.
__all__ = ["JetStreamContext", "PubAck", "RawStreamMsg", "bucket_not_found", "check_name"]

#: err_codes that say JetStream is not enabled (for the account: 10039; at all: 10076).
_NOT_ENABLED = frozenset((10039, 10076))


class JetStreamContext:
    """JetStream for one client: ``nc.jetstream()`` or ``JetStreamContext(nc)``.

    ``domain`` or ``prefix`` (not both) select another JetStream domain or an imported
    API (ADR-19): ``domain="hub"`` is the prefix ``$JS.hub.API``, and the stores it
    hands out write through it too (as nats.go does). A domain is a name without
    whitespace, ``.``, ``*`` or ``>``, a prefix a subject without wildcards (trailing
    dots are dropped); an empty one stands for the local JetStream; a bad one raises
    :class:`InvalidArgumentError` here. ``timeout`` (seconds, finite and above zero)
    bounds every API request and publish acknowledgement.
    ``publish_async_max_pending`` (at least 1) bounds the publishes awaiting their
    acknowledgement; ``publish_async_stall_wait`` (seconds, 0 or
    more; 0.2 as in nats.go) is how long a ``publish_async`` call waits for room in a
    full window before failing with :class:`TooManyStalledMsgsError`. All may be
    changed later; a bad value raises :class:`InvalidArgumentError` and changes nothing.
    """

    def __init__(
        self,
        client: Client,
        *,
        prefix: str | None = None,
        domain: str | None = None,
        timeout: float = 5.0,
        publish_async_max_pending: int = 4000,
        publish_async_stall_wait: float = 0.2,
    ) -> None:
        if prefix is not None and domain is not None:
            raise InvalidArgumentError("give a JetStream prefix or a domain, not both")
        if domain is not None and domain != "":
            prefix = domain_api_prefix(domain)
        elif prefix is not None and prefix != "":
            prefix = check_api_prefix(prefix, "prefix")
        check_timeout("timeout", timeout, allow_none=False)
        self._timeout = float(timeout)
        self._window = PublishWindow(self, publish_async_max_pending, publish_async_stall_wait)
        self.client: Client = client
        self.prefix: str = prefix or "$JS.API"
        self.domain: str = domain or ""

    # ------------------------------------------------------------------ options
    @property
    def timeout(self) -> float:
        """Seconds every API request and publish acknowledgement may take."""
        return self._timeout

    @timeout.setter
    def timeout(self, value: float) -> None:
        check_timeout("timeout", value, allow_none=False)
        self._timeout = float(value)

    @property
    def publish_async_max_pending(self) -> int:
        """The most ``publish_async`` publishes awaiting their acknowledgement."""
        return self._window.max_pending

    @publish_async_max_pending.setter
    def publish_async_max_pending(self, value: int) -> None:
        self._window.max_pending = value

    @property
    def publish_async_stall_wait(self) -> float:
        """Seconds a ``publish_async`` call waits for room in a full window."""
        return self._window.stall_wait

    @publish_async_stall_wait.setter
    def publish_async_stall_wait(self, value: float) -> None:
        self._window.stall_wait = value

    # ------------------------------------------------------------------ the API
    def api_request(
        self, subject: str, payload: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Deferred[dict[str, Any]]:
        """Request ``<prefix>.<subject>`` with a JSON payload; fire with the JSON answer.

        ``timeout`` (seconds, above zero) overrides the context's for this request. An
        error object fails it with the matching :class:`APIError` subclass; no
        responder, or an answer that JetStream is not enabled for the account, fails it
        with :class:`JetStreamNotEnabledError`. A bad ``timeout`` fails it with
        :class:`InvalidArgumentError` before anything is sent.
        """
        try:
            wait = check_timeout("timeout", timeout)
        except NatsError as e:
            return fail(e)
        data = b"" if payload is None else json.dumps(payload).encode()
        d = self.client.request(
            f"{self.prefix}.{subject}", data, timeout=self._timeout if wait is None else wait
        )

        def decode(msg: Msg) -> dict[str, Any]:
            try:
                resp = json.loads(msg.data)
            except (ValueError, RecursionError):  # (nesting past Python's stack)
                raise JetStreamError(f"malformed JetStream API answer {msg.data[:64]!r}") from None
            if not isinstance(resp, dict):
                raise JetStreamError(f"malformed JetStream API answer {msg.data[:64]!r}")
            if "error" in resp:
                e = api_error(resp)
                if e.err_code in _NOT_ENABLED:  # the server has JetStream, the account not
                    raise JetStreamNotEnabledError(e.description, e.code, e.err_code)
                raise e
            return resp

        def no_js(f: Failure) -> Failure:
            if f.check(NoRespondersError):
                return Failure(JetStreamNotEnabledError(
                    f"no JetStream answers on {self.prefix} (not enabled for this account?)"
                ))
            return f

        return d.addCallbacks(decode, no_js)

    def account_info(self) -> Deferred[AccountInfo]:
        """The account's JetStream usage and limits."""
        return self.api_request("INFO").addCallback(AccountInfo.from_json)

    # ------------------------------------------------------------------ streams
    def add_stream(
        self, config: StreamConfig | Mapping[str, Any] | None = None, **fields: Any
    ) -> Deferred[StreamInfo]:
        """Create a stream from a :class:`StreamConfig`, or a dict and/or keyword
        arguments of its fields (durations in seconds: ``max_age=3600`` is an hour).

        Fires with its :class:`StreamInfo`; fails with :class:`StreamNameInUseError` if
        a stream of that name exists with another configuration, and with
        :class:`InvalidArgumentError` at once for a field :class:`StreamConfig` does
        not have or a bad value.
        """
        return self._stream_config_call("CREATE", config, fields)

    def update_stream(
        self, config: StreamConfig | Mapping[str, Any] | None = None, **fields: Any
    ) -> Deferred[StreamInfo]:
        """Change a stream's configuration (given as for :meth:`add_stream`); fires
        with its new :class:`StreamInfo`."""
        return self._stream_config_call("UPDATE", config, fields)

    def _stream_config_call(
        self, verb: str, config: StreamConfig | Mapping[str, Any] | None,
        fields: Mapping[str, Any],
    ) -> Deferred[StreamInfo]:
        try:
            cfg = StreamConfig.build(config, fields)
            name = check_name("stream", cfg.name)
        except NatsError as e:
            return fail(e)
        return self.api_request(f"STREAM.{verb}.{name}", cfg.to_json()).addCallback(
            StreamInfo.from_json
        )

    def stream_info(
        self, name: str, subjects_filter: str | None = None, *, deleted_details: bool = False
    ) -> Deferred[StreamInfo]:
        """The stream's :class:`StreamInfo`; :class:`StreamNotFoundError` if none.

        ``deleted_details=True`` lists the deleted sequences in ``state.deleted``;
        ``subjects_filter`` (a subject, wildcards allowed) counts the messages per
        subject in ``state.subjects``, every page of them.
        """
        try:
            check_name("stream", name)
            payload = stream_info_request(deleted_details, subjects_filter)
        except NatsError as e:
            return fail(e)
        return Deferred.fromCoroutine(
            stream_info_pages(self, name, deleted_details, subjects_filter, payload)
        )

    def streams(self, subject: str | None = None) -> Paged[StreamInfo]:
        """Every stream's :class:`StreamInfo` (or of those taking ``subject``), read
        lazily a page at a time: ``async for info in js.streams(): ...`` (or
        ``await js.streams().all()`` for a list)."""
        return stream_listing(self, subject, names=False)

    def delete_stream(self, name: str) -> Deferred[bool]:
        """Delete a stream and everything in it."""
        return self._named_call("stream", name, "STREAM.DELETE.", None, "success")

    def purge_stream(
        self, name: str, *, subject: str | None = None, seq: int | None = None,
        keep: int | None = None,
    ) -> Deferred[int]:
        """Remove messages (all, or those on ``subject``, below ``seq``, all but ``keep``).

        Fires with the number removed (ADR-10). ``seq`` is a stream sequence (at least
        1), ``keep`` a whole number (0 keeps none); anything else fails with
        :class:`InvalidArgumentError` before the request is sent.
        """
        try:
            if seq is not None:
                check_count("seq", seq)
            if keep is not None:
                check_count("keep", keep, minimum=0)
        except NatsError as e:
            return fail(e)
        payload: dict[str, Any] = {}
        if subject is not None:
            payload["filter"] = subject
        if seq is not None:
            payload["seq"] = seq
        if keep is not None:
            payload["keep"] = keep
        return self._named_call("stream", name, "STREAM.PURGE.", payload or None, "purged")

    def _named_call(
        self, kind: str, name: str, verb: str, payload: Mapping[str, Any] | None, field: str
    ) -> Deferred[Any]:
        try:
            check_name(kind, name)
        except NatsError as e:
            return fail(e)
        def value(resp: dict[str, Any]) -> int | bool:
            if field == "purged":
                return answer_value(resp, field, int, 0)
            return answer_value(resp, field, bool, False)

        return self.api_request(verb + name, payload).addCallback(value)

    def stream_names(self, subject: str | None = None) -> Deferred[list[str]]:
        """The names of every stream (or of those taking ``subject``), all pages."""
        names: list[str] = []

        def page(resp: dict[str, Any]) -> Deferred[list[str]] | list[str]:
            got = answer_value(resp, "streams", list, [])
            names.extend(n for n in got if isinstance(n, str))
            total = answer_value(resp, "total", int, 0)
            if got and len(names) < total:
                return ask(len(names))
            return names

        def ask(offset: int) -> Deferred[list[str]]:
            payload: dict[str, Any] = {"offset": offset}
            if subject is not None:
                payload["subject"] = subject
            return self.api_request("STREAM.NAMES", payload).addCallback(page)

        return ask(0)

    def get_msg(
        self, stream: str, seq: int | None = None, *, last_by_subject: str | None = None,
        next_by_subject: str | None = None, direct: bool = False,
    ) -> Deferred[RawStreamMsg]:
        """Read one stored message: by ``seq``, the last on a subject, or the next on a
        subject at or after ``seq``. ``direct=True`` uses the Direct Get API (ADR-31; the
        stream needs ``allow_direct``). Fails with :class:`MsgNotFoundError`.

        ``seq`` is a stream sequence: at least 1 (0 too with ``next_by_subject``: from
        the start); anything else fails with :class:`InvalidArgumentError` at once.
        """
        try:
            check_name("stream", stream)
            if seq is not None:
                check_count("seq", seq, minimum=0 if next_by_subject is not None else 1)
        except NatsError as e:
            return fail(e)
        req: dict[str, Any] = {}
        if seq is not None:
            req["seq"] = seq
        if last_by_subject is not None:
            req["last_by_subj"] = last_by_subject
        if next_by_subject is not None:
            req["next_by_subj"] = next_by_subject
        if not req:
            return fail(InvalidArgumentError("give seq, last_by_subject or next_by_subject"))
        if direct:
            return self._direct_get(stream, req)
        return self.api_request(f"STREAM.MSG.GET.{stream}", req).addCallback(raw_from_json)

    def _direct_get(self, stream: str, req: Mapping[str, Any]) -> Deferred[RawStreamMsg]:
        subject = f"{self.prefix}.DIRECT.GET.{stream}"
        last = req.get("last_by_subj") if set(req) == {"last_by_subj"} else None
        if last is not None and len(f"{subject}.{last}".encode()) <= subject_room(self.client):
            # The subject goes in the request subject: no JSON to encode or parse. (A
            # subject too long for that control line goes in the JSON body.)
            subject, data = f"{subject}.{last}", b""
        else:
            data = json.dumps(req).encode()
        return self.client.request(subject, data, timeout=self._timeout).addCallback(
            raw_from_direct
        )

    def delete_msg(self, stream: str, seq: int, *, erase: bool = False) -> Deferred[bool]:
        """Remove one message (``erase=True`` overwrites it on disk); ``seq`` at least 1."""
        try:
            check_count("seq", seq)
        except NatsError as e:
            return fail(e)
        payload: dict[str, Any] = {"seq": seq}
        if not erase:
            payload["no_erase"] = True
        return self._named_call("stream", stream, "STREAM.MSG.DELETE.", payload, "success")

    # ------------------------------------------------------------------ consumers
    def create_consumer(
        self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Deferred[ConsumerInfo]:
        """Create a consumer (action "create") from a :class:`ConsumerConfig`, or a dict
        and/or keyword arguments of its fields (durations in seconds); fires with its
        :class:`ConsumerInfo`.

        A consumer with ``name`` or ``durable_name`` is created under that name; one
        with neither is ephemeral and the server names it. Creating one that exists
        with the same configuration fires with its info; with another configuration it
        fails with :class:`ConsumerExistsError` and changes nothing.
        """
        return self._consumer_call(stream, config, fields, "create")

    def update_consumer(
        self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Deferred[ConsumerInfo]:
        """Change an existing consumer (action "update"; ``name`` or ``durable_name``
        required); :class:`ConsumerDoesNotExistError` if there is none."""
        return self._consumer_call(stream, config, fields, "update")

    def create_or_update_consumer(
        self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Deferred[ConsumerInfo]:
        """Create a consumer, or change the existing one of that name."""
        return self._consumer_call(stream, config, fields, "")

    def add_consumer(
        self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None = None,
        **fields: Any,
    ) -> Deferred[ConsumerInfo]:
        """The old name of :meth:`create_or_update_consumer` (it creates, or changes an
        existing consumer of that name): kept for existing code; new code says which it
        means with :meth:`create_consumer` or :meth:`update_consumer`."""
        return self._consumer_call(stream, config, fields, "")

    def _consumer_call(
        self, stream: str, config: ConsumerConfig | Mapping[str, Any] | None,
        fields: Mapping[str, Any], action: str,
    ) -> Deferred[ConsumerInfo]:
        try:
            cfg = ConsumerConfig.build(config, fields)
            subject = consumer_subject(stream, cfg)
            if action == "update" and not (cfg.name or cfg.durable_name):
                raise InvalidArgumentError("update_consumer needs the consumer's name")
        except NatsError as e:
            return fail(e)
        return self.api_request(subject, consumer_request(stream, cfg, action)).addCallback(
            ConsumerInfo.from_json
        )

    def consumer_info(self, stream: str, name: str) -> Deferred[ConsumerInfo]:
        """A consumer's :class:`ConsumerInfo`; :class:`ConsumerNotFoundError` if none."""
        try:
            check_name("stream", stream)
            check_name("consumer", name)
        except NatsError as e:
            return fail(e)
        return self.api_request(f"CONSUMER.INFO.{stream}.{name}").addCallback(
            ConsumerInfo.from_json
        )

    def delete_consumer(self, stream: str, name: str) -> Deferred[bool]:
        """Delete a consumer."""
        try:
            check_name("stream", stream)
        except NatsError as e:
            return fail(e)
        return self._named_call("consumer", name, f"CONSUMER.DELETE.{stream}.", None, "success")

    def consumers(self, stream: str) -> Paged[ConsumerInfo]:
        """The :class:`ConsumerInfo` of every consumer of ``stream``, read lazily a page
        at a time: ``async for info in js.consumers("ORDERS"): ...``. A bad stream name
        raises :class:`InvalidArgumentError` here."""
        return consumer_listing(self, stream, names=False)

    def consumer_names(self, stream: str) -> Paged[str]:
        """The names of the consumers of ``stream``, read lazily as :meth:`consumers`."""
        return consumer_listing(self, stream, names=True)

    def pause_consumer(
        self, stream: str, name: str, until: datetime | timedelta | float
    ) -> Deferred[ConsumerPause]:
        """Pause a consumer (server 2.11+) until ``until``: a ``datetime`` (naive: UTC),
        or seconds or a ``timedelta`` from now. It delivers nothing until then or
        :meth:`resume_consumer`; fires with its :class:`ConsumerPause`."""
        try:
            when = pause_time(until, datetime.now(UTC))
        except NatsError as e:
            return fail(e)
        return self._pause(stream, name, when)

    def resume_consumer(self, stream: str, name: str) -> Deferred[ConsumerPause]:
        """Resume a paused consumer (server 2.11+)."""
        return self._pause(stream, name, None)

    def _pause(self, stream: str, name: str, until: datetime | None) -> Deferred[ConsumerPause]:
        try:
            check_name("stream", stream)
            check_name("consumer", name)
        except NatsError as e:
            return fail(e)
        return self.api_request(
            f"CONSUMER.PAUSE.{stream}.{name}", pause_request(until)
        ).addCallback(ConsumerPause.from_json)

    def pull_consumer(self, stream: str, name: str) -> PullConsumer:
        """A handle on an existing pull consumer, for ``fetch``; no I/O."""
        return PullConsumer(self, check_name("stream", stream), check_name("consumer", name))

    # ------------------------------------------------------------------ publish
    def publish(
        self, subject: str, data: bytes = b"", *, headers: HeaderInput | None = None,
        msg_id: str | None = None, expected_stream: str | None = None,
        expected_last_seq: int | None = None, expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None, ttl: float | None = None,
        timeout: float | None = None, retry_attempts: int = 2, retry_wait: float = 0.25,
    ) -> Deferred[PubAck]:
        """Publish to a stream and fire with its :class:`PubAck`.

        ``msg_id`` sets ``Nats-Msg-Id`` (the stream drops duplicates within its window),
        the ``expected_*`` arguments make the stream refuse the message unless they hold
        (:class:`WrongLastSequenceError` and other :class:`APIError`s), ``ttl`` asks for
        a per-message TTL in seconds (ADR-43, at least 1). ``timeout`` (above zero;
        ``None``: the context's) bounds each attempt. A 503 (no stream yet, or a leader
        election) is retried ``retry_attempts`` times (0 or more) ``retry_wait`` seconds
        (0 or more) apart (ADR-22), then fails with :class:`NoStreamResponseError`.
        A bad number fails it with :class:`InvalidArgumentError` before anything is sent.
        """
        try:
            wait = check_timeout("timeout", timeout)
            check_count("retry_attempts", retry_attempts, minimum=0)
            check_delay("retry_wait", retry_wait)
            check_publish_args(expected_last_seq, expected_last_subject_seq, ttl)
            hdrs = headers_for(
                headers, msg_id, expected_stream, expected_last_seq,
                expected_last_subject_seq, expected_last_msg_id, ttl,
            )
        except NatsError as e:
            return fail(e)
        if wait is None:
            wait = self._timeout
        clock = self.client.clock
        attempts = [retry_attempts]

        def attempt() -> Deferred[PubAck]:
            return self.client.request(subject, data, timeout=wait, headers=hdrs).addCallbacks(
                parse_pub_ack, retry
            )

        def retry(f: Failure) -> Deferred[PubAck] | Failure:
            if not f.check(NoRespondersError):
                return f
            if attempts[0] <= 0:
                return Failure(NoStreamResponseError(f"no stream answers publishes on {subject!r}"))
            attempts[0] -= 1
            d: Deferred[None] = Deferred()
            clock.callLater(retry_wait, d.callback, None)
            return d.addCallback(lambda _: attempt())

        return attempt()

    @property
    def publish_async_pending(self) -> int:
        """Publishes sent by ``publish_async`` whose acknowledgement has not come yet."""
        return self._window.pending

    def publish_async(
        self, subject: str, data: bytes = b"", *, headers: HeaderInput | None = None,
        msg_id: str | None = None, expected_stream: str | None = None,
        expected_last_seq: int | None = None, expected_last_subject_seq: int | None = None,
        expected_last_msg_id: str | None = None, ttl: float | None = None,
        stall_wait: float | None = None,
    ) -> Deferred[PubAck]:
        """Publish without waiting; the returned Deferred fires with the :class:`PubAck`.

        At most ``publish_async_max_pending`` publishes await their acknowledgement. With
        that many out, the call waits for room (in call order, behind any call already
        waiting) up to ``stall_wait`` seconds (``None``: the context's
        ``publish_async_stall_wait``, 0.2 by default; 0: not at all), then fails its
        Deferred with :class:`TooManyStalledMsgsError`, having sent nothing. Cancelling
        a waiting call takes it out of the line. Bad input raises as ``publish`` does;
        when it raises, nothing was sent. A publish no stream takes fails its Deferred
        with :class:`NoStreamResponseError`, a refused one with its :class:`APIError`,
        and one still unacknowledged after the context's ``timeout`` (checked every half
        ``timeout``, so within 1.5 times it) with :class:`TimeoutError`: it may still
        have been stored, so publish with ``msg_id`` to retry safely. Closing the client
        fails the publishes still waiting with :class:`ConnectionClosedError`.
        """
        check_publish_args(expected_last_seq, expected_last_subject_seq, ttl)
        if stall_wait is not None:
            check_delay("stall_wait", stall_wait)
        hdrs = headers_for(
            headers, msg_id, expected_stream, expected_last_seq, expected_last_subject_seq,
            expected_last_msg_id, ttl,
        )
        return self._window.publish(subject, data, hdrs, stall_wait)

    def publish_async_room(self) -> Deferred[None]:
        """Fires at once if ``publish_async`` would send now; else once no more than
        half the window awaits acknowledgement (so that a loop waiting for room wakes
        once per half window, not once per acknowledgement)."""
        return self._window.room()

    def publish_async_complete(self) -> Deferred[None]:
        """Fires once every ``publish_async`` so far has its acknowledgement (or failed)."""
        return self._window.complete()

    # ------------------------------------------------------------------ stores
    def key_value(self, bucket: str) -> Deferred[KeyValue]:
        """Bind to an existing key-value bucket; :class:`BucketNotFoundError` if none."""
        return KeyValue.bind(self, bucket)

    def create_key_value(self, bucket: str, **config: Any) -> Deferred[KeyValue]:
        """Create a key-value bucket (``history``, ``ttl``, ``max_bytes``, ... ) and bind."""
        return KeyValue.create_bucket(self, bucket, **config)

    def delete_key_value(self, bucket: str) -> Deferred[bool]:
        """Delete a key-value bucket and every key in it."""
        try:
            check_name("bucket", bucket)
        except NatsError as e:
            return fail(e)
        return self.delete_stream(f"KV_{bucket}")

    def object_store(self, bucket: str) -> Deferred[ObjectStore]:
        """Bind to an existing object store; :class:`BucketNotFoundError` if none."""
        return ObjectStore.bind(self, bucket)

    def create_object_store(self, bucket: str, **config: Any) -> Deferred[ObjectStore]:
        """Create an object store and bind to it."""
        return ObjectStore.create(self, bucket, **config)

    def delete_object_store(self, bucket: str) -> Deferred[bool]:
        """Delete an object store and every object in it."""
        try:
            check_name("bucket", bucket)
        except NatsError as e:
            return fail(e)
        return self.delete_stream(f"OBJ_{bucket}")

    # ------------------------------------------------------------------ push, ordered
    def subscribe(
        self, subject: str, handler: Callable[[JsMsg], object] | None = None, **options: Any
    ) -> Deferred[PushSubscription]:
        """Consume ``subject`` through a push consumer; fires with the
        :class:`~txnats.jetstream.push.PushSubscription` once it is bound.

        Options: ``durable`` (bind to it if it exists, else create it), ``queue`` (a
        deliver group; its durable defaults to the group's name), ``stream`` (else the
        one stream taking ``subject``), ``deliver_policy``, ``opt_start_seq``,
        ``flow_control`` (with an ``idle_heartbeat``, 5 s unless given), ``idle_heartbeat``
        (seconds; silence for that long asks whether the consumer still exists, for
        twice that is reported to ``error_cb``), ``manual_ack`` (else a handler's message
        is acknowledged once it returned), ``ack_policy``, ``ack_wait``,
        ``max_ack_pending``, ``headers_only``, ``config`` (more :class:`ConsumerConfig`
        fields), ``error_cb``, ``pending_msgs_limit`` (the most messages waiting unread;
        the client's option by default; see
        :class:`~txnats.jetstream.push.PushSubscription`). Without a ``handler``, read
        it with ``next_msg()`` or ``async for``.
        """
        return push_subscribe(self, subject, handler, **options)

    def ordered_consumer(
        self, stream: str, handler: Callable[[JsMsg], object] | None = None, **options: Any
    ) -> Deferred[OrderedConsumer] | Deferred[OrderedMessages]:
        """Read ``stream`` in order, each message once (ADR-17), recreating the consumer
        after a gap, missed heartbeats or a reconnection.

        With a ``handler``, fires with the running :class:`OrderedConsumer`; the
        handler may be called before that, since the server can deliver the first
        messages ahead of its answer to the consumer's creation. Without a handler,
        fires with :class:`OrderedMessages` for ``async for``. Options:
        ``filter_subjects``, ``deliver_policy``, ``opt_start_seq``, ``headers_only``,
        ``heartbeat`` (seconds), ``max_resets`` (recreation attempts in a row before it
        gives up; unlimited by default), ``on_error`` (with a handler).
        """
        try:
            check_name("stream", stream)
        except NatsError as e:
            return fail(e)
        if handler is None:
            return OrderedMessages(self, stream, **options).start()
        oc = OrderedConsumer(self, stream, handler, **options)
        return oc.start().addCallback(lambda _: oc)

    # ------------------------------------------------------------------ store listings
    def key_value_names(self) -> Deferred[list[str]]:
        """The names of every key-value bucket, sorted."""
        return kv_bucket_names(self)

    def key_values(self) -> Deferred[list[KeyValueStatus]]:
        """The status of every key-value bucket, sorted by name."""
        return kv_list_buckets(self)

    def update_key_value(self, bucket: str, **config: Any) -> Deferred[KeyValue]:
        """Change a key-value bucket's configuration (arguments as for
        :meth:`create_key_value`, the whole configuration); fires with the bucket."""
        return KeyValue.create_bucket(self, bucket, update=True, **config)

    def object_store_names(self) -> Deferred[list[str]]:
        """The names of every object store, sorted."""
        return obj_store_names(self)

    def object_stores(self) -> Deferred[list[ObjectStoreStatus]]:
        """The status of every object store, sorted by name."""
        return obj_list_stores(self)
