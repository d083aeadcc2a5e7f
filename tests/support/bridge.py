"""Talking to a nats-bridge in tests: an in-process bridge on a free port, HTTP calls,
an SSE reader and a WebSocket reader (raw sockets and autobahn: no HTTP client library
the project does not already use)."""

from __future__ import annotations

import json
import os
import re
import sys
from typing import Any

from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.protocol import Factory, ProcessProtocol, Protocol
from twisted.python.failure import Failure
from twisted.trial import unittest
from twisted.web.client import Agent, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers as HttpHeaders
from twisted.web.iweb import IBodyProducer
from zope.interface import implementer

from tests.support.waits import WAIT, bounded, reactor, wait_until
from txnats.bridge.config import BridgeConfig
from txnats.bridge.service import BridgeService

__all__ = ["TWISTD", "BridgeProcess", "Response", "SseClient", "WsClient", "http",
           "start_bridge"]

#: The twistd script of the running interpreter's environment.
TWISTD = os.path.join(os.path.dirname(sys.executable), "twistd")
TWIST = os.path.join(os.path.dirname(sys.executable), "twist")


async def start_bridge(case: unittest.TestCase, **config: Any) -> tuple[BridgeService, str]:
    """A bridge on a free loopback port, stopped after the test; returns it and its
    base URL. ``config`` fields go to :class:`BridgeConfig` (``listen`` defaults to
    ``tcp:0:interface=127.0.0.1``)."""
    config.setdefault("listen", "tcp:0:interface=127.0.0.1")
    failures: list[Failure] = []
    service = BridgeService(BridgeConfig(**config), reactor, on_start_failure=failures.append)
    service.startService()
    case.addCleanup(lambda: bounded(service.stopService(), 20, "the bridge stopping"))
    url = await bounded(service.when_listening(), 20, "the bridge listening")
    return service, url


@implementer(IBodyProducer)
class _Body:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.length = len(data)

    def startProducing(self, consumer: Any) -> Deferred[None]:
        consumer.write(self.data)
        d: Deferred[None] = Deferred()
        d.callback(None)
        return d

    def pauseProducing(self) -> None:
        pass

    def stopProducing(self) -> None:
        pass


