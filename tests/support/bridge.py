"""Talking to a nats-bridge in tests: an in-process bridge on a free port, HTTP calls,
an SSE reader and a WebSocket reader (raw sockets and autobahn: no HTTP client library
the project does not already use)."""

from __future__ import annotations

import itertools
import json
import os
import re
import sys
from typing import Any, ClassVar

from autobahn.twisted.websocket import WebSocketClientFactory, WebSocketClientProtocol
from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.interfaces import IPullProducer
from twisted.internet.protocol import Factory, ProcessProtocol, Protocol
from twisted.python.failure import Failure
from twisted.trial import unittest
from twisted.web.client import Agent, ResponseDone
from twisted.web.http import PotentialDataLoss
from twisted.web.http_headers import Headers as HttpHeaders
from twisted.web.iweb import IBodyProducer
from zope.interface import implementer

import txnats
from tests.support.servers import ServerPerClass
from tests.support.waits import WAIT, bounded, reactor, wait_until
from txnats.bridge.config import BridgeConfig
from txnats.bridge.service import BridgeService

__all__ = ["TWISTD", "BridgeProcess", "BridgeTestCase", "RawHttp", "RawWs", "Response", "SseClient",
           "WsClient", "http", "start_bridge"]

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


def _address(base: str) -> tuple[str, int]:
    host, port = base.split("//")[1].split(":")
    return host, int(port)


@implementer(IPullProducer)
class _Feed:
    """Writes ``pieces`` one at a time as the transport empties its buffer (so a
    64 MB body is never held by the test), until they run out, the peer answers
    (``stop_on_answer``) or the connection ends; ``done`` fires with the bytes sent."""

    def __init__(self, proto: _Raw, pieces: Any, stop_on_answer: Any) -> None:
        self.proto = proto
        self.pieces = pieces
        self.stop_on_answer = stop_on_answer
        self.sent = 0
        self.done: Deferred[int] = Deferred()

    def resumeProducing(self) -> None:
        if self.done.called:
            return
        piece = None if self.proto.lost or self.stop_on_answer() else next(self.pieces, None)
        if piece is None:
            self.stopProducing()
            return
        self.sent += len(piece)
        self.proto.transport.write(piece)

    def stopProducing(self) -> None:
        if not self.done.called:
            if not self.proto.lost:
                self.proto.transport.unregisterProducer()
            self.done.callback(self.sent)


def zeros(total: int, chunk: int = 64 * 1024, frame: Any = None) -> Any:
    """``total`` zero bytes in pieces of ``chunk`` (each passed through ``frame``)."""
    block = bytes(chunk)
    left = total
    while left > 0:
        n = min(chunk, left)
        left -= n
        piece = block if n == chunk else bytes(n)
        yield frame(piece) if frame is not None else piece


class RawHttp:
    """One HTTP exchange over a raw socket: any bytes out (streamed if large), the
    answer as it came (status, headers, body) and whether the bridge closed."""

    def __init__(self, proto: _Raw) -> None:
        self.proto = proto
        self.sent = 0

    @classmethod
    async def send(cls, base: str, head: bytes, body: Any = None, *,
                   stop_on_answer: bool = True, seconds: float = WAIT) -> RawHttp:
        """Connect, send ``head`` then the pieces of ``body`` (an iterator of bytes),
        stopping early once the bridge answers (with ``stop_on_answer``)."""
        proto = _Raw(head)
        host, port = _address(base)
        await bounded(TCP4ClientEndpoint(reactor, host, port).connect(
            Factory.forProtocol(lambda: proto)), seconds, "connecting to the bridge")
        raw = cls(proto)
        if body is not None:
            feed = _Feed(proto, iter(body), lambda: stop_on_answer and bool(proto.data))
            proto.transport.registerProducer(feed, False)
            raw.sent = await bounded(feed.done, 60, "sending the body")
        return raw

    async def closed(self, seconds: float = WAIT) -> RawHttp:
        """Wait until the bridge has closed the connection."""
        await wait_until(lambda: self.proto.lost, seconds, "the bridge closing the connection")
        return self

    async def answered(self, seconds: float = WAIT) -> RawHttp:
        """Wait until a whole response head has arrived."""
        await wait_until(lambda: b"\r\n\r\n" in self.proto.data or self.proto.lost, seconds,
                         "an HTTP answer")
        return self

    @property
    def status(self) -> int | None:
        head = bytes(self.proto.data).split(b"\r\n", 1)[0]
        parts = head.split()
        return int(parts[1]) if head.startswith(b"HTTP/") and len(parts) > 1 else None

    @property
    def headers(self) -> dict[str, list[bytes]]:
        head = bytes(self.proto.data).partition(b"\r\n\r\n")[0]
        found: dict[str, list[bytes]] = {}
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            found.setdefault(name.decode().lower(), []).append(value.strip())
        return found

    @property
    def body(self) -> bytes:
        return bytes(self.proto.data).partition(b"\r\n\r\n")[2]

    def json(self) -> Any:
        return json.loads(self.body)

    def close(self) -> None:
        if not self.proto.lost:
            self.proto.transport.abortConnection()


