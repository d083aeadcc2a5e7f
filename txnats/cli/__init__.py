"""The ``txnats`` command line: messages (``pub``, ``sub``, ``req``, ``reply``), the
embedded ``server``, ``micro`` services, ``bench``, and JetStream (``stream``,
``consumer``, ``kv``, ``obj``, ``account``), with ``context`` for the configuration
contexts it shares with the ``nats`` CLI (ADR-21).

In the spirit of the ``nats`` CLI, whose command and flag names it takes::

    txnats server                                  # an embedded nats-server on :4222
    txnats sub 'greet.*'                           # print every message
    txnats pub greet.joe hello --count 3 -H X-Trace:1
    txnats reply svc.echo                          # echo every request back
    txnats req svc.echo hi --timeout 2
    txnats micro ls                                # the services (ADR-32) that answer
    txnats bench pubsub --msgs 200000 --size 128   # starts its own server
    txnats stream add ORDERS --subjects 'orders.>' # JetStream streams, consumers, ...
    txnats kv put CONFIG db.url postgres://db      # ... key-value buckets, object stores
    txnats context select hub                      # connect as context "hub" from now on

Every client command takes the connection flags (``--server/-s``, ``--context`` and
credentials). Status lines go to stderr and message contents to stdout, so output can
be piped; the JetStream commands print JSON with ``--json``. Errors are one line on
stderr, ``txnats: error: ...``; the exit status is 2 for a usage error and 1 for any
other failure.

This module runs a command (:func:`main`); ``_parser`` builds the command line from
the flags each command's module adds (``_cmd_messages``: pub, sub, req, reply;
``_cmd_server``; ``_cmd_micro``; ``_cmd_bench``; ``_cmd_stream`` with ``_stream_config``
and ``_stream_view``; ``_cmd_consumer`` with ``_consumer_config``; ``_cmd_kv``;
``_cmd_obj``; ``_cmd_account``; ``_cmd_context``). ``_flags`` holds the argparse pieces
they share, ``_context`` reads and writes the context files, ``_connection`` turns the
flags and the context into a connected client, ``_render`` prints tables and JSON,
``_common`` holds the rest; ``_progress`` is the progress bar and
:mod:`txnats.cli.bench` the benchmark workloads.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any, NoReturn

from twisted.internet.defer import CancelledError, Deferred, ensureDeferred
from twisted.internet.interfaces import IReactorCore
from twisted.internet.task import react
from twisted.logger import (
    FilteringLogObserver,
    ILogObserver,
    LogLevel,
    LogLevelFilterPredicate,
    formatEvent,
    globalLogBeginner,
    textFileLogObserver,
)
from zope.interface import provider

from txnats.cli._cmd_account import run_account
from txnats.cli._cmd_bench import run_bench, start_bench_server
from txnats.cli._cmd_consumer import run_consumer
from txnats.cli._cmd_context import run_context
from txnats.cli._cmd_kv import run_kv
from txnats.cli._cmd_messages import run_pub, run_reply, run_req, run_sub
from txnats.cli._cmd_micro import run_micro
from txnats.cli._cmd_obj import run_obj
from txnats.cli._cmd_server import run_server, start_server
from txnats.cli._cmd_stream import run_stream
from txnats.cli._common import PROG, CLIError, one_line, status
from txnats.cli._parser import build_parser
from txnats.errors import NatsError

__all__ = ["CLIError", "build_parser", "main", "run_command"]

#: What runs each command; ``server`` and ``bench`` also take what :func:`main`
#: started for them before the reactor ran (the server, the URL of bench's server).
_COMMANDS: dict[str, Callable[..., Any]] = {
    "pub": run_pub,
    "sub": run_sub,
    "req": run_req,
    "reply": run_reply,
    "server": run_server,
    "bench": run_bench,
    "micro": run_micro,
    "stream": run_stream,
    "consumer": run_consumer,
    "kv": run_kv,
    "obj": run_obj,
    "account": run_account,
    "context": run_context,
}


@provider(ILogObserver)
def _one_line_warnings(event: dict[str, Any]) -> None:
    """Warnings and errors the library logs, one line each (a traceback only for a
    failure, which is a bug: errors users cause are reported without one)."""
    text = formatEvent(event)
    if text:
        level = event.get("log_level", LogLevel.warn)
        status(f"{PROG}: {level.name}: {text.splitlines()[0]}")
    failure = event.get("log_failure")
    if failure is not None and not isinstance(failure.value, NatsError):
        status(failure.getTraceback().rstrip())


def _begin_logging(verbose: bool) -> None:
    if verbose:
        observer: ILogObserver = textFileLogObserver(sys.stderr)
    else:
        observer = FilteringLogObserver(
            _one_line_warnings, [LogLevelFilterPredicate(LogLevel.warn)]
        )
    globalLogBeginner.beginLoggingTo([observer], redirectStandardIO=False)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit raises nothing."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # not a real file (a test's StringIO)
        pass


async def _guarded(reactor: IReactorCore, args: argparse.Namespace, extra: Any) -> int:
    """Run the command; report the errors users cause as one line; return the status."""
    fn = _COMMANDS[args.command]
    try:
        if args.command in ("server", "bench"):
            code: int = await fn(reactor, args, extra)
        else:
            code = await fn(reactor, args)
    except CLIError as e:
        status(f"{PROG}: error: {e}")
        return e.status
    except BrokenPipeError:
        # The reader of our output went away (``| head``): stop quietly, as shell
        # tools do, with the status of a SIGPIPE.
        _silence_stdout()
        return 141
    except (NatsError, OSError, ValueError) as e:
        status(f"{PROG}: error: {one_line(e)}")
        return 1
    except CancelledError:
        # Ctrl-C (or SIGTERM): the command has cleaned up. Commands that run until
        # interrupted end normally; any other was cut short.
        forever = args.command == "server" or (
            (args.command in ("sub", "reply") or getattr(args, "watching", False))
            and args.count is None
        )
        if forever:
            return 0
        status(f"{PROG}: interrupted")
        return 130
    return code


async def _run(reactor: IReactorCore, args: argparse.Namespace, extra: Any) -> None:
    work = ensureDeferred(_guarded(reactor, args, extra))

    def interrupted() -> Deferred[None] | None:
        """The reactor is stopping (a signal): cancel the command and let it clean up
        (close its connections) before the reactor goes on to shut down."""
        if work.called:
            return None
        cleaned: Deferred[None] = Deferred()

        def done(result: object) -> object:
            cleaned.callback(None)
            return result

        work.addBoth(done)
        work.cancel()
        return cleaned

    reactor.addSystemEventTrigger("before", "shutdown", interrupted)
    raise SystemExit(await work)


async def run_command(reactor: IReactorCore, argv: Sequence[str]) -> int:
    """Run the client command ``argv`` (not ``server`` nor ``bench``) on the running
    ``reactor`` as :func:`main` would, and return its exit status: errors are reported
    as one line on stderr, usage errors with status 2. For tests and embedding."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # a usage error (or --help): argparse has printed it
        return e.code if isinstance(e.code, int) else 2
    if args.command in ("server", "bench"):
        raise CLIError(f"run_command cannot run {args.command!r}", 2)
    return await _guarded(reactor, args, None)


def main(argv: Sequence[str] | None = None) -> NoReturn:
    """Run the command line (the ``txnats`` console script and ``python -m txnats``)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    server: Any = None
    try:
        _begin_logging(getattr(args, "verbose", False))
        extra: Any = None
        if args.command == "server":
            server = extra = start_server(args)
        elif args.command == "bench":
            if args.server is None and not os.environ.get("NATS_URL"):
                server = start_bench_server()
                extra = server.url
        react(_run, (args, extra))
    except CLIError as e:
        status(f"{PROG}: error: {e}")
        sys.exit(e.status)
    except KeyboardInterrupt:
        sys.exit(130)
    except Exception as e:  # ServerStartError and kin, before the reactor ran
        status(f"{PROG}: error: {one_line(e)}")
        sys.exit(1)
    finally:
        if server is not None:
            if args.command == "server" and getattr(args, "verbose", False):
                for line in server.log_lines:
                    status(line)
            server.stop()
