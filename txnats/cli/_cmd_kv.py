"""The ``kv`` command: ``add``, ``info``, ``ls``, ``put``, ``get``, ``del``, ``purge``,
``history``, ``watch`` and ``keys`` of JetStream key-value buckets, with ``nats``'s
names and flags.

Each verb is one function below, the one place it calls the library.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from twisted.internet.interfaces import IReactorCore

from txnats.cli._common import confirm, fail, status
from txnats.cli._connection import run_verb
from txnats.cli._flags import (
    Parser,
    Subcommands,
    add_command,
    add_verb,
    add_verbs,
    duration,
    key_value,
    positive_int,
    size,
)
from txnats.cli._render import (
    columns,
    data_text,
    human_bytes,
    human_count,
    human_seconds,
    limit,
    print_json,
    stdout_bytes,
    table,
    when,
)
from txnats.jetstream import Entry, JetStreamContext, KeyValueStatus

__all__ = ["add_kv", "run_kv"]


def add_kv(commands: Subcommands, conn: Parser) -> None:
    """The ``kv`` command and its verbs."""
    p = add_command(
        commands, "kv", "use JetStream key-value buckets",
        "Create key-value buckets, put, get, delete and watch their keys.\n\n"
        "  txnats kv add CONFIG --history 5\n"
        "  txnats kv put CONFIG db.url postgres://db\n"
        "  txnats kv get CONFIG db.url --raw\n"
        "  txnats kv watch CONFIG 'db.>'",
        None,
    )
    p.set_defaults(command="kv")
    verbs = add_verbs(p, "kv_verb")
    v = add_verb(verbs, "add", _add, "create a bucket",
                 "Create a key-value bucket.\n\n  txnats kv add CONFIG --history 5 --ttl 1d",
                 conn, aliases=["new"])
    v.add_argument("bucket", metavar="BUCKET")
    _bucket_flags(v)
    v.add_argument("-j", "--json", action="store_true", help="print the bucket's stream JSON")

    v = add_verb(verbs, "info", _info, "describe a bucket",
                 "Show a bucket's configuration and size.\n\n  txnats kv info CONFIG",
                 conn, aliases=["status"])
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("-j", "--json", action="store_true", help="print the bucket's stream JSON")

    v = add_verb(verbs, "ls", _ls, "list the buckets, or a bucket's keys",
                 "Without BUCKET, list the buckets; with it, its keys.\n\n"
                 "  txnats kv ls\n  txnats kv ls CONFIG", conn, aliases=["list"])
    v.add_argument("bucket", metavar="BUCKET", nargs="?")
    v.add_argument("-n", "--names", action="store_true", help="print only the bucket names")
    v.add_argument("-j", "--json", action="store_true", help="print the names as JSON")

    v = add_verb(verbs, "keys", _keys, "list a bucket's keys",
                 "List the keys of BUCKET that have a value (matching FILTER).\n\n"
                 "  txnats kv keys CONFIG 'db.>'", conn)
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("filter", metavar="FILTER", nargs="?", default=">",
                   help="a key pattern (default: every key)")
    v.add_argument("-j", "--json", action="store_true", help="print the keys as JSON")
    _key_verbs(verbs, conn)


def _bucket_flags(p: Parser) -> None:
    g = p.add_argument_group("configuration")
    g.add_argument("--description", help="what the bucket is for")
    g.add_argument("--history", type=positive_int, default=1, metavar="N",
                   help="values kept per key, 1 to 64 (default: %(default)s)")
    g.add_argument("--storage", choices=["file", "f", "memory", "m"], default="file",
                   help="file or memory (default: %(default)s)")
    g.add_argument("--ttl", type=duration, metavar="DURATION", help="keep values this long")
    g.add_argument("--marker-ttl", type=duration, metavar="DURATION",
                   help="allow per-key TTLs; keep limit markers this long")
    g.add_argument("--replicas", type=positive_int, default=1, metavar="N",
                   help="copies of the data (default: %(default)s)")
    g.add_argument("--max-value-size", type=size, metavar="BYTES", help="the largest value")
    g.add_argument("--max-bucket-size", type=size, metavar="BYTES", help="the most bytes")
    g.add_argument("--tags", action="append", metavar="TAG", help="place on servers with TAG")
    g.add_argument("--cluster", help="place in this cluster")
    g.add_argument("--compress", action="store_true", help="compress the data")
    g.add_argument("--metadata", type=key_value, action="append", metavar="K=V",
                   help="metadata, repeatable")
    g.add_argument("--republish-source", metavar="SRC", help="republish the keys matching SRC")
    g.add_argument("--republish-destination", metavar="DEST", help="... to DEST")
    g.add_argument("--republish-headers", action="store_true", help="republish headers only")
    g.add_argument("--mirror", metavar="BUCKET", help="mirror another bucket")
    g.add_argument("--mirror-domain", metavar="DOMAIN", help="... in this JetStream domain")
    g.add_argument("--source", action="append", metavar="BUCKET",
                   help="take the keys of another bucket, repeatable")


def _key_verbs(verbs: Subcommands, conn: Parser) -> None:
    """The verbs acting on keys."""
    v = add_verb(verbs, "put", _put, "put a value",
                 "Store VALUE (or standard input, without VALUE) as KEY's latest value.\n\n"
                 "  txnats kv put CONFIG db.url postgres://db\n"
                 "  txnats kv put CONFIG cert < cert.pem", conn)
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("key", metavar="KEY")
    v.add_argument("value", metavar="VALUE", nargs="?", help="the value (default: stdin)")
    v.add_argument("-j", "--json", action="store_true", help="print the revision as JSON")

    v = add_verb(verbs, "get", _get, "print a value",
                 "Print KEY's latest value (or the one at --revision).\n\n"
                 "  txnats kv get CONFIG db.url --raw", conn)
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("key", metavar="KEY")
    v.add_argument("--revision", type=positive_int, metavar="N", help="this revision")
    v.add_argument("--raw", action="store_true", help="print only the value")
    v.add_argument("-j", "--json", action="store_true", help="print the entry as JSON")

    for name, help_, text in (
        ("del", "delete a key, or a bucket",
         "Delete KEY (keeping its history), or without KEY the whole bucket; asks\n"
         "first unless --force.\n\n  txnats kv del CONFIG db.url -f"),
        ("purge", "delete a key and its history",
         "Delete KEY and every kept value of it; asks first unless --force.\n\n"
         "  txnats kv purge CONFIG db.url -f"),
    ):
        v = add_verb(verbs, name, _del if name == "del" else _purge, help_, text, conn,
                     aliases=["rm"] if name == "del" else ())
        v.add_argument("bucket", metavar="BUCKET")
        v.add_argument("key", metavar="KEY", nargs="?" if name == "del" else None)
        v.add_argument("-f", "--force", action="store_true", help="do not ask")
        if name == "purge":
            v.add_argument("--ttl", type=duration, metavar="DURATION",
                           help="remove the purge marker itself after DURATION")

    v = add_verb(verbs, "history", _history, "show a key's kept values",
                 "Show every kept value of KEY, oldest first.\n\n"
                 "  txnats kv history CONFIG db.url", conn)
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("key", metavar="KEY")
    v.add_argument("-j", "--json", action="store_true", help="print the entries as JSON")

    v = add_verb(verbs, "watch", _watch, "print changes to keys",
                 "Print each key's latest value, then every change, until Ctrl-C (or\n"
                 "--count entries).\n\n  txnats kv watch CONFIG 'db.>' --updates", conn)
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("key", metavar="KEY", nargs="?", default=">", help="a key pattern")
    v.add_argument("--history", action="store_true", help="every kept value first")
    v.add_argument("--deletes", action=argparse.BooleanOptionalAction, default=True,
                   help="include deletes (default: yes)")
    v.add_argument("--updates", action="store_true", help="only changes from now on")
    v.add_argument("--revision", type=positive_int, metavar="N",
                   help="every entry from revision N on")
    v.add_argument("--count", type=positive_int, metavar="N", help="exit after N entries")
    v.add_argument("-j", "--json", action="store_true", help="print each entry as a JSON line")
    v.set_defaults(watching=True)


async def run_kv(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats kv VERB``."""
    return await run_verb(reactor, args)


