"""NATS over WebSocket (``ws://`` and ``wss://``), through autobahn.

Most tests run against real nats-server processes with a ``websocket`` block. A few run
against a small in-process WebSocket server (autobahn's) for what nats-server never
does on its own: text frames, a message cut into many frames, a close frame with a
code, invalid UTF-8, an HTTP error instead of the upgrade, a server that never answers.

Servers: one shared ``ws://`` server and one shared ``wss://`` server are started on
first use and stopped when the process exits (trial never calls ``setUpClass``); tests
that stop or reconfigure a server start their own. Every wait is bounded.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

import trustme
from autobahn.twisted.websocket import WebSocketServerFactory, WebSocketServerProtocol
from twisted.internet.defer import CancelledError
from twisted.internet.interfaces import IConsumer, IPushProducer, ITransport
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from twisted.trial import unittest
from zope.interface.verify import verifyObject

import txnats
import txnats.websocket
from tests.support.files import free_port, write_file
from tests.support.waits import WAIT, bounded, reactor, sleep, wait_until
from txnats import ConnectError, Msg, NoServersError, TLSError
from txnats.servers import parse_server
from txnats.testing import NatsServer, ServerStartError
from txnats.websocket import WebSocketTransport, websocket_endpoint

#: connect_timeout for clients in failure cases.
CONNECT_TIMEOUT = 2.0






def ws_config(port: int, extra: str = "") -> str:
    return f'websocket {{\n  listen: "127.0.0.1:{port}"\n  {extra or "no_tls: true"}\n}}\n'


# ---------------------------------------------------------------------- certificates
class Certs:
    """A CA and a server certificate for localhost, plus an unrelated CA, in ``directory``."""

    def __init__(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        self.dir = directory
        ca = trustme.CA()
        cert = ca.issue_cert("localhost", "127.0.0.1")
        self.ca_file = self._write("ca.pem", ca.cert_pem.bytes())
        self.cert_file = self._write(
            "server.pem", b"".join(p.bytes() for p in cert.cert_chain_pems)
        )
        self.key_file = self._write("server-key.pem", cert.private_key_pem.bytes())
        self.other_ca_file = self._write("other-ca.pem", trustme.CA().cert_pem.bytes())

    def _write(self, name: str, data: bytes) -> str:
        return write_file(self.dir, name, data)

    def tls_block(self) -> str:
        return f'tls {{\n    cert_file: "{self.cert_file}"\n    key_file: "{self.key_file}"\n  }}'


# ---------------------------------------------------------------------- shared servers
class _Shared:
    """A nats-server with a websocket listener, started on first use."""

    def __init__(self, make: Callable[[], tuple[NatsServer, int, Any]]) -> None:
        self._make = make
        self.server: NatsServer | None = None
        self.ws_port = 0
        self.extra: Any = None

    def get(self) -> _Shared:
        if self.server is None or not self.server.running:
            self.server, self.ws_port, self.extra = self._make()
            atexit.register(self.server.stop)
        return self


def start_ws_server(extra: str = "") -> tuple[NatsServer, int]:
    """A started nats-server with a websocket listener on a free port, and that port."""
    for attempt in range(3):
        port = free_port()
        try:
            return NatsServer(config=ws_config(port, extra)).start(), port
        except ServerStartError:
            if attempt == 2:  # the websocket port was taken meanwhile, three times
                raise
    raise AssertionError("unreachable")


def _make_ws() -> tuple[NatsServer, int, Any]:
    return (*start_ws_server(), None)


def _make_wss() -> tuple[NatsServer, int, Any]:
    directory = tempfile.mkdtemp(prefix="txnats-ws-certs-")
    atexit.register(shutil.rmtree, directory, True)
    certs = Certs(directory)
    return (*start_ws_server(certs.tls_block()), certs)


_WS = _Shared(_make_ws)
_WSS = _Shared(_make_wss)


class WebSocketTestCase(unittest.TestCase):
    """Helpers for connecting clients over WebSocket."""

    async def connect(self, url: str, **kwargs: Any) -> txnats.Client:
        """A connected client, closed when the test ends."""
        kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT)
        nc = await bounded(txnats.connect(reactor, url, **kwargs))
        self.addCleanup(lambda: bounded(nc.close()))
        return nc

    async def assert_connect_fails(
        self, url: str, expected: type[BaseException], **kwargs: Any
    ) -> BaseException:
        """Connecting fails with ``expected`` well within connect_timeout (not a hang)."""
        kwargs.setdefault("connect_timeout", CONNECT_TIMEOUT)
        kwargs.setdefault("allow_reconnect", False)
        start = reactor.seconds()
        err = await self.assertFailure(
            bounded(txnats.connect(reactor, url, **kwargs), CONNECT_TIMEOUT + 3), expected
        )
        elapsed = reactor.seconds() - start
        self.assertLess(elapsed, CONNECT_TIMEOUT, f"took {elapsed:.2f}s: a hang")
        return err

    def ws_transport(self, nc: txnats.Client) -> WebSocketTransport:
        proto = nc._proto
        assert proto is not None
        transport = proto.transport
        assert isinstance(transport, WebSocketTransport)
        return transport


# ---------------------------------------------------------------------- against nats-server
class WebSocketPubSubTests(WebSocketTestCase):
    """The client API over ws://, against nats-server."""

    def setUp(self) -> None:
        shared = _WS.get()
        self.url = f"ws://127.0.0.1:{shared.ws_port}"

    async def test_round_trip_with_headers(self) -> None:
        """A message with a reply subject and headers travels over ws:// intact."""
        nc = await self.connect(self.url)
        self.assertIsInstance(self.ws_transport(nc), WebSocketTransport)
        sub = nc.subscribe("ws.rt")
        nc.publish("ws.rt", b"hello", reply="ws.reply", headers={"X-Trace": "1", "K": "v"})
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual((msg.subject, msg.reply, msg.data), ("ws.rt", "ws.reply", b"hello"))
        assert msg.headers is not None
        self.assertEqual(msg.headers.get("X-Trace"), "1")
        self.assertEqual(msg.headers.get("K"), "v")
        self.assertEqual(nc.connected_url, self.url)

    async def test_large_payload(self) -> None:
        """A 300 KB payload (many TCP reads, split frames) arrives byte for byte."""
        nc = await self.connect(self.url)
        sub = nc.subscribe("ws.big")
        payload = os.urandom(300 * 1024)
        nc.publish("ws.big", payload, headers={"N": "1"})
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(len(msg.data), len(payload))
        self.assertEqual(msg.data, payload)

    async def test_request_reply(self) -> None:
        """request() gets the reply of a responder on another ws:// connection."""
        responder = await self.connect(self.url)
        requester = await self.connect(self.url)
        responder.subscribe("ws.echo", lambda m: m.respond(b"echo:" + m.data))
        await responder.flush(timeout=WAIT)
        reply = await requester.request("ws.echo", b"hi", timeout=WAIT)
        self.assertEqual(reply.data, b"echo:hi")

    async def test_flush(self) -> None:
        """flush() completes (a PING/PONG round trip inside WebSocket frames)."""
        nc = await self.connect(self.url)
        for _ in range(3):
            await nc.flush(timeout=WAIT)
        self.assertTrue(nc.is_connected)

    async def test_path_in_url(self) -> None:
        """A path in the URL goes into the upgrade request and the connection works."""
        nc = await self.connect(self.url + "/nats/ws")
        self.assertEqual(self.ws_transport(nc).websocket.factory.resource, "/nats/ws")
        await nc.flush(timeout=WAIT)

    async def test_two_megabytes_in_one_turn(self) -> None:
        """2 MB published in one turn pauses the writer (flow control) and arrives intact."""
        sub_nc = await self.connect(self.url)
        pub_nc = await self.connect(self.url)
        sub = sub_nc.subscribe("ws.bulk")
        await sub_nc.flush(timeout=WAIT)
        proto = pub_nc._proto
        assert proto is not None
        pauses: list[bool] = []
        real_pause = proto.pauseProducing

        def spy_pause() -> None:
            pauses.append(True)
            real_pause()

        proto.pauseProducing = spy_pause  # type: ignore[method-assign]
        payloads = [bytes([i]) * 65536 for i in range(32)]
        for p in payloads:
            pub_nc.publish("ws.bulk", p)
        await pub_nc.flush(timeout=WAIT)
        self.assertTrue(pauses, "the socket transport never paused the protocol")
        self.assertFalse(proto.write_paused)
        got = [await sub.next_msg(timeout=WAIT) for _ in payloads]
        self.assertEqual([m.data for m in got], payloads)

    async def test_plain_port_fails_fast(self) -> None:
        """ws:// to the plain NATS port fails promptly with ConnectError, not a hang."""
        server = _WS.get().server
        assert server is not None
        err = await self.assert_connect_fails(f"ws://127.0.0.1:{server.port}", ConnectError)
        self.assertIn("plain NATS", str(err))

    async def test_closed_port_fails(self) -> None:
        """ws:// to a port where nothing listens fails with ConnectError."""
        await self.assert_connect_fails(f"ws://127.0.0.1:{free_port()}", NoServersError)


