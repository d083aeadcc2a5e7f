"""The ``micro`` command: ``ls``, ``info`` and ``stats`` of the services (ADR-32) on a
NATS system, in the style of ``nats micro``. Each asks every instance
(:mod:`txnats.micro`) and prints a table, or the answers as JSON with ``--json``."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence

from twisted.internet.interfaces import IReactorCore

from txnats.cli._common import duration, fail, status
from txnats.cli._connection import connect_to
from txnats.cli._flags import Parser, Subcommands, add_command, positive_float
from txnats.micro import InfoResponse, StatsResponse, info, stats

__all__ = ["add_micro", "run_micro"]


def add_micro(commands: Subcommands, conn: Parser) -> None:
    """The ``micro`` command and its ``ls``, ``info`` and ``stats`` subcommands."""
    p = add_command(
        commands, "micro", "list, describe and measure services",
        "Find the services (the NATS service API, ADR-32) that answer on this NATS\n"
        "system, whatever client they are written with.\n\n"
        "  txnats micro ls\n"
        "  txnats micro info calc\n"
        "  txnats micro stats calc --json",
        None,
    )
    verbs = p.add_subparsers(dest="micro_command", metavar="COMMAND", parser_class=Parser)
    verbs.required = True
    for verb, help_, text, id_help in (
        ("ls", "list the services", "List every service instance (or those called NAME):\n"
         "name, version, id and description.\n\n  txnats micro ls\n  txnats micro ls calc",
         None),
        ("info", "describe a service's endpoints", "Describe each instance of service NAME "
         "(or only instance ID):\nmetadata, and each endpoint's subject and queue group.\n\n"
         "  txnats micro info calc", "only this instance"),
        ("stats", "show a service's request counts", "Show each endpoint's requests, errors "
         "and processing time,\nper instance of service NAME (or only instance ID).\n\n"
         "  txnats micro stats calc --json", "only this instance"),
    ):
        v = add_command(verbs, verb, help_, text, conn)
        v.add_argument("name", metavar="NAME", nargs="?" if verb == "ls" else None,
                       help="the service's name")
        if id_help is not None:
            v.add_argument("id", metavar="ID", nargs="?", help=id_help)
        v.add_argument(
            "--timeout", type=positive_float, default=1.0, metavar="T",
            help="seconds to gather answers (default: %(default)s)",
        )
        v.add_argument("--json", action="store_true", help="print the answers as JSON")


# ====================================================================== output
def _table(head: Sequence[str], rows: Sequence[Sequence[str]], right: set[int]) -> str:
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            c.rjust(widths[i]) if i in right else c.ljust(widths[i]) for i, c in enumerate(cells)
        ).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(head), rule, *(line(r) for r in rows)])


def _meta(metadata: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(metadata.items())) or "-"


def _ls(found: list[InfoResponse]) -> str:
    rows = [[s.name, s.version, s.id, s.description or "-"] for s in found]
    return _table(["Name", "Version", "ID", "Description"], rows, set())


def _info(found: list[InfoResponse]) -> str:
    blocks = []
    for s in found:
        lines = [
            f"Service: {s.name} ({s.id})",
            f"  Description: {s.description or '-'}",
            f"  Version: {s.version}",
            f"  Metadata: {_meta(s.metadata)}",
            f"  Endpoints: {len(s.endpoints)}",
        ]
        if s.endpoints:
            rows = [[e.name, e.subject, e.queue_group or "(none)", _meta(e.metadata)]
                    for e in s.endpoints]
            table = _table(["Name", "Subject", "Queue Group", "Metadata"], rows, set())
            lines += ["", *("  " + row for row in table.splitlines())]
        blocks.append("\n".join(lines))
    return "\n\n".join(blocks)


def _stats(found: list[StatsResponse]) -> str:
    rows = []
    requests = errors = total = 0
    for s in found:
        for e in s.endpoints:
            rows.append([
                s.id, e.name, f"{e.num_requests:,}", f"{e.num_errors:,}",
                duration(e.processing_time / 1e9), duration(e.average_processing_time / 1e9),
                e.last_error or "-",
            ])
            requests += e.num_requests
            errors += e.num_errors
            total += e.processing_time
    average = total // requests if requests else 0
    rows.append(["", "(total)", f"{requests:,}", f"{errors:,}", duration(total / 1e9),
                 duration(average / 1e9), ""])
    head = ["ID", "Endpoint", "Requests", "Errors", "Processing Time", "Average", "Last Error"]
    return _table(head, rows, {2, 3, 4, 5})


# ====================================================================== command
async def run_micro(reactor: IReactorCore, args: argparse.Namespace) -> int:
    """``txnats micro ls|info|stats``: ask, then print what answered."""
    service_id: str | None = getattr(args, "id", None)
    nc = await connect_to(reactor, args)
    try:
        if args.micro_command == "stats":
            measured = await stats(nc, args.name, service_id, timeout=args.timeout)
            described: list[InfoResponse] = []
        else:
            described = await info(nc, args.name, service_id, timeout=args.timeout)
            measured = []
    finally:
        await nc.close()
    measured.sort(key=lambda s: (s.name, s.id))
    described.sort(key=lambda s: (s.name, s.id))
    found: list[InfoResponse] | list[StatsResponse] = measured or described
    if args.json:
        print(json.dumps([s.to_dict() for s in found], indent=2), flush=True)
        return 0
    if not found:
        what = f"service {args.name!r}" if args.name else "service"
        if service_id:
            what += f" instance {service_id!r}"
        if args.micro_command == "ls":
            status(f"No {what} answered")
            return 0
        fail(f"no {what} answered within {args.timeout:g}s")
    if measured:
        text = _stats(measured)
    else:
        text = (_ls if args.micro_command == "ls" else _info)(described)
    print(text, flush=True)
    return 0
