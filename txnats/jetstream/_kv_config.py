"""A key-value bucket's names and configuration (ADR-8, ADR-48): the checks of bucket
names, keys and key patterns, and the stream a bucket is. No I/O; what
:mod:`txnats.jetstream.kv` and its callers share.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from txnats._args import check_count, check_delay
from txnats.errors import InvalidArgumentError
from txnats.jetstream._domain import check_api_prefix, domain_api_prefix

__all__ = [
    "MAX_HISTORY",
    "bucket_stream_config",
    "check_bucket",
    "check_key",
    "check_key_pattern",
    "patterns",
]

#: The most values a bucket may keep per key.
MAX_HISTORY: Final = 64

#: A duplicate window never longer than this (seconds), as nats.go sets it.
_MAX_DUPLICATE_WINDOW = 120.0

_BUCKET_RE = re.compile(r"[a-zA-Z0-9_-]+")
#: The longest bucket name: its stream's, ``KV_<bucket>``, is at most 255 bytes.
MAX_BUCKET = 255 - len("KV_")
_KEY_RE = re.compile(r"[-/_=.a-zA-Z0-9]+")
_KEY_TOKEN_RE = re.compile(r"[-/_=a-zA-Z0-9]+")


# ---------------------------------------------------------------------- validation
def check_bucket(bucket: object) -> str:
    """Return ``bucket`` if it is a valid bucket name (``[a-zA-Z0-9_-]+``), else raise
    :class:`InvalidArgumentError`."""
    if not isinstance(bucket, str) or not _BUCKET_RE.fullmatch(bucket):
        raise InvalidArgumentError(f"invalid bucket name {bucket!r}: use [a-zA-Z0-9_-]+")
    if len(bucket) > MAX_BUCKET:
        raise InvalidArgumentError(
            f"invalid bucket name {bucket[:40]!r}... ({len(bucket)} characters): at most"
            f" {MAX_BUCKET} (its stream KV_<bucket> is a name of at most 255 bytes)"
        )
    return bucket


def check_key(key: object) -> str:
    """Return ``key`` if it is a valid key, else raise :class:`InvalidArgumentError`.

    A key is ``[-/_=.a-zA-Z0-9]+`` with no empty token: no leading, trailing or
    doubled ``.`` (ADR-8).
    """
    if (
        not isinstance(key, str) or not _KEY_RE.fullmatch(key)
        or key[0] == "." or key[-1] == "." or ".." in key
    ):
        raise InvalidArgumentError(
            f"invalid key {key!r}: use [-/_=.a-zA-Z0-9]+ without empty '.'-separated tokens"
        )
    return key


def check_key_pattern(pattern: object) -> str:
    """Return ``pattern`` if it is a valid key or key wildcard (``*`` for one token,
    ``>`` as the last token for the rest), else raise :class:`InvalidArgumentError`."""
    if isinstance(pattern, str) and pattern:
        tokens = pattern.split(".")
        last = len(tokens) - 1
        if all(
            t == "*" or (t == ">" and i == last) or _KEY_TOKEN_RE.fullmatch(t)
            for i, t in enumerate(tokens)
        ):
            return pattern
    raise InvalidArgumentError(
        f"invalid key pattern {pattern!r}: '.'-separated tokens of [-/_=a-zA-Z0-9], "
        "'*', or a final '>'"
    )


def patterns(key_pattern: str | Sequence[str]) -> list[str]:
    pats = list(key_pattern) if isinstance(key_pattern, list | tuple) else [key_pattern]
    if not pats:
        raise InvalidArgumentError("give at least one key pattern")
    return [check_key_pattern(p) for p in pats]


#: The fields of a stream source (besides ``name`` and ``external``) a mirror or source
#: given as a dict may carry to the server.
_SOURCE_FIELDS = frozenset({"opt_start_seq", "opt_start_time", "filter_subject",
                            "subject_transforms"})
_TOPOLOGY_KEYS = _SOURCE_FIELDS | {"bucket", "name", "domain", "api_prefix", "external"}


def _source(origin: str | Mapping[str, Any], what: str) -> dict[str, Any]:
    """A bucket to mirror or source from: its name, or a dict with ``bucket`` (or the
    stream's ``name``; ``KV_`` is added if missing, as nats.go does), and optionally
    ``domain`` or ``api_prefix`` (a bucket in another JetStream domain, ADR-8
    cross-domain) or the server's ``external`` object; stream source fields
    (``filter_subject``, ...) pass through. Anything else is refused."""
    if isinstance(origin, str):
        origin = {"bucket": origin}
    if not isinstance(origin, Mapping):
        raise InvalidArgumentError(f"{what} must be a bucket name or a dict, not {origin!r}")
    unknown = sorted(str(k) for k in origin if k not in _TOPOLOGY_KEYS)
    if unknown:
        raise InvalidArgumentError(
            f"{what}: unknown field(s) {', '.join(unknown)}; use bucket (or name), "
            f"domain, api_prefix or external, and {', '.join(sorted(_SOURCE_FIELDS))}"
        )
    src = dict(origin)
    bucket = src.pop("bucket", None)
    name = src.pop("name", None)
    external = _external(
        src.pop("external", None), src.pop("domain", None), src.pop("api_prefix", None), what
    )
    if bucket is not None:
        if name is not None:
            raise InvalidArgumentError(f"{what}: give a bucket or a name, not both")
        name = "KV_" + check_bucket(bucket)
    if not isinstance(name, str) or not name:
        raise InvalidArgumentError(f"{what} needs a bucket (or a KV_ stream name)")
    if not name.startswith("KV_"):
        name = "KV_" + name
    check_bucket(name[3:])
    out: dict[str, Any] = {"name": name, **src}
    if external is not None:
        out["external"] = external
    return out


def _external(
    external: object, domain: object, api: object, what: str
) -> dict[str, Any] | None:
    """The ``external`` object of a source given by ``external``, ``domain`` or
    ``api_prefix`` (one of them; an empty domain or prefix is the local JetStream)."""
    given = [n for n, v in (("external", external), ("domain", domain),
                            ("api_prefix", api)) if v is not None and v != ""]
    if len(given) > 1:
        raise InvalidArgumentError(
            f"{what}: give one of a domain, an api_prefix or an external, not "
            f"{' and '.join(given)}"
        )
    if not given:
        return None
    if given == ["domain"]:
        return {"api": domain_api_prefix(domain, f"{what}'s domain")}
    if given == ["api_prefix"]:
        return {"api": check_api_prefix(api, f"{what}'s api_prefix")}
    if not isinstance(external, Mapping) or set(external) - {"api", "deliver"}:
        raise InvalidArgumentError(
            f"{what}: external must be a dict of api and deliver, not {external!r}"
        )
    out = dict(external)
    out["api"] = check_api_prefix(out.get("api"), f"{what}'s external api")
    return out


def bucket_stream_config(
    bucket: str,
    *,
    history: int = 1,
    ttl: float | None = None,
    max_value_size: int | None = None,
    max_bytes: int | None = None,
    storage: str = "file",
    replicas: int = 1,
    description: str | None = None,
    compression: bool = False,
    placement: dict[str, Any] | None = None,
    republish: dict[str, Any] | None = None,
    limit_marker_ttl: float | None = None,
    mirror: str | Mapping[str, Any] | None = None,
    sources: Sequence[str | Mapping[str, Any]] | None = None,
    metadata: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The stream configuration (the server's JSON) of the bucket ``bucket``; no I/O.

    ``history`` is 1 to :data:`MAX_HISTORY`. ``ttl`` (seconds, finite; 0 or ``None``:
    for ever) is the stream's ``max_age`` and caps its duplicate window (two minutes
    otherwise). ``max_value_size`` (the stream's ``max_msg_size``) and ``max_bytes``
    are whole numbers of bytes (0 or ``None``: no limit, as for the server);
    ``replicas`` at least 1.

    ``limit_marker_ttl`` (seconds, at least 1; ADR-48) turns on per-key TTLs and limit
    markers: the stream allows per-message TTLs, and a key removed by its TTL or the
    bucket's ``ttl`` leaves a marker (a ``PURGE`` entry for watchers) kept that long.

    ``mirror`` (one bucket) or ``sources`` (several) make a bucket that copies others
    (ADR-8 topologies): each a bucket name or a dict with ``bucket``, ``domain`` (in
    another JetStream domain) or ``api_prefix``, and stream source fields
    (``filter_subject``, ...). A mirror's writes go to the bucket it mirrors, through
    its domain's API prefix; sourced keys keep their names (unless
    ``subject_transforms`` is given). An unknown field, a bad domain or prefix, or
    both, raise :class:`InvalidArgumentError`.

    Raises :class:`InvalidArgumentError`, naming the argument, on a bad name or value.
    """
    _check_bucket_args(bucket, history, ttl, max_value_size, max_bytes, storage, replicas,
                       limit_marker_ttl, mirror is not None and bool(sources))
    window = _MAX_DUPLICATE_WINDOW
    if ttl and ttl < window:
        window = ttl
    cfg: dict[str, Any] = {
        "name": f"KV_{bucket}",
        "subjects": [f"$KV.{bucket}.>"],
        "retention": "limits",
        "max_msgs_per_subject": history,
        "max_msgs": -1,
        "max_bytes": max_bytes or -1,
        "max_age": int((ttl or 0) * 1e9),
        "max_msg_size": max_value_size or -1,
        "max_consumers": -1,
        "storage": storage,
        "discard": "new",
        "num_replicas": replicas,
        "duplicate_window": int(window * 1e9),
        "allow_rollup_hdrs": True,
        "deny_delete": True,
        "allow_direct": True,
    }
    if description:
        cfg["description"] = description
    if compression:
        cfg["compression"] = "s2"
    if placement is not None:
        cfg["placement"] = placement
    if republish is not None:
        cfg["republish"] = republish
    if limit_marker_ttl:
        cfg["allow_msg_ttl"] = True
        cfg["subject_delete_marker_ttl"] = int(limit_marker_ttl * 1e9)
    if metadata:
        if not all(isinstance(k, str) and isinstance(v, str) for k, v in metadata.items()):
            raise InvalidArgumentError("bucket metadata must map strings to strings")
        cfg["metadata"] = dict(metadata)
    _copy_topology(cfg, bucket, mirror, sources)
    return cfg


def _check_bucket_args(
    bucket: str, history: int, ttl: float | None, max_value_size: int | None,
    max_bytes: int | None, storage: str, replicas: int, limit_marker_ttl: float | None,
    both_topologies: bool,
) -> None:
    """:func:`bucket_stream_config`'s checks, each naming its argument."""
    check_bucket(bucket)
    check_count("history", history)
    if history > MAX_HISTORY:
        raise InvalidArgumentError(f"history must be at most {MAX_HISTORY}, not {history!r}")
    if ttl is not None:
        check_delay("ttl", ttl)
    if max_value_size is not None:
        check_count("max_value_size", max_value_size, minimum=0)
    if max_bytes is not None:
        check_count("max_bytes", max_bytes, minimum=0)
    if storage not in ("file", "memory"):
        raise InvalidArgumentError(f"storage must be 'file' or 'memory', not {storage!r}")
    check_count("replicas", replicas)
    if limit_marker_ttl is not None:
        check_delay("limit_marker_ttl", limit_marker_ttl)
        if 0 < limit_marker_ttl < 1:
            raise InvalidArgumentError(
                f"limit_marker_ttl must be at least 1 second, not {limit_marker_ttl!r}"
            )
    if both_topologies:
        raise InvalidArgumentError("a bucket mirrors one bucket or has sources, not both")


def _copy_topology(
    cfg: dict[str, Any], bucket: str, mirror: str | Mapping[str, Any] | None,
    sources: Sequence[str | Mapping[str, Any]] | None,
) -> None:
    """Make ``cfg`` mirror one bucket or source several (keys keep their names)."""
    if mirror is not None:
        cfg["mirror"] = _source(mirror, "mirror")
        cfg["mirror_direct"] = True
        del cfg["subjects"]  # a mirror takes its origin's messages only
    elif sources:
        srcs = []
        for origin in sources:
            src = _source(origin, "a source")
            name = src["name"][3:]
            if name != bucket and "subject_transforms" not in src:
                src["subject_transforms"] = [
                    {"src": f"$KV.{name}.>", "dest": f"$KV.{bucket}.>"}
                ]
            srcs.append(src)
        cfg["sources"] = srcs