class WebSocketCompressionTests(WebSocketTestCase):
    """permessage-deflate, when offered, against a server with compression enabled."""

    def setUp(self) -> None:
        self.server, port = start_ws_server("no_tls: true\n  compression: true")
        self.addCleanup(self.server.stop)
        self.url = f"ws://127.0.0.1:{port}"

    async def test_not_offered_by_default(self) -> None:
        """Without ws_compression the client does not offer permessage-deflate."""
        nc = await self.connect(self.url)
        self.assertFalse(self.ws_transport(nc).websocket.websocket_extensions_in_use)

    async def test_compressed_round_trip(self) -> None:
        """connect(ws_compression=True) negotiates compression; small messages and 2 MB
        in one turn arrive intact."""
        nc = await self.connect(self.url, ws_compression=True)
        self.assertTrue(self.ws_transport(nc).websocket.websocket_extensions_in_use)
        sub = nc.subscribe("ws.z")
        nc.publish("ws.z", b"small")
        self.assertEqual((await sub.next_msg(timeout=WAIT)).data, b"small")
        # More than max_payload in one turn: sent as several compressed messages.
        payloads = [bytes([i % 7]) * 100_000 for i in range(20)]
        for p in payloads:
            nc.publish("ws.z", p)
        got = [await sub.next_msg(timeout=WAIT) for _ in payloads]
        self.assertEqual([m.data for m in got], payloads)