# ====================================================================== output
def describe(s: KeyValueStatus) -> str:
    """A bucket's status for people."""
    info = s.stream_info
    cfg = info.config if info else None
    rows: list[tuple[str, object] | None] = [
        ("", "Configuration"),
        ("Bucket Name", s.bucket),
        ("Description", cfg.description) if cfg and cfg.description else None,
        ("History Kept", s.history),
        ("Values Stored", human_count(s.values)),
        ("Compressed", s.is_compressed),
        ("Backing Store Kind", s.backing_store),
        ("Bucket Size", human_bytes(s.bytes)),
        ("Maximum Bucket Size", limit(cfg.max_bytes, human_bytes)) if cfg else None,
        ("Maximum Value Size", limit(cfg.max_msg_size, human_bytes)) if cfg else None,
        ("Maximum Age", limit(s.ttl, human_seconds)),
        ("Per-Key TTL Markers", human_seconds(s.limit_marker_ttl)) if s.limit_marker_ttl
        else None,
        ("JetStream Stream", cfg.name) if cfg else None,
        ("Storage", str(cfg.storage or "file").capitalize()) if cfg else None,
        ("Mirror", s.mirror) if s.mirror else None,
        ("Sources", ", ".join(s.sources)) if s.sources else None,
    ]
    created = when(info.created) if info else "-"
    return columns(f"Information for Key-Value Store Bucket {s.bucket} created {created}", rows)


