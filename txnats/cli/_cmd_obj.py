"""The ``obj`` command (also ``object``): ``add``, ``ls``, ``put``, ``get``, ``rm``,
``info`` and ``watch`` of JetStream object stores, with ``nats``'s names and flags;
``put`` and ``get`` draw a progress bar on a terminal.

Each verb is one function below, the one place it calls the library.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import IO, Any, BinaryIO, cast

from twisted.internet.interfaces import IReactorCore, IReactorTime

from txnats.cli._common import confirm, duration, fail, status
from txnats.cli._connection import run_verb
from txnats.cli._flags import (
    Parser,
    Subcommands,
    add_command,
    add_verb,
    add_verbs,
    key_value,
    positive_int,
    size,
)
from txnats.cli._flags import duration as duration_flag
from txnats.cli._flags import header as header_flag
from txnats.cli._progress import Bar, stderr_bar
from txnats.cli._render import (
    columns,
    human_bytes,
    human_count,
    human_seconds,
    limit,
    print_json,
    stdout_bytes,
    table,
    when,
)
from txnats.errors import ObjectNotFoundError
from txnats.jetstream import JetStreamContext, ObjectInfo, ObjectStoreStatus

__all__ = ["add_obj", "run_obj"]


def add_obj(commands: Subcommands, conn: Parser) -> None:
    """The ``obj`` command and its verbs."""
    p = add_command(
        commands, "obj", "use JetStream object stores",
        "Create object stores; put files in them, get them back, list and watch them.\n\n"
        "  txnats obj add FILES\n"
        "  txnats obj put FILES ./report.pdf\n"
        "  txnats obj get FILES report.pdf -O /tmp/report.pdf\n"
        "  txnats obj ls FILES",
        None, aliases=["object"],
    )
    p.set_defaults(command="obj")
    verbs = add_verbs(p, "obj_verb")
    v = add_verb(verbs, "add", _add, "create an object store",
                 "Create an object store.\n\n  txnats obj add FILES --max-bucket-size 10GiB",
                 conn)
    v.add_argument("bucket", metavar="BUCKET")
    g = v.add_argument_group("configuration")
    g.add_argument("--ttl", type=duration_flag, metavar="DURATION", help="keep objects this long")
    g.add_argument("--replicas", type=positive_int, default=1, metavar="N",
                   help="copies of the data (default: %(default)s)")
    g.add_argument("--max-bucket-size", type=size, metavar="BYTES", help="the most bytes")
    g.add_argument("--description", help="what the store is for")
    g.add_argument("--storage", choices=["file", "f", "memory", "m"], default="file",
                   help="file or memory (default: %(default)s)")
    g.add_argument("--tags", action="append", metavar="TAG", help="place on servers with TAG")
    g.add_argument("--cluster", help="place in this cluster")
    g.add_argument("--metadata", type=key_value, action="append", metavar="K=V",
                   help="metadata, repeatable")
    g.add_argument("--compress", action="store_true", help="compress the data")
    v.add_argument("-j", "--json", action="store_true", help="print the store's stream JSON")

    v = add_verb(verbs, "ls", _ls, "list the stores, or a store's objects",
                 "Without BUCKET, list the object stores; with it, its objects.\n\n"
                 "  txnats obj ls\n  txnats obj ls FILES", conn, aliases=["list"])
    v.add_argument("bucket", metavar="BUCKET", nargs="?")
    v.add_argument("-n", "--names", action="store_true", help="print only the names")
    v.add_argument("-j", "--json", action="store_true", help="print as JSON")

    v = add_verb(verbs, "info", _info, "describe a store or an object",
                 "Show an object store's configuration, or an object's metadata.\n\n"
                 "  txnats obj info FILES report.pdf", conn, aliases=["show"])
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("name", metavar="NAME", nargs="?", help="the object")
    v.add_argument("-j", "--json", action="store_true", help="print as JSON")

    v = add_verb(verbs, "rm", _rm, "remove an object, or a store",
                 "Remove object NAME, or without NAME the whole store; asks first unless\n"
                 "--force.\n\n  txnats obj rm FILES report.pdf -f", conn, aliases=["del"])
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("name", metavar="NAME", nargs="?", help="the object")
    v.add_argument("-f", "--force", action="store_true", help="do not ask")

    v = add_verb(verbs, "watch", _watch, "print changes to a store's objects",
                 "Print each object, then every put and delete, until Ctrl-C (or --count).\n\n"
                 "  txnats obj watch FILES", conn)
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("--count", type=positive_int, metavar="N", help="exit after N changes")
    v.add_argument("-j", "--json", action="store_true", help="print each as a JSON line")
    v.set_defaults(watching=True)
    _transfers(verbs, conn)


def _transfers(verbs: Subcommands, conn: Parser) -> None:
    """``put`` and ``get``."""
    v = add_verb(verbs, "put", _put, "put a file in a store",
                 "Store FILE (or standard input, with --name) as an object; asks before\n"
                 "replacing one unless --force.\n\n"
                 "  txnats obj put FILES ./report.pdf\n"
                 "  tar c dir | txnats obj put FILES --name dir.tar -f", conn)
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("file", metavar="FILE", nargs="?", help="the file (default: stdin)")
    v.add_argument("--name", help="the object's name (default: the file's name)")
    v.add_argument("--description", help="what the object is")
    v.add_argument("-H", "--header", type=header_flag, action="append", default=[],
                   metavar="K:V", help="a header of the object, repeatable")
    v.add_argument("--chunk-size", type=size, metavar="BYTES", help="the size of each chunk")
    v.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="draw a progress bar on a terminal (default: yes)")
    v.add_argument("-f", "--force", action="store_true", help="replace without asking")
    v.add_argument("-j", "--json", action="store_true", help="print the object's info as JSON")

    v = add_verb(verbs, "get", _get, "get an object from a store",
                 "Write object NAME to a file named as it is (or --output; '-' for\n"
                 "standard output); asks before replacing a file unless --force.\n\n"
                 "  txnats obj get FILES report.pdf -O /tmp/r.pdf\n"
                 "  txnats obj get FILES dir.tar -O - | tar x", conn)
    v.add_argument("bucket", metavar="BUCKET")
    v.add_argument("name", metavar="NAME", help="the object")
    v.add_argument("-O", "--output", metavar="FILE", help="where to write it ('-': stdout)")
    v.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                   help="draw a progress bar on a terminal (default: yes)")
    v.add_argument("-f", "--force", action="store_true", help="replace a file without asking")


async def run_obj(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats obj VERB``."""
    return await run_verb(reactor, args)


