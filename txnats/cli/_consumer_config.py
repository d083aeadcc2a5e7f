"""The flags of ``consumer add`` (``nats``'s names) and the
:class:`~txnats.jetstream.ConsumerConfig` they make."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime, timedelta
from typing import Any

from txnats.cli._common import fail
from txnats.cli._flags import Parser, duration, key_value, positive_int, size
from txnats.jetstream import ConsumerConfig

__all__ = ["add_consumer_config_flags", "consumer_config"]


def add_consumer_config_flags(p: Parser) -> None:
    """``consumer add``'s configuration flags; those left out take the server's
    defaults (a pull consumer, explicit acknowledgements, delivering all)."""
    g = p.add_argument_group("configuration")
    g.add_argument("--pull", action="store_true", help="a pull consumer (the default)")
    g.add_argument("--target", metavar="SUBJECT", help="a push consumer delivering to SUBJECT")
    g.add_argument("--deliver-group", metavar="GROUP", help="push: deliver to this queue group")
    g.add_argument("--ephemeral", action="store_true", help="an ephemeral consumer (no name)")
    g.add_argument("--ack", choices=["none", "all", "explicit"], help="acknowledgement policy")
    g.add_argument("--deliver", metavar="POLICY",
                   help="where to start: all, new, last, subject (the last per subject), "
                   "a stream sequence, or a duration ago (1h)")
    g.add_argument("--description", help="what the consumer is for")
    g.add_argument("--filter", action="append", metavar="SUBJECTS",
                   help="only these subjects, repeatable or comma-separated")
    g.add_argument("--flow-control", action="store_true", default=None,
                   help="push: flow control")
    g.add_argument("--heartbeat", type=duration, metavar="DURATION",
                   help="push: idle heartbeat interval")
    g.add_argument("--headers-only", action=argparse.BooleanOptionalAction, default=None,
                   help="deliver headers only, no data")
    g.add_argument("--max-deliver", type=int, metavar="TRIES",
                   help="deliver a message at most TRIES times")
    g.add_argument("--max-pending", type=int, metavar="N",
                   help="at most N acknowledgements pending")
    g.add_argument("--max-waiting", type=positive_int, metavar="PULLS",
                   help="pull: at most PULLS waiting pulls")
    g.add_argument("--max-pull-batch", type=positive_int, metavar="BATCH",
                   help="pull: the largest batch a pull may ask for")
    g.add_argument("--max-pull-expire", type=duration, metavar="EXPIRES",
                   help="pull: the longest a pull may wait")
    g.add_argument("--max-pull-bytes", type=size, metavar="BYTES",
                   help="pull: the most bytes a pull may ask for")
    g.add_argument("--replay", choices=["instant", "original"], help="replay policy")
    g.add_argument("--sample", type=int, metavar="PERCENT",
                   help="sample this percentage of acknowledgements")
    g.add_argument("--wait", type=duration, metavar="DURATION",
                   help="acknowledgement wait (30s)")
    g.add_argument("--inactive-threshold", type=duration, metavar="DURATION",
                   help="remove the consumer after it is idle this long")
    g.add_argument("--memory", action="store_true", default=None,
                   help="keep the consumer's state in memory")
    g.add_argument("--replicas", type=positive_int, metavar="N", help="copies of its state")
    g.add_argument("--metadata", type=key_value, action="append", metavar="K=V",
                   help="metadata, repeatable")
    g.add_argument("--backoff", choices=["none", "linear"],
                   help="redelivery back-off: linear from --backoff-min to --backoff-max")
    g.add_argument("--backoff-steps", type=positive_int, default=10, metavar="N",
                   help="back-off steps (default: %(default)s)")
    g.add_argument("--backoff-min", type=duration, default=60.0, metavar="DURATION",
                   help="the shortest back-off (default: 1m)")
    g.add_argument("--backoff-max", type=duration, default=1200.0, metavar="DURATION",
                   help="the longest back-off (default: 20m)")
    g.add_argument("--config", metavar="FILE",
                   help="the whole configuration, as the server's JSON, from FILE")


def _deliver(policy: str) -> dict[str, Any]:
    """``--deliver``: a policy, a stream sequence, or a duration ago."""
    named = {"all": "all", "new": "new", "last": "last", "subject": "last_per_subject",
             "last_per_subject": "last_per_subject"}
    if policy in named:
        return {"deliver_policy": named[policy]}
    if policy.isdigit():
        return {"deliver_policy": "by_start_sequence", "opt_start_seq": int(policy)}
    try:
        ago = duration(policy)
    except argparse.ArgumentTypeError:
        fail(f"--deliver: not a policy, a sequence or a duration: {policy!r}", 2)
    return {"deliver_policy": "by_start_time",
            "opt_start_time": datetime.now(UTC) - timedelta(seconds=ago)}


def _backoff(args: argparse.Namespace) -> list[float]:
    steps, low, high = args.backoff_steps, args.backoff_min, args.backoff_max
    if high < low:
        fail("--backoff-max must not be below --backoff-min", 2)
    if steps == 1:
        return [low]
    return [low + (high - low) * i / (steps - 1) for i in range(steps)]


def _from_file(path: str) -> dict[str, Any]:
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as e:
        fail(f"--config: cannot read {path}: {e.strerror or e}")
    except ValueError as e:
        fail(f"--config: {path} is not valid JSON: {e}")
    if not isinstance(data, dict):
        fail(f"--config: {path} does not hold a JSON object")
    return data


def consumer_config(args: argparse.Namespace) -> ConsumerConfig:
    """The configuration the flags (and ``--config``) give, named ``args.consumer``."""
    base = ConsumerConfig.from_json(_from_file(args.config)) if args.config else ConsumerConfig()
    v = vars(args)
    # Explicit acknowledgements unless said (as nats and nats.go do; the server's own
    # default, for a configuration without ack_policy, is none).
    fields: dict[str, Any] = {} if base.ack_policy else {"ack_policy": "explicit"}
    plain = {
        "target": "deliver_subject", "deliver_group": "deliver_group",
        "description": "description", "ack": "ack_policy", "flow_control": "flow_control",
        "heartbeat": "idle_heartbeat", "headers_only": "headers_only",
        "max_deliver": "max_deliver", "max_pending": "max_ack_pending",
        "max_waiting": "max_waiting", "max_pull_batch": "max_batch",
        "max_pull_expire": "max_expires", "max_pull_bytes": "max_bytes",
        "replay": "replay_policy", "wait": "ack_wait",
        "inactive_threshold": "inactive_threshold", "memory": "mem_storage",
        "replicas": "num_replicas",
    }
    for dest, name in plain.items():
        if v.get(dest) is not None:
            fields[name] = v[dest]
    if args.pull and args.target:
        fail("--pull and --target: a consumer is pull or push, not both", 2)
    if args.deliver is not None:
        fields.update(_deliver(args.deliver))
    if args.filter:
        subjects = [s.strip() for f in args.filter for s in f.split(",") if s.strip()]
        if len(subjects) == 1:
            fields["filter_subject"] = subjects[0]
        else:
            fields["filter_subjects"] = subjects
    if args.sample is not None:
        fields["sample_freq"] = f"{args.sample}%"
    if args.metadata:
        fields["metadata"] = dict(args.metadata)
    if args.backoff == "linear":
        fields["backoff"] = _backoff(args)
        if args.max_deliver is None:
            fields["max_deliver"] = len(fields["backoff"]) + 1
    fields.update(_name(args, base))
    return base.with_fields(fields)


def _name(args: argparse.Namespace, base: ConsumerConfig) -> dict[str, Any]:
    if args.ephemeral:
        if args.consumer:
            fail("an --ephemeral consumer has no name: leave CONSUMER out", 2)
        return {"durable_name": None, "name": None}
    name = args.consumer or base.durable_name or base.name
    if not name:
        fail("give the consumer's name (or --ephemeral)", 2)
    return {"durable_name": name, "name": None}
