"""Forwarding routes: the ``--forward`` spec, its subject mapping, and the counters.

A spec reads ``[js:STREAM:]SOURCE[:TARGET]=URL[,URL...][?option=value&...]``:

- ``orders.>=nats://other:4222`` forwards core messages on ``orders.>`` to the same
  subjects on the other system, at most once, through a queue group;
- ``orders.*.created:archive.$1=nats://other:4222`` maps the subject on the way (see
  :class:`SubjectMap`);
- ``js:ORDERS:orders.>=nats://other:4222`` forwards at least once from a durable pull
  consumer on the source stream ``ORDERS``.

The options after ``?`` are ``queue`` (core: the queue group), ``durable`` (JetStream:
the consumer's name), ``batch`` (JetStream: messages per pull, 1 to 1000) and ``creds``
(a ``.creds`` file for the target). Subjects in a spec may contain neither ``=`` nor
``:``; a password in a URL with ``?`` or ``,`` in it must be percent-encoded.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from urllib.parse import parse_qsl

from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError, NatsError
from txnats.jetstream.context import check_name
from txnats.protocol.commands import publish_subject, queue_name, subscribe_subject
from txnats.servers import parse_servers

__all__ = ["ForwardRoute", "ForwardStats", "SubjectMap", "parse_forward"]

_DOLLAR = re.compile(r"\$([0-9]+)")
_OPTIONS = frozenset({"queue", "durable", "batch", "creds"})
_EXAMPLE = "e.g. 'orders.>=nats://other:4222' or 'js:ORDERS:orders.>=nats://other:4222'"
#: The most messages one pull may ask for (the consumer's default max_ack_pending).
MAX_BATCH = 1000


@dataclass(frozen=True)
class SubjectMap:
    """How a source subject becomes a target subject.

    The target is a subject whose tokens are literals or wildcard references: ``*``
    takes the source's ``*`` tokens in order (the first ``*`` in the target the first
    in the source, and so on), ``$N`` takes the source's N-th ``*`` token (from 1), and a
    final ``>`` takes every token the source's ``>`` matched. So ``orders.>`` to
    ``archive.orders.>`` prefixes ``archive.``, and ``orders.*.*`` to
    ``by-region.$2.$1`` swaps two tokens. No target means the same subject.
    """

    source: str
    target: str | None = None
    #: Per target token: a literal, or the index of a source token (``-1``: the tail).
    plan: tuple[str | int, ...] = field(default=(), compare=False)

    @classmethod
    def build(cls, source: str, target: str | None) -> SubjectMap:
        """Check both subjects and make the plan.

        :raises InvalidArgumentError: a bad subject, a reference to a wildcard the
            source does not have, or a ``>`` not in the last place.
        """
        try:
            subscribe_subject(source)
        except NatsError as e:
            raise InvalidArgumentError(f"forward source: {e}") from None
        if target is None:
            return cls(source)
        tokens = source.split(".")
        stars = [i for i, t in enumerate(tokens) if t == "*"]
        plan: list[str | int] = []
        sample: list[str] = []
        next_star = 0
        for pos, tok in enumerate(target.split(".")):
            ref = _DOLLAR.fullmatch(tok)
            if tok == "*":
                if next_star >= len(stars):
                    raise InvalidArgumentError(
                        f"forward target {target!r} has more '*' than source {source!r}"
                    )
                plan.append(stars[next_star])
                next_star += 1
            elif ref is not None:
                n = int(ref.group(1))
                if not 1 <= n <= len(stars):
                    raise InvalidArgumentError(
                        f"forward target {target!r}: ${n} names no '*' of source {source!r}"
                    )
                plan.append(stars[n - 1])
            elif tok == ">":
                if tokens[-1] != ">":
                    raise InvalidArgumentError(
                        f"forward target {target!r} ends in '>' but source {source!r} does not"
                    )
                if pos != target.count("."):
                    raise InvalidArgumentError(
                        f"forward target {target!r}: '>' must be the last token"
                    )
                plan.append(-1)
            else:
                plan.append(tok)
            sample.append("x" if isinstance(plan[-1], int) else tok)
        try:
            publish_subject(".".join(sample))
        except NatsError as e:
            raise InvalidArgumentError(f"forward target {target!r}: {e}") from None
        return cls(source, target, tuple(plan))

    def apply(self, subject: str) -> str:
        """The target subject for ``subject`` (a subject the source pattern matched)."""
        if self.target is None:
            return subject
        tokens = subject.split(".")
        tail = len(self.source.split(".")) - 1
        out = []
        for step in self.plan:
            if isinstance(step, str):
                out.append(step)
            elif step < 0:
                out.append(".".join(tokens[tail:]))
            else:
                out.append(tokens[step])
        return ".".join(out)


@dataclass(frozen=True)
class ForwardRoute:
    """One parsed ``--forward`` spec (see :func:`parse_forward`).

    ``name`` is the spec with credentials redacted and options left out: a label for
    logs and metrics that never shows a secret.
    """

    name: str
    subjects: SubjectMap
    #: The target servers, as given (credentials included: never log this).
    servers: str = field(repr=False)
    #: The source stream: JetStream mode when set, core mode when None.
    stream: str | None = None
    #: Core mode: the queue group every bridge forwarding this route joins.
    queue: str = ""
    #: JetStream mode: the durable pull consumer every bridge shares.
    durable: str = ""
    #: JetStream mode: messages asked for per pull.
    batch: int = 100
    #: A ``.creds`` file for the target connection.
    creds: str | None = None

    @property
    def jetstream(self) -> bool:
        """True in JetStream mode (at least once), False in core mode (at most once)."""
        return self.stream is not None

    @property
    def source(self) -> str:
        """The subject (wildcards allowed) read on the source system."""
        return self.subjects.source

    def target_subject(self, subject: str) -> str:
        """The subject a message on ``subject`` is forwarded to."""
        return self.subjects.apply(subject)


@dataclass
class ForwardStats:
    """What one forwarder did (counters only grow)."""

    #: Messages handed to the target (core) or accepted by it (JetStream).
    forwarded: int = 0
    forwarded_bytes: int = 0
    #: Messages not forwarded, for good: core mode, those the target connection refused
    #: (its buffer full, closed, a subject too long for it); JetStream mode, those the
    #: target can never take (a subject too long, a payload too large), terminated.
    dropped: int = 0
    #: JetStream mode: publishes the target's duplicate window recognised (the message
    #: was stored already: a redelivery after an ack was lost); acknowledged, not stored.
    duplicates: int = 0
    #: JetStream mode: messages the target did not confirm, left for redelivery.
    retried: int = 0


def _bad(spec: str, why: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"bad forward spec {spec!r}: {why} ({_EXAMPLE})")


def _options(spec: str, query: str) -> dict[str, str]:
    try:
        pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=True)
    except ValueError:
        raise _bad(spec, f"cannot read the options {query!r}") from None
    opts: dict[str, str] = {}
    for key, value in pairs:
        if key not in _OPTIONS:
            raise _bad(spec, f"unknown option {key!r} (known: {', '.join(sorted(_OPTIONS))})")
        if key in opts:
            raise _bad(spec, f"option {key!r} given twice")
        if not value:
            raise _bad(spec, f"option {key!r} is empty")
        opts[key] = value
    return opts


def _label(stream: str | None, subjects: SubjectMap, where: str) -> str:
    head = "" if stream is None else f"js:{stream}:"
    mapped = "" if subjects.target is None else f":{subjects.target}"
    return f"{head}{subjects.source}{mapped}={where}"


def parse_forward(spec: str) -> ForwardRoute:
    """Parse a ``--forward`` spec: ``[js:STREAM:]SOURCE[:TARGET]=URL[,URL][?opts]``.

    :param spec: for example ``'orders.>=nats://other:4222'``.
    :returns: the route; its ``name`` is safe to log.
    :raises InvalidArgumentTypeError: ``spec`` is not a str.
    :raises InvalidArgumentError: anything wrong in it, named in the message.
    """
    if not isinstance(spec, str):
        raise InvalidArgumentTypeError(f"a forward spec is a str, not {type(spec).__name__}")
    left, sep, right = spec.partition("=")
    if not sep or not left.strip() or not right.strip():
        raise _bad(spec, "expected SUBJECT=URL")
    stream: str | None = None
    if left.startswith("js:"):
        stream, _, left = left[3:].partition(":")
        try:
            check_name("stream", stream)
        except NatsError as e:
            raise _bad(spec, str(e)) from None
    parts = left.split(":")
    if len(parts) > 2:
        raise _bad(spec, "expected SOURCE or SOURCE:TARGET before '='")
    try:
        subjects = SubjectMap.build(parts[0], parts[1] if len(parts) == 2 else None)
    except InvalidArgumentError as e:
        raise _bad(spec, str(e)) from None
    urls, _, query = right.partition("?")
    try:
        servers = parse_servers(urls)
    except NatsError as e:
        raise _bad(spec, f"target servers: {e}") from None
    opts = _options(spec, query) if query else {}
    where = ",".join(s.redacted for s in servers)
    name = _label(stream, subjects, where)
    # Every bridge given the same spec derives the same queue group and durable name
    # (from the route without credentials), so they share the work.
    digest = hashlib.sha256(name.encode()).hexdigest()[:12]
    batch = 100
    if "batch" in opts:
        if not opts["batch"].isdigit() or not 1 <= int(opts["batch"]) <= MAX_BATCH:
            raise _bad(spec, f"batch must be a whole number from 1 to {MAX_BATCH}")
        batch = int(opts["batch"])
    durable = opts.get("durable", f"txnats-forward-{digest}")
    try:
        check_name("durable", durable)
        queue_name(opts.get("queue", "q"))
    except NatsError as e:
        raise _bad(spec, str(e)) from None
    if stream is None and ("durable" in opts or "batch" in opts):
        raise _bad(spec, "durable and batch are JetStream options (js:STREAM:...)")
    if stream is not None and "queue" in opts:
        raise _bad(spec, "queue is a core option (JetStream routes share a durable)")
    return ForwardRoute(
        name=name, subjects=subjects, servers=urls, stream=stream,
        queue=opts.get("queue", f"txnats-forward-{digest}"), durable=durable, batch=batch,
        creds=opts.get("creds"),
    )