# ====================================================================== output
def describe(s: ObjectStoreStatus) -> str:
    """An object store's status for people."""
    cfg = s.stream_info.config
    rows: list[tuple[str, object] | None] = [
        ("", "Configuration"),
        ("Bucket Name", s.bucket),
        ("Description", s.description) if s.description else None,
        ("Replicas", s.replicas),
        ("TTL", limit(s.ttl, human_seconds)),
        ("Sealed", s.sealed),
        ("Size", human_bytes(s.size)),
        ("Maximum Bucket Size", limit(cfg.max_bytes, human_bytes)),
        ("Backing Store Kind", s.backing_store),
        ("JetStream Stream", cfg.name),
        ("Storage", s.storage.capitalize()),
        ("Compressed", s.compressed),
    ]
    if s.metadata:
        rows += [("", "Metadata"), *sorted(s.metadata.items())]
    title = f"Information for Object Store {s.bucket} created {when(s.stream_info.created)}"
    return columns(title, rows)


def object_json(info: ObjectInfo) -> dict[str, Any]:
    """An object's info as JSON: its metadata message's fields, with its time."""
    data: dict[str, Any] = json.loads(info.to_json())
    data["mtime"] = info.mtime.isoformat() if info.mtime else None
    return data


def _describe_object(info: ObjectInfo) -> str:
    rows: list[tuple[str, object] | None] = [
        ("Name", info.name), ("Description", info.description) if info.description else None,
        ("Bucket", info.bucket), ("Link", f"{info.link.bucket} > {info.link.name or '*'}")
        if info.link else None,
        ("Size", human_bytes(info.size)), ("Modification Time", when(info.mtime)),
        ("Chunks", human_count(info.chunks)), ("Digest", info.digest or "-"),
        ("Deleted", True) if info.deleted else None,
    ]
    for name, values in sorted(info.headers.items()):
        rows += [(f"Header {name}", v) for v in values]
    for key, value in sorted(info.metadata.items()):
        rows.append((f"Metadata {key}", value))
    return columns(f"Object information for {info.bucket} > {info.name}", rows)