class WebSocketTLSTests(WebSocketTestCase):
    """wss:// against nats-server with a trustme certificate."""

    def setUp(self) -> None:
        shared = _WSS.get()
        self.certs: Certs = shared.extra
        self.url = f"wss://localhost:{shared.ws_port}"

    async def test_wss_with_ca(self) -> None:
        """wss:// verifying the server against the trustme CA connects and works."""
        nc = await self.connect(self.url, tls_ca_file=self.certs.ca_file)
        proto = nc._proto
        assert proto is not None
        self.assertTrue(proto.tls_active)
        sub = nc.subscribe("wss.check")
        nc.publish("wss.check", b"over wss", headers={"A": "b"})
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(msg.data, b"over wss")
        reply_sub = nc.subscribe("wss.echo", lambda m: m.respond(m.data[::-1]))
        self.assertEqual((await nc.request("wss.echo", b"abc", timeout=WAIT)).data, b"cba")
        reply_sub.unsubscribe()

    async def test_wss_wrong_ca(self) -> None:
        """wss:// with a CA that did not sign the server's certificate fails with TLSError."""
        await self.assert_connect_fails(self.url, TLSError, tls_ca_file=self.certs.other_ca_file)

    async def test_wss_hostname_mismatch(self) -> None:
        """wss:// verifying another name than the certificate's fails with TLSError."""
        await self.assert_connect_fails(
            self.url, TLSError, tls_ca_file=self.certs.ca_file, tls_hostname="other.example"
        )

    async def test_ws_to_wss_port(self) -> None:
        """ws:// (no TLS) to a TLS websocket port fails promptly with ConnectError."""
        shared = _WSS.get()
        await self.assert_connect_fails(f"ws://127.0.0.1:{shared.ws_port}", ConnectError)

    async def test_wss_to_plain_ws_port(self) -> None:
        """wss:// to a plain ws port fails promptly with TLSError."""
        port = _WS.get().ws_port
        await self.assert_connect_fails(
            f"wss://localhost:{port}", TLSError, tls_ca_file=self.certs.ca_file
        )