def _ws_frame(opcode: int, length: int, fin: bool = True) -> bytes:
    """A client frame's header with a zero mask (so the payload goes as it is)."""
    first = (0x80 if fin else 0) | opcode
    if length < 126:
        size = bytes([0x80 | length])
    elif length < 65536:
        size = bytes([0x80 | 126]) + length.to_bytes(2, "big")
    else:
        size = bytes([0x80 | 127]) + length.to_bytes(8, "big")
    return bytes([first]) + size + b"\0\0\0\0"


class RawWs:
    """A WebSocket client over a raw socket, to send what autobahn's client would not:
    frames of any size, streamed. ``frames`` holds the server's (opcode, payload)."""

    def __init__(self, proto: _Raw) -> None:
        self.proto = proto
        #: True while a frame was started and not finished (a close frame now would
        #: be read as its payload).
        self.mid_frame = False

    @classmethod
    async def open(cls, base: str, path: str) -> RawWs:
        host, port = _address(base)
        head = (f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
                "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                "Sec-WebSocket-Version: 13\r\n\r\n").encode()
        raw = await RawHttp.send(base, head)
        await raw.answered()
        if raw.status != 101:
            raise AssertionError(f"no WebSocket upgrade: {bytes(raw.proto.data[:300])!r}")
        return cls(raw.proto)

    @property
    def frames(self) -> list[tuple[int, bytes]]:
        data = bytes(self.proto.data).partition(b"\r\n\r\n")[2]
        out: list[tuple[int, bytes]] = []
        i = 0
        while len(data) - i >= 2:
            opcode, n = data[i] & 0x0F, data[i + 1] & 0x7F
            i += 2
            if n == 126:
                n, i = int.from_bytes(data[i:i + 2], "big"), i + 2
            elif n == 127:
                n, i = int.from_bytes(data[i:i + 8], "big"), i + 8
            if len(data) - i < n:
                break
            out.append((opcode, data[i:i + n]))
            i += n
        return out

    @property
    def messages(self) -> list[Any]:
        return [json.loads(p) for op, p in self.frames if op == 1]

    @property
    def close_code(self) -> int | None:
        for op, payload in self.frames:
            if op == 8:
                return int.from_bytes(payload[:2], "big") if payload else 1005
        return None

    def send(self, opcode: int, payload: bytes, fin: bool = True) -> None:
        self.proto.transport.write(_ws_frame(opcode, len(payload), fin) + payload)

    async def stream(self, length: int, opcode: int = 2) -> int:
        """Send one frame of ``length`` zero bytes, streamed; stop once the server
        closes (sends a close frame, or the connection ends). Returns the bytes sent."""
        body = itertools.chain([_ws_frame(opcode, length)], zeros(length))
        feed = _Feed(self.proto, body, lambda: self.close_code is not None)
        self.proto.transport.registerProducer(feed, False)
        sent = await bounded(feed.done, 60, "streaming a WebSocket frame")
        self.mid_frame = sent < length + 14
        return sent

    async def wait_for(self, predicate: Any, what: str, seconds: float = WAIT) -> None:
        await wait_until(lambda: predicate(self), seconds, what)

    def finish(self) -> Deferred[None]:
        """End the close handshake (answer the server's close, or start one) and wait
        for the server to drop the connection, so no autobahn timer is left behind."""

        async def run() -> None:
            if self.proto.lost:
                return
            if not self.mid_frame:
                self.send(8, (1000).to_bytes(2, "big"))
            await wait_until(lambda: self.proto.lost, WAIT, "the bridge closing the WebSocket")

        return Deferred.fromCoroutine(run())


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


class BridgeTestCase(ServerPerClass, unittest.TestCase):
    """A nats-server (JetStream on) shared by the class's tests; :meth:`bridge` starts
    a bridge on it, :meth:`connect` a client to it, :meth:`watch` a subscriber on
    ``>`` to prove what reached NATS."""

    server_options: ClassVar[dict[str, Any]] = {"jetstream": True}
    timeout = 120

    async def connect(self, **options: Any) -> txnats.Client:
        assert self.server is not None
        nc = await bounded(txnats.connect(reactor, self.server.url, name=self._testMethodName,
                                          **options))
        self.addCleanup(nc.close)
        return nc

    async def bridge(self, **config: Any) -> str:
        assert self.server is not None
        config.setdefault("servers", [self.server.url])
        self.service, url = await start_bridge(self, **config)
        return url

    async def watch(self) -> txnats.Subscription:
        """A subscriber on ``>`` (every message published from now on)."""
        nc = await self.connect()
        sub = nc.subscribe(">")
        await bounded(nc.flush())
        return sub

    async def only_good(self, url: str, sub: txnats.Subscription) -> None:
        """Publish ``good.one`` through the bridge: it must be the first message the
        watcher got (nothing refused before it reached NATS)."""
        r = await http("POST", f"{url}/v1/publish/good.one", b"good")
        self.assertEqual(r.code, 202, r)
        before = []
        while (msg := await sub.next_msg(timeout=WAIT)).subject != "good.one":
            before.append(msg.subject[:80])
        self.assertEqual(before, [], "refused requests reached NATS")
