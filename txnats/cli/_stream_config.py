"""The flags of ``stream add`` and ``stream edit`` (``nats``'s names) and the
:class:`~txnats.jetstream.StreamConfig` fields they set."""

from __future__ import annotations

import argparse
import json
from typing import Any

from txnats.cli._common import fail
from txnats.cli._flags import Parser, duration, key_value, positive_int, size
from txnats.jetstream import StreamConfig

__all__ = ["add_config_flags", "config_changes", "read_config_file"]

_STORAGE = {"file": "file", "f": "file", "memory": "memory", "m": "memory"}
_RETENTION = {"limits": "limits", "interest": "interest", "workq": "workqueue",
              "work": "workqueue"}


def add_config_flags(p: Parser, creating: bool) -> None:
    """The configuration flags, on ``stream add`` (``creating``) or ``stream edit``;
    each left out changes nothing (the server's default on add)."""
    g = p.add_argument_group("configuration")
    g.add_argument("--subjects", action="append", metavar="SUBJECTS",
                   help="subjects the stream takes, repeatable or comma-separated")
    g.add_argument("--description", help="what the stream is for")
    g.add_argument("--storage", choices=sorted(_STORAGE), help="file or memory")
    g.add_argument("--compression", choices=["none", "s2"], help="compress file storage")
    g.add_argument("--replicas", type=positive_int, metavar="N",
                   help="copies of the data, clustered")
    g.add_argument("--tag", action="append", metavar="TAG", help="place on servers with this tag")
    g.add_argument("--cluster", help="place in this cluster")
    g.add_argument("--ack", action=argparse.BooleanOptionalAction, default=None,
                   help="acknowledge publishes (default: yes)")
    g.add_argument("--retention", choices=sorted(_RETENTION), help="limits, interest or work")
    g.add_argument("--discard", choices=["new", "old"], help="what a full stream drops")
    g.add_argument("--discard-per-subject", action=argparse.BooleanOptionalAction, default=None,
                   help="apply discard new to each subject's limit")
    if creating:
        g.add_argument("--first-sequence", type=positive_int, metavar="SEQ",
                       help="the first sequence")
        g.add_argument("--mirror", metavar="STREAM", help="mirror this stream")
    g.add_argument("--max-age", type=duration, metavar="DURATION",
                   help="keep messages this long (1h, 7d; 0: for ever)")
    g.add_argument("--max-bytes", type=size, metavar="BYTES", help="keep this many bytes (-1: any)")
    g.add_argument("--max-consumers", type=int, metavar="N", help="allow this many consumers")
    g.add_argument("--max-msg-size", type=size, metavar="BYTES", help="refuse larger messages")
    g.add_argument("--max-msgs", type=int, metavar="N", help="keep this many messages (-1: any)")
    g.add_argument("--max-msgs-per-subject", type=int, metavar="N",
                   help="keep this many messages per subject")
    g.add_argument("--dupe-window", type=duration, metavar="DURATION",
                   help="how long message ids are remembered to drop duplicates")
    g.add_argument("--source", action="append", metavar="STREAM", help="take messages from STREAM")
    for flag, what in (
        ("allow-rollup", "roll-ups by the Nats-Rollup header"),
        ("deny-delete", "deleting messages through the API (refused)"),
        ("deny-purge", "purging through the API (refused)"),
        ("allow-direct", "direct gets (default on add: yes)"),
        ("allow-mirror-direct", "direct gets on mirrors"),
        ("allow-msg-ttl", "per-message TTLs"),
    ):
        g.add_argument(f"--{flag}", action=argparse.BooleanOptionalAction, default=None, help=what)
    g.add_argument("--subject-del-markers-ttl", type=duration, metavar="DURATION",
                   help="keep delete markers this long")
    g.add_argument("--transform-source", metavar="SOURCE", help="subject transform source")
    g.add_argument("--transform-destination", metavar="DEST", help="subject transform destination")
    g.add_argument("--metadata", type=key_value, action="append", metavar="K=V",
                   help="metadata, repeatable")
    g.add_argument("--republish-source", metavar="SOURCE", help="republish what matches SOURCE")
    g.add_argument("--republish-destination", metavar="DEST", help="... to DEST")
    g.add_argument("--republish-headers", action="store_true", default=None,
                   help="republish headers only")
    g.add_argument("--limit-consumer-inactive", type=duration, metavar="DURATION",
                   help="the longest inactive threshold a consumer may have")
    g.add_argument("--limit-consumer-max-pending", type=positive_int, metavar="N",
                   help="the most acknowledgements a consumer may have pending")
    g.add_argument("--config", metavar="FILE",
                   help="the whole configuration, as the server's JSON, from FILE")