def entry_json(e: Entry) -> dict[str, Any]:
    """An entry as JSON: its value as text if it is UTF-8, else base64 (and said)."""
    text = data_text(e.value)
    return {
        "bucket": e.bucket, "key": e.key, "revision": e.revision, "operation": e.operation,
        "created": e.created.isoformat() if e.created else None, "delta": e.delta,
        "value": text, "value_encoding": "utf-8" if text.encode() == e.value else "base64",
    }


# ====================================================================== verbs
def _create_arguments(args: argparse.Namespace) -> dict[str, Any]:
    config: dict[str, Any] = {
        "history": args.history, "storage": "memory" if args.storage in ("m", "memory")
        else "file", "replicas": args.replicas, "compression": args.compress,
    }
    optional = {"description": "description", "ttl": "ttl", "marker_ttl": "limit_marker_ttl",
                "max_value_size": "max_value_size", "max_bucket_size": "max_bytes"}
    for dest, name in optional.items():
        if getattr(args, dest) is not None:
            config[name] = getattr(args, dest)
    if args.tags or args.cluster:
        config["placement"] = {k: v for k, v in (("tags", args.tags), ("cluster", args.cluster))
                               if v}
    if args.metadata:
        config["metadata"] = dict(args.metadata)
    if (args.republish_source is None) != (args.republish_destination is None):
        fail("--republish-source and --republish-destination go together", 2)
    if args.republish_source is not None:
        config["republish"] = {"src": args.republish_source, "dest": args.republish_destination,
                               "headers_only": args.republish_headers}
    if args.mirror:
        config["mirror"] = ({"bucket": args.mirror, "domain": args.mirror_domain}
                            if args.mirror_domain else args.mirror)
    elif args.mirror_domain:
        fail("--mirror-domain goes with --mirror", 2)
    if args.source:
        config["sources"] = list(args.source)
    return config


def _show(s: KeyValueStatus, as_json: bool) -> None:
    if as_json and s.stream_info is not None:
        print_json(s.stream_info.to_json())
    else:
        print(describe(s), flush=True)