class WebSocketReconnectTests(WebSocketTestCase):
    """Reconnection over ws:// when the server goes away and comes back."""

    async def test_reconnect_after_restart(self) -> None:
        """After a restart on the same ports, the client reconnects and resubscribes."""
        server, ws_port = start_ws_server()
        self.addCleanup(server.stop)
        events: list[str] = []
        nc = await self.connect(
            f"ws://127.0.0.1:{ws_port}",
            reconnect_wait=0.1,
            reconnect_jitter=0.0,
            max_reconnect_attempts=100,
            disconnected_cb=lambda err: events.append("disconnected"),
            reconnected_cb=lambda: events.append("reconnected"),
        )
        got: list[Msg] = []
        nc.subscribe("ws.again", got.append)
        await nc.flush(timeout=WAIT)
        server.stop()
        await wait_until(lambda: "disconnected" in events)
        nc.publish("ws.again", b"buffered while away")
        server.start()
        await wait_until(lambda: "reconnected" in events, 10.0)
        nc.publish("ws.again", b"after")
        await wait_until(lambda: len(got) >= 2)
        self.assertEqual([m.data for m in got], [b"buffered while away", b"after"])
        self.assertEqual(nc.stats.reconnects, 1)
        self.assertIsInstance(self.ws_transport(nc), WebSocketTransport)


# ---------------------------------------------------------------------- in-process servers
class _FakeNats(WebSocketServerProtocol):  # type: ignore[misc]
    """Speaks just enough NATS over WebSocket, framing things as the test asks."""

    def onConnect(self, request: Any) -> None:
        self.factory.test.fakes.append(self)
        self.buf = b""
        self.received: list[tuple[bytes, bool]] = []
        self.sids: list[str] = []

    def onOpen(self) -> None:
        info = (
            b'INFO {"server_id":"fake","version":"2.10.0","proto":1,"headers":true,'
            b'"max_payload":1048576}\r\n'
        )
        # A text frame, then a binary message in 5-byte fragments (continuation frames).
        self.sendMessage(info[:10], isBinary=False)
        self.sendMessage(info[10:], isBinary=True, fragmentSize=5)

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        self.received.append((payload, isBinary))
        self.buf += payload
        while b"\r\n" in self.buf:
            line, self.buf = self.buf.split(b"\r\n", 1)
            if line == b"PING":
                # PONG cut in two frames: a text one and a binary one.
                self.sendMessage(b"PO", isBinary=False)
                self.sendMessage(b"NG\r\n", isBinary=True)
            elif line.startswith(b"SUB "):
                self.sids.append(line.split()[-1].decode())

    def send_msg(self, subject: str, data: bytes) -> None:
        """A MSG, one byte per frame, followed by a PING in the same frame as its end."""
        frame = f"MSG {subject} {self.sids[-1]} {len(data)}\r\n".encode() + data + b"\r\n"
        for b in frame[:-2]:
            self.sendMessage(bytes([b]), isBinary=True)
        self.sendMessage(b"\r\nPING\r\n", isBinary=True)


class _Recorder(Protocol):
    """A stream protocol that records what it gets."""

    def __init__(self) -> None:
        self.data = b""
        self.lost: list[Failure] = []
        self.made = 0

    def connectionMade(self) -> None:
        self.made += 1

    def dataReceived(self, data: bytes) -> None:
        self.data += data

    def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
        self.lost.append(reason)