def _split(items: list[str] | None) -> list[str] | None:
    if items is None:
        return None
    return [s.strip() for item in items for s in item.split(",") if s.strip()]


def config_changes(args: argparse.Namespace, current: StreamConfig | None) -> dict[str, Any]:
    """The :class:`StreamConfig` fields the flags set (durations in seconds);
    ``current`` is the configuration being edited (None on add)."""
    v = vars(args)
    out: dict[str, Any] = {}
    plain = {
        "description": "description", "compression": "compression",
        "replicas": "num_replicas", "discard": "discard", "max_age": "max_age",
        "max_bytes": "max_bytes", "max_consumers": "max_consumers",
        "max_msg_size": "max_msg_size", "max_msgs": "max_msgs",
        "max_msgs_per_subject": "max_msgs_per_subject", "dupe_window": "duplicate_window",
        "discard_per_subject": "discard_new_per_subject", "allow_rollup": "allow_rollup_hdrs",
        "deny_delete": "deny_delete", "deny_purge": "deny_purge", "allow_direct": "allow_direct",
        "allow_mirror_direct": "mirror_direct", "allow_msg_ttl": "allow_msg_ttl",
        "subject_del_markers_ttl": "subject_delete_marker_ttl", "first_sequence": "first_seq",
    }
    for dest, name in plain.items():
        if v.get(dest) is not None:
            out[name] = v[dest]
    if v.get("discard_per_subject"):
        out["discard"] = "new"
    if args.subjects is not None:
        out["subjects"] = _split(args.subjects)
    if args.storage is not None:
        out["storage"] = _STORAGE[args.storage]
    if args.retention is not None:
        out["retention"] = _RETENTION[args.retention]
    if args.ack is not None:
        out["no_ack"] = not args.ack
    if v.get("mirror"):
        out["mirror"] = {"name": args.mirror}
    if args.source:
        out["sources"] = [{"name": s} for s in _split(args.source) or []]
    if args.metadata:
        out["metadata"] = {**((current.metadata or {}) if current else {}), **dict(args.metadata)}
    out.update(_parts(args, current))
    return out


def _parts(args: argparse.Namespace, current: StreamConfig | None) -> dict[str, Any]:
    """The nested parts (placement, subject transform, republish, consumer limits),
    as dicts of their fields (durations in seconds), what was set before kept."""
    out: dict[str, Any] = {}
    if args.tag or args.cluster:
        old = current.placement if current else None
        out["placement"] = {
            "cluster": args.cluster or (old.cluster if old else None),
            "tags": args.tag or (old.tags if old else None),
        }
    if args.transform_source is not None or args.transform_destination is not None:
        if args.transform_source is None or args.transform_destination is None:
            fail("--transform-source and --transform-destination go together", 2)
        out["subject_transform"] = {"src": args.transform_source,
                                    "dest": args.transform_destination}
    if args.republish_source is not None or args.republish_destination is not None:
        if args.republish_source is None or args.republish_destination is None:
            fail("--republish-source and --republish-destination go together", 2)
        out["republish"] = {"src": args.republish_source, "dest": args.republish_destination,
                            "headers_only": bool(args.republish_headers)}
    if args.limit_consumer_inactive is not None or args.limit_consumer_max_pending is not None:
        was = current.consumer_limits if current else None
        out["consumer_limits"] = {
            "inactive_threshold": args.limit_consumer_inactive
            if args.limit_consumer_inactive is not None
            else (was.inactive_threshold if was else None),
            "max_ack_pending": args.limit_consumer_max_pending
            or (was.max_ack_pending if was else None),
        }
    return out


def read_config_file(path: str, name: str | None) -> StreamConfig:
    """The configuration in the JSON file ``path`` (the server's JSON, as ``nats``
    writes it); its name is ``name`` if given.

    :raises CLIError: an unreadable file, not a JSON object, or another name.
    """
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        fail(f"--config: cannot read {path}: {e.strerror or e}")
    except ValueError as e:
        fail(f"--config: {path} is not valid JSON: {e}")
    if not isinstance(data, dict):
        fail(f"--config: {path} does not hold a JSON object")
    if name is not None:
        if data.get("name") not in (None, "", name):
            fail(f"--config: {path} configures stream {data['name']!r}, not {name!r}", 2)
        data["name"] = name
    if not data.get("name"):
        fail("give the stream's name (or a --config file that names it)", 2)
    return StreamConfig.from_json(data)