async def _add(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    kv = await js.create_key_value(args.bucket, **_create_arguments(args))
    _show(await kv.status(), args.json)
    return 0


async def _info(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    kv = await js.key_value(args.bucket)
    _show(await kv.status(), args.json)
    return 0


async def _ls(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    if args.bucket is not None:
        args.filter = ">"
        return await _keys(reactor, js, args)
    if args.names or args.json:
        names = await js.key_value_names()
        if args.json:
            print_json(names)
        elif names:
            print("\n".join(names), flush=True)
        return 0
    buckets = await js.key_values()
    if not buckets:
        status("No Key-Value buckets found")
        return 0
    rows = [[b.bucket, (b.stream_info.config.description or "") if b.stream_info else "",
             when(b.stream_info.created) if b.stream_info else "-", human_bytes(b.bytes),
             human_count(b.values),
             when(b.stream_info.state.last_ts) if b.stream_info and b.values else "never"]
            for b in buckets]
    print(table(["Bucket", "Description", "Created", "Size", "Values", "Last Update"], rows,
                right={3, 4}), flush=True)
    return 0


async def _keys(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    kv = await js.key_value(args.bucket)
    keys = await kv.keys(args.filter)
    if args.json:
        print_json(keys)
    elif keys:
        print("\n".join(keys), flush=True)
    else:
        status(f"No keys found in bucket {args.bucket}")
    return 0


async def _put(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    value = sys.stdin.buffer.read() if args.value is None else os.fsencode(args.value)
    kv = await js.key_value(args.bucket)
    revision = await kv.put(args.key, value)
    if args.json:
        print_json({"bucket": args.bucket, "key": args.key, "revision": revision})
    else:
        status(f"Put {args.bucket} > {args.key} revision {revision}")
    return 0


async def _get(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    kv = await js.key_value(args.bucket)
    entry = await kv.get(args.key, args.revision)
    if args.json:
        print_json(entry_json(entry))
    elif args.raw:
        out = stdout_bytes()
        out.write(entry.value)
        out.flush()
    else:
        print(f"{entry.bucket} > {entry.key} revision: {entry.revision} "
              f"created @ {when(entry.created)}\n\n{data_text(entry.value, 120)}\n", flush=True)
    return 0


async def _del(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    kv = await js.key_value(args.bucket)
    if args.key is None:
        if await confirm(reactor, f"Really delete bucket {args.bucket}", args.force):
            await js.delete_key_value(args.bucket)
            status(f"Deleted bucket {args.bucket}")
        return 0
    if await confirm(reactor, f"Really delete key {args.bucket} > {args.key}", args.force):
        await kv.delete(args.key)
        status(f"Deleted {args.bucket} > {args.key}")
    return 0


async def _purge(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    kv = await js.key_value(args.bucket)
    question = f"Really purge key {args.bucket} > {args.key} and its history"
    if await confirm(reactor, question, args.force):
        await kv.purge(args.key, ttl=args.ttl)
        status(f"Purged {args.bucket} > {args.key}")
    return 0


async def _history(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    kv = await js.key_value(args.bucket)
    entries = await kv.history(args.key)
    if args.json:
        print_json([entry_json(e) for e in entries])
        return 0
    rows = [[e.key, e.revision, e.operation, when(e.created), human_count(len(e.value)),
             data_text(e.value, 40)] for e in entries]
    print(table(["Key", "Revision", "Op", "Created", "Length", "Value"], rows, right={1, 4}),
          flush=True)
    return 0


async def _watch(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    kv = await js.key_value(args.bucket)
    watcher = await kv.watch(
        args.key, include_history=args.history, ignore_deletes=not args.deletes,
        updates_only=args.updates, resume_from_revision=args.revision,
    )
    seen = 0
    out = stdout_bytes()
    try:
        async for entry in watcher:
            if entry is None:  # the initial values are all given
                continue
            seen += 1
            if args.json:
                line = json.dumps(entry_json(entry))
            else:
                value = f": {data_text(entry.value, 120)}" if entry.operation == "PUT" else ""
                line = (f"[{when(entry.created)}] {entry.operation} "
                        f"{entry.bucket} > {entry.key}{value}")
            out.write(line.encode() + b"\n")
            out.flush()
            if args.count is not None and seen >= args.count:
                break
    finally:
        watcher.stop()
    return 0