class InProcessServerTests(WebSocketTestCase):
    """Framing and failure cases, against in-process servers."""

    def setUp(self) -> None:
        self.fakes: list[_FakeNats] = []
        factory = WebSocketServerFactory(reactor=reactor)
        factory.protocol = _FakeNats
        factory.test = self
        # Timers off: autobahn's run on the global reactor and could outlive a test.
        factory.setProtocolOptions(openHandshakeTimeout=0, closeHandshakeTimeout=0)
        self.port = reactor.listenTCP(0, factory, interface="127.0.0.1")
        self.addCleanup(self._stop)
        self.url = f"ws://127.0.0.1:{self.port.getHost().port}"

    async def _stop(self) -> None:
        for fake in self.fakes:
            if fake.transport is not None and fake.state != fake.STATE_CLOSED:
                fake.transport.abortConnection()
        await self.port.stopListening()
        await sleep(0.01)

    def listen_raw(self, make: Callable[[], Protocol]) -> str:
        """A TCP server of raw protocols; returns its ws:// URL."""
        protocols: list[Protocol] = []

        def build() -> Protocol:
            p = make()
            protocols.append(p)
            return p

        port = reactor.listenTCP(0, Factory.forProtocol(build), interface="127.0.0.1")

        async def stop() -> None:
            for p in protocols:
                if p.transport is not None:
                    p.transport.abortConnection()  # type: ignore[attr-defined]
            await port.stopListening()
            await sleep(0.01)

        self.addCleanup(stop)
        return f"ws://127.0.0.1:{port.getHost().port}"

    async def test_text_frames_and_fragments(self) -> None:
        """Text frames count as data; messages cut into any frames parse the same."""
        nc = await self.connect(self.url, allow_reconnect=False)
        self.assertEqual(nc.server_info["server_id"], "fake")
        sub = nc.subscribe("frag")
        await nc.flush(timeout=WAIT)
        fake = self.fakes[0]
        fake.send_msg("frag", b"one byte per frame")
        msg = await sub.next_msg(timeout=WAIT)
        self.assertEqual(msg.data, b"one byte per frame")
        # The server's PING got its PONG; everything the client sent was binary.
        await wait_until(lambda: b"PONG\r\n" in b"".join(p for p, _ in fake.received))
        self.assertTrue(all(is_binary for _, is_binary in fake.received))

    async def test_server_close_frame(self) -> None:
        """A close frame from the server ends the connection once, reporting its code."""
        proto = _Recorder()
        server = parse_server(self.url)
        got = await bounded(
            websocket_endpoint(reactor, server, WAIT).connect(Factory.forProtocol(lambda: proto))
        )
        self.assertIs(got, proto)
        self.assertEqual(proto.made, 1)
        await wait_until(lambda: proto.data.startswith(b"INFO "))
        assert proto.transport is not None
        proto.transport.write(b"PING\r\n")
        await wait_until(lambda: b"PONG\r\n" in proto.data)
        self.fakes[0].sendCloseFrame(code=1001, reasonUtf8=b"going away")
        await wait_until(lambda: bool(proto.lost))
        await sleep(0.05)
        self.assertEqual(len(proto.lost), 1)
        self.assertIn("1001", proto.lost[0].getErrorMessage())
        self.assertIn("going away", proto.lost[0].getErrorMessage())
        # Writing after the end is ignored, as on a closed TCP transport.
        proto.transport.write(b"PING\r\n")

    async def test_client_close_and_abort(self) -> None:
        """The transport provides its interfaces; close and abort each end it exactly once."""
        for how in ("loseConnection", "abortConnection"):
            proto = _Recorder()
            await bounded(
                websocket_endpoint(reactor, parse_server(self.url), WAIT).connect(
                    Factory.forProtocol(lambda p=proto: p)  # type: ignore[misc]
                )
            )
            transport = proto.transport
            assert isinstance(transport, WebSocketTransport)
            for interface in (ITransport, IConsumer, IPushProducer):
                self.assertTrue(verifyObject(interface, transport))
            self.assertFalse(transport.disconnecting)
            getattr(transport, how)()
            self.assertTrue(transport.disconnecting)
            getattr(transport, how)()  # a second call changes nothing
            await wait_until(lambda p=proto: bool(p.lost))  # type: ignore[misc]
            await sleep(0.05)
            self.assertEqual(len(proto.lost), 1, how)

    async def test_pause_reading(self) -> None:
        """pauseProducing stops reading from the socket; resumeProducing delivers the rest."""
        proto = _Recorder()
        await bounded(
            websocket_endpoint(reactor, parse_server(self.url), WAIT).connect(
                Factory.forProtocol(lambda: proto)
            )
        )
        await wait_until(lambda: proto.data.endswith(b"\r\n"))
        transport = proto.transport
        assert isinstance(transport, WebSocketTransport)
        before = proto.data
        transport.pauseProducing()
        self.fakes[0].sendMessage(b"while paused", isBinary=True)
        await sleep(0.1)
        self.assertEqual(proto.data, before)
        transport.resumeProducing()
        await wait_until(lambda: proto.data == before + b"while paused")

    async def test_invalid_utf8_text_frame(self) -> None:
        """Invalid UTF-8 in a text frame fails the connection (RFC 6455) and says so."""
        proto = _Recorder()
        await bounded(
            websocket_endpoint(reactor, parse_server(self.url), WAIT).connect(
                Factory.forProtocol(lambda: proto)
            )
        )
        self.fakes[0].sendMessage(b"\xff\xfe", isBinary=False)
        await wait_until(lambda: bool(proto.lost))
        self.assertIn("UTF-8", proto.lost[0].getErrorMessage())
        self.assertNotIn(b"\xff", proto.data)

    async def test_http_error_instead_of_upgrade(self) -> None:
        """An HTTP 404 to the upgrade request fails with ConnectError naming the status."""

        class NotFound(Protocol):
            def dataReceived(self, data: bytes) -> None:
                if b"\r\n\r\n" in data:
                    assert self.transport is not None
                    self.transport.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")

        url = self.listen_raw(NotFound)
        err = await self.assert_connect_fails(url, ConnectError)
        self.assertIn("404", str(err))

    async def test_handshake_timeout(self) -> None:
        """A server that never answers the upgrade: ConnectError after the timeout."""
        url = self.listen_raw(Protocol)
        start = reactor.seconds()
        d = websocket_endpoint(reactor, parse_server(url), 0.3).connect(
            Factory.forProtocol(_Recorder)
        )
        err = await self.assertFailure(bounded(d), ConnectError)
        self.assertIn("timed out", str(err))
        self.assertLess(reactor.seconds() - start, 2.0)

    async def test_endless_handshake_response(self) -> None:
        """An HTTP response that never ends is refused after 64 KiB, not buffered forever."""

        class Babbler(Protocol):
            def dataReceived(self, data: bytes) -> None:
                assert self.transport is not None
                self.transport.write(b"HTTP/1.1 101 Switching Protocols\r\n")
                self.transport.write(b"X-Filler: " + b"x" * 100_000)

        url = self.listen_raw(Babbler)
        err = await self.assert_connect_fails(url, ConnectError)
        self.assertIn("no complete HTTP response", str(err))

    async def test_cancel_aborts(self) -> None:
        """Cancelling the connect Deferred drops the connection at once."""
        accepted: list[Protocol] = []
        gone: list[bool] = []

        class Silent(Protocol):
            def connectionMade(self) -> None:
                accepted.append(self)

            def connectionLost(self, reason: Failure = None) -> None:  # type: ignore[assignment]
                gone.append(True)

        url = self.listen_raw(Silent)
        d = websocket_endpoint(reactor, parse_server(url), WAIT).connect(
            Factory.forProtocol(_Recorder)
        )
        await wait_until(lambda: bool(accepted))
        d.cancel()
        await self.assertFailure(d, CancelledError)
        await wait_until(lambda: bool(gone))