class _Collect(Protocol):
    """Gathers a response body (readBody warns about Agent's transports)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = []
        self.done: Deferred[bytes] = Deferred()

    def dataReceived(self, data: bytes) -> None:
        self.parts.append(data)

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        if reason.check(ResponseDone, PotentialDataLoss):
            self.done.callback(b"".join(self.parts))
        else:
            self.done.errback(reason)


class Response:
    """An HTTP response: status code, headers (lower-case names), body."""

    def __init__(self, code: int, headers: dict[str, list[str]], body: bytes) -> None:
        self.code = code
        self.headers = headers
        self.body = body

    def json(self) -> Any:
        return json.loads(self.body)

    def __repr__(self) -> str:
        return f"<Response {self.code} {self.body[:200]!r}>"


async def http(
    method: str, url: str, body: bytes | None = None, headers: dict[str, str] | None = None,
    seconds: float = WAIT, agent: Any = None,
) -> Response:
    """One HTTP request with a fresh connection; the whole response."""
    agent = agent or Agent(reactor)
    raw = HttpHeaders({k: [v] for k, v in (headers or {}).items()})
    producer = _Body(body) if body is not None else None
    response = await bounded(
        agent.request(method.encode(), url.encode(), raw, producer), seconds, f"{method} {url}"
    )
    collect = _Collect()
    response.deliverBody(collect)
    data = await bounded(collect.done, seconds, f"the body of {method} {url}")
    found: dict[str, list[str]] = {}
    for name, values in response.headers.getAllRawHeaders():
        found[name.decode().lower()] = [v.decode() for v in values]
    return Response(response.code, found, data)


class _Raw(Protocol):
    """A plain TCP client that sends one request and keeps what it reads."""

    def __init__(self, request: bytes) -> None:
        self.request = request
        self.data = bytearray()  # grows in amortised constant time per read
        self.lost = False

    def connectionMade(self) -> None:
        self.transport.write(self.request)

    def dataReceived(self, data: bytes) -> None:
        self.data += data

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost = True


class SseClient:
    """An SSE client over a raw socket: ``events`` parsed from what arrived so far."""

    def __init__(self, proto: _Raw) -> None:
        self.proto = proto

    @classmethod
    async def open(
        cls, base: str, path: str, headers: dict[str, str] | None = None
    ) -> SseClient:
        host, port = base.split("//")[1].split(":")
        extra = "".join(f"{k}: {v}\r\n" for k, v in (headers or {}).items())
        request = (f"GET {path} HTTP/1.1\r\nHost: {host}\r\nAccept: text/event-stream\r\n"
                   f"{extra}\r\n").encode()
        proto = _Raw(request)
        endpoint = TCP4ClientEndpoint(reactor, host, int(port))
        await bounded(endpoint.connect(Factory.forProtocol(lambda: proto)), WAIT, "SSE connect")
        return cls(proto)

    @property
    def status(self) -> int | None:
        head = self.proto.data.split(b"\r\n", 1)[0]
        return int(head.split()[1]) if head.startswith(b"HTTP/") else None

    def events(self) -> list[tuple[str, Any]]:
        """(event name, decoded JSON data) of every complete event so far.

        The body is chunked: chunk-size lines are dropped by keeping only ``event:`` and
        ``data:`` lines (an event's JSON is never split across chunks by the bridge)."""
        _, _, body = self.proto.data.partition(b"\r\n\r\n")
        out: list[tuple[str, Any]] = []
        name = None
        for line in body.split(b"\n")[:-1]:  # the last line may be incomplete
            line = line.rstrip(b"\r")
            if line.startswith(b"event: "):
                name = line[7:].decode()
            elif line.startswith(b"data: ") and name is not None:
                out.append((name, json.loads(line[6:])))
                name = None
        return out

    async def wait_for(self, name: str, count: int = 1, seconds: float = WAIT) -> list[Any]:
        """Wait until ``count`` events called ``name`` arrived; return their data."""
        await wait_until(lambda: len(self.of(name)) >= count, seconds,
                         f"{count} SSE {name!r} events")
        return self.of(name)

    def of(self, name: str) -> list[Any]:
        return [data for n, data in self.events() if n == name]

    def close(self) -> None:
        self.proto.transport.loseConnection()


class _WsProto(WebSocketClientProtocol):  # type: ignore[misc]
    def onOpen(self) -> None:
        self.factory.client.opened = True

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.factory.client.frames.append(json.loads(payload))

    def onPing(self, payload: bytes) -> None:
        self.factory.client.pings += 1
        if self.factory.client.answer_pings:
            super().onPing(payload)

    def onClose(self, wasClean: bool, code: int | None, reason: str | None) -> None:
        client = self.factory.client
        client.closed = (code, reason)
        waiters, client.close_waiters = client.close_waiters, []
        for d in waiters:
            d.callback(None)


class WsClient:
    """A WebSocket client (autobahn) keeping every JSON frame it receives."""

    def __init__(self) -> None:
        self.frames: list[Any] = []
        self.pings = 0
        #: False: pings go unanswered (a client that has vanished without closing).
        self.answer_pings = True
        self.opened = False
        self.closed: tuple[int | None, str | None] | None = None
        self.close_waiters: list[Deferred[None]] = []
        self.proto: Any = None

    @classmethod
    async def open(cls, base: str, path: str, headers: dict[str, str] | None = None
                   ) -> WsClient:
        client = cls()
        url = base.replace("http://", "ws://") + path
        factory = WebSocketClientFactory(url, headers=headers or {})
        factory.protocol = _WsProto
        factory.client = client
        host, port = base.split("//")[1].split(":")
        endpoint = TCP4ClientEndpoint(reactor, host, int(port))
        client.proto = await bounded(endpoint.connect(factory), WAIT, "WebSocket connect")
        await wait_until(lambda: client.opened or client.closed is not None, WAIT,
                         "the WebSocket handshake")
        return client

    async def wait_for(self, predicate: Any, seconds: float = WAIT, what: str = "frames"
                       ) -> list[Any]:
        await wait_until(lambda: predicate(self.frames), seconds, what)
        return self.frames

    def close(self) -> Deferred[None] | None:
        """Close, and wait for the server's answer (autobahn would otherwise leave its
        close-handshake timer behind)."""
        if self.closed is not None:
            return None
        d: Deferred[None] = Deferred()
        self.close_waiters.append(d)
        self.proto.sendClose()
        return bounded(d, WAIT, "the WebSocket closing")


class BridgeProcess(ProcessProtocol):
    """``twistd -n nats-bridge ...`` as a child process: its output lines, its end."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.exit_code: int | None = None
        self.ended: Deferred[None] = Deferred()
        self._buf = b""

    @classmethod
    def start(cls, case: unittest.TestCase, *args: str, cwd: str | None = None,
              twist: bool = False) -> BridgeProcess:
        """Run ``twistd -n --pidfile= nats-bridge ARGS`` (with ``twist``: ``twist
        --log-format=text nats-bridge ARGS``, as twist logs JSON when its output is not a
        terminal); killed after the test if alive."""
        proto = cls()
        if twist:
            program, argv = TWIST, [TWIST, "--log-format=text", "nats-bridge", *args]
        else:
            program, argv = TWISTD, [TWISTD, "-n", "--pidfile=", "nats-bridge", *args]
        env = dict(os.environ)
        env["PYTHONUNBUFFERED"] = "1"
        reactor.spawnProcess(proto, program, argv, env=env, path=cwd)

        async def stop() -> None:
            """SIGTERM (the bridge stops its embedded server), SIGKILL if that fails."""
            if proto.ended.called or proto.transport is None:
                return
            proto.transport.signalProcess("TERM")
            try:
                await bounded(proto.ended, 15, "the bridge process ending on SIGTERM")
            except AssertionError:
                if not proto.ended.called:
                    proto.transport.signalProcess("KILL")
                    await bounded(proto.ended, WAIT, "the bridge process ending")

        case.addCleanup(lambda: Deferred.fromCoroutine(stop()))
        return proto

    def outReceived(self, data: bytes) -> None:
        *lines, self._buf = (self._buf + data).split(b"\n")
        self.lines.extend(line.decode("utf-8", "replace") for line in lines)

    errReceived = outReceived

    def processEnded(self, reason: Failure) -> None:
        self.exit_code = reason.value.exitCode
        if self._buf:
            self.lines.append(self._buf.decode("utf-8", "replace"))
        self.ended.callback(None)

    def find(self, pattern: str) -> re.Match[str] | None:
        """The first output line matching ``pattern`` (a regex), as a match."""
        for line in self.lines:
            found = re.search(pattern, line)
            if found:
                return found
        return None

    async def wait_for(self, pattern: str, seconds: float = 20.0) -> re.Match[str]:
        """Wait for an output line matching ``pattern``; fail with the output if the
        process ends first or the time runs out."""
        try:
            await wait_until(lambda: self.find(pattern) is not None or self.exit_code is not None,
                             seconds, f"a line matching {pattern!r}")
        except AssertionError as e:
            raise AssertionError(f"{e}; output:\n" + "\n".join(self.lines[-40:])) from None
        found = self.find(pattern)
        if found is None:
            raise AssertionError(f"the bridge exited ({self.exit_code}) before printing "
                                 f"{pattern!r}; output:\n" + "\n".join(self.lines[-40:]))
        return found