# ====================================================================== verbs
async def _add(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    config: dict[str, Any] = {
        "replicas": args.replicas, "compression": args.compress,
        "storage": "memory" if args.storage in ("m", "memory") else "file",
    }
    for dest, name in (("ttl", "ttl"), ("max_bucket_size", "max_bytes"),
                       ("description", "description")):
        if getattr(args, dest) is not None:
            config[name] = getattr(args, dest)
    if args.metadata:
        config["metadata"] = dict(args.metadata)
    if args.tags or args.cluster:
        config["placement"] = {k: v for k, v in (("tags", args.tags), ("cluster", args.cluster))
                               if v}
    store = await js.create_object_store(args.bucket, **config)
    s = await store.status()
    if args.json:
        print_json(s.stream_info.to_json())
    else:
        print(describe(s), flush=True)
    return 0


async def _ls(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    if args.bucket is None:
        if args.names or args.json:
            names = await js.object_store_names()
            if args.json:
                print_json(names)
            elif names:
                print("\n".join(names), flush=True)
            return 0
        stores = await js.object_stores()
        if not stores:
            status("No Object Store buckets found")
            return 0
        rows = [[s.bucket, s.description or "", when(s.stream_info.created),
                 human_bytes(s.size), limit(s.ttl, human_seconds)] for s in stores]
        print(table(["Bucket", "Description", "Created", "Size", "TTL"], rows, right={3}),
              flush=True)
        return 0
    store = await js.object_store(args.bucket)
    objects = sorted(await store.list(), key=lambda i: i.name)
    if args.json:
        print_json([object_json(i) for i in objects])
    elif args.names:
        if objects:
            print("\n".join(i.name for i in objects), flush=True)
    elif not objects:
        status(f"No objects in bucket {args.bucket}")
    else:
        rows = [[i.name, human_bytes(i.size), when(i.mtime)] for i in objects]
        print(table(["Name", "Size", "Time"], rows, right={1}), flush=True)
    return 0


async def _info(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    store = await js.object_store(args.bucket)
    if args.name is None:
        s = await store.status()
        if args.json:
            print_json(s.stream_info.to_json())
        else:
            print(describe(s), flush=True)
        return 0
    info = await store.get_info(args.name)
    if args.json:
        print_json(object_json(info))
    else:
        print(_describe_object(info), flush=True)
    return 0


async def _rm(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    store = await js.object_store(args.bucket)
    if args.name is None:
        if await confirm(reactor, f"Really delete object store {args.bucket}", args.force):
            await js.delete_object_store(args.bucket)
            status(f"Deleted object store {args.bucket}")
        return 0
    await store.get_info(args.name)
    if await confirm(reactor, f"Really delete object {args.bucket} > {args.name}", args.force):
        await store.delete(args.name)
        status(f"Deleted {args.bucket} > {args.name}")
    return 0


async def _watch(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    store = await js.object_store(args.bucket)
    watcher = await store.watch()
    seen = 0
    out = stdout_bytes()
    try:
        async for info in watcher:
            if info is None:  # the objects there were are all given
                continue
            seen += 1
            if args.json:
                line = json.dumps(object_json(info))
            else:
                op = "DEL" if info.deleted else "PUT"
                line = (f"[{when(info.mtime)}] {op} {info.bucket} > {info.name}"
                        + ("" if info.deleted else f" ({human_bytes(info.size)})"))
            out.write(line.encode() + b"\n")
            out.flush()
            if args.count is not None and seen >= args.count:
                break
    finally:
        watcher.stop()
    return 0


# ====================================================================== transfers
class _Counted:
    """A binary file counting the bytes read from it or written to it."""

    def __init__(self, f: IO[bytes]) -> None:
        self._f = f
        self.count = 0

    def read(self, n: int = -1) -> bytes:
        data = self._f.read(n)
        self.count += len(data)
        return data

    def write(self, data: bytes) -> int:
        self._f.write(data)
        self.count += len(data)
        return len(data)

    def writelines(self, pieces: list[bytes]) -> None:
        for piece in pieces:
            self.write(piece)

    def flush(self) -> None:
        self._f.flush()


def _bar(
    reactor: IReactorCore, args: argparse.Namespace, label: str, total: int | None,
    counted: _Counted, on_stdout: bool,
) -> Bar | None:
    clock: IReactorTime = reactor  # type: ignore[assignment]
    bar = stderr_bar(clock, args.progress and not getattr(args, "json", False) and
                     total is not None, on_stdout)
    if bar is not None:
        bar.begin(label, total or 1, lambda: counted.count,
                  lambda done, whole: f"{human_bytes(done)} / {human_bytes(whole)}")
    return bar


def _rate(n: int, seconds: float) -> str:
    speed = human_bytes(n / seconds) + "/s" if seconds > 0 else "-"
    return f"{human_bytes(n)} in {duration(seconds)} ({speed})"


async def _put(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    if args.file is None and not args.name:
        fail("give a FILE, or --name for the object read from standard input", 2)
    name = args.name or os.path.basename(args.file)
    store = await js.object_store(args.bucket)
    try:
        await store.get_info(name)
    except ObjectNotFoundError:
        pass
    else:
        if not await confirm(reactor, f"Replace object {args.bucket} > {name}", args.force):
            return 0
    source: IO[bytes] = sys.stdin.buffer if args.file is None else open(args.file, "rb")
    try:
        total = os.fstat(source.fileno()).st_size if args.file is not None else None
        counted = _Counted(source)
        bar = _bar(reactor, args, "put", total, counted, on_stdout=False)
        options: dict[str, Any] = {"description": args.description,
                                   "headers": args.header or None}
        if args.chunk_size is not None:
            options["chunk_size"] = args.chunk_size
        started = time.monotonic()
        try:
            info = await store.put(name, counted, **options)
        finally:
            if bar is not None:
                bar.end()
    finally:
        if args.file is not None:
            source.close()
    if args.json:
        print_json(object_json(info))
    else:
        status(f"Put {args.bucket} > {name}: {_rate(info.size, time.monotonic() - started)}")
    return 0


async def _get(reactor: IReactorCore, js: JetStreamContext, args: argparse.Namespace) -> int:
    store = await js.object_store(args.bucket)
    info = await store.get_info(args.name)
    target = args.output or os.path.basename(args.name) or args.name
    to_stdout = target == "-"
    if not to_stdout and os.path.exists(target):
        if not await confirm(reactor, f"Replace file {target}", args.force):
            return 0
    started = time.monotonic()
    if to_stdout:
        counted = _Counted(stdout_bytes())
        bar = _bar(reactor, args, "get", None if info.is_link else info.size, counted, True)
        try:
            await store.get_to_file(args.name, cast(BinaryIO, counted))
        finally:
            if bar is not None:
                bar.end()
    else:
        await _get_to_path(reactor, store, args, target, info)
    status(f"Wrote {args.bucket} > {args.name} to {'stdout' if to_stdout else target}: "
           f"{_rate(info.size, time.monotonic() - started)}")
    return 0


async def _get_to_path(
    reactor: IReactorCore, store: Any, args: argparse.Namespace, target: str, info: ObjectInfo
) -> None:
    """Write the object beside ``target`` and rename it there once it is checked; on a
    failure the partial file is removed and ``target`` is left as it was."""
    folder = os.path.dirname(os.path.abspath(target))
    fd, part = tempfile.mkstemp(prefix=os.path.basename(target) + ".", suffix=".part",
                                dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            counted = _Counted(f)
            bar = _bar(reactor, args, "get", None if info.is_link else info.size, counted, False)
            try:
                await store.get_to_file(args.name, cast(BinaryIO, counted))
            finally:
                if bar is not None:
                    bar.end()
        os.replace(part, target)
    except BaseException:
        if os.path.exists(part):
            os.unlink(part)
        raise
