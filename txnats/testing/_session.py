"""
One client connection to :class:`~txnats.testing.MemoryNats`: the server's side of it.

A :class:`MemoryConnection` is the Twisted protocol at the server's end of an in-memory
connection. It reads frames with :class:`~txnats.testing._wire.ClientParser`, answers as
nats-server does (measured on nats-server 2.15.1):

- ``INFO`` first; ``CONNECT`` is optional unless the server requires credentials (then
  every operation before a good ``CONNECT`` is ``-ERR 'Authorization Violation'`` and a
  close, and none within ``auth_timeout`` is ``-ERR 'Authentication Timeout'``).
  ``verbose``, ``pedantic`` and ``echo`` are on until a ``CONNECT`` turns them off;
  ``verbose`` answers ``+OK`` to ``CONNECT``, ``PUB``, ``SUB`` and ``UNSUB``.
- ``"protocol"`` above 1 is ``-ERR 'invalid client protocol'``, ``"no_responders"``
  without ``"headers"`` is ``-ERR 'no responders requires headers support'``; both close.
- ``SUB`` to an invalid subject is ``-ERR 'Invalid Subject'`` (the connection stays); a
  ``SUB`` reusing a sid is ignored; queue names are not checked. ``UNSUB`` of an unknown
  sid is ignored; a limit already reached, zero or not a number unsubscribes at once.
- ``PUB`` to a subject with a wildcard or an empty token is
  ``-ERR 'Invalid Publish Subject'`` (the connection stays); the message is still routed,
  its tokens taken literally (``a.*`` reaches a ``*`` subscription), and one with an
  empty token reaches nobody. Reply subjects are not checked.
- Messages with headers reach a subscriber whose ``CONNECT`` had no ``"headers": true``
  as ``MSG`` without them. A request (a reply subject) that reaches nobody is answered, to
  a publisher with ``headers`` and ``no_responders``, by an ``HMSG`` to its first
  subscription matching the reply subject: status ``503`` and a ``Nats-Subject`` header.
- The server sends ``PING`` 2 seconds after the connection opens (or after
  ``ping_interval`` if that is shorter), then every ``ping_interval``; when
  ``max_pings_out`` are unanswered at the next tick it sends ``-ERR 'Stale Connection'``
  and closes.
- A subscriber that does not read while more than ``max_pending`` bytes wait for it is a
  slow consumer: its connection is closed, without an ``-ERR``.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twisted.internet.defer import Deferred, succeed
from twisted.internet.interfaces import IDelayedCall, IReactorTime
from twisted.internet.protocol import Protocol as TwistedProtocol
from twisted.logger import Logger
from twisted.python.failure import Failure

from txnats.testing._loopback import MemoryAddress, MemoryTransport
from txnats.testing._routing import Router, Subscription
from txnats.testing._wire import (
    ClientParser,
    ClientViolation,
    Connect,
    Ping,
    Pong,
    Pub,
    Sub,
    Unsub,
    is_literal_subject,
    is_valid_subject,
)

__all__ = ["Limits", "MemoryConnection", "ServerHooks"]

log = Logger()

#: Seconds after the connection opens at which nats-server sends its first PING.
FIRST_PING = 2.0


@dataclass(frozen=True)
class Limits:
    """The server's settings that each connection applies (seconds, bytes)."""

    max_payload: int
    max_control_line: int
    max_pending: int
    ping_interval: float
    max_pings_out: int
    auth_timeout: float
    auth_required: bool


@dataclass(frozen=True)
class ServerHooks:
    """What a :class:`MemoryConnection` needs of its server: the server makes one, of
    its settings, its router and callables, and hands it to each connection it takes."""

    #: The settings each connection applies.
    limits: Limits
    #: The server's subscriptions, which route what its connections publish.
    router: Router
    #: Whether the server is paused (it reads nothing, answers nothing, sends no PING).
    paused: Callable[[], bool]
    #: The INFO that greets ``connection`` (with its ``client_id``).
    hello: Callable[[MemoryConnection], dict[str, Any]]
    #: Whether the ``CONNECT`` options give the credentials the server requires.
    authorize: Callable[[dict[str, Any]], bool]
    #: ``connection`` is closed: the server forgets it.
    forget: Callable[[MemoryConnection], None]
    #: ``connection`` published ``msg``, which reached ``heard`` subscriptions.
    published: Callable[[MemoryConnection, Pub, int], None]


def _error(text: str) -> bytes:
    return b"-ERR '%s'\r\n" % text.encode()


_SURVIVES = ("permissions violation", "invalid subject", "invalid publish subject",
             "maximum subscriptions exceeded")


class MemoryConnection(TwistedProtocol):
    """
    The server's end of one client connection to a :class:`~txnats.testing.MemoryNats`.

    A test finds it in :attr:`MemoryNats.connections <txnats.testing.MemoryNats.connections>`
    to read what the client said (:attr:`connect_options`, :attr:`subscriptions`) or to
    make a fault on this connection alone (:meth:`drop`, :meth:`blackhole`,
    :meth:`send_error`).
    """

    def __init__(self, server: ServerHooks, clock: IReactorTime, address: MemoryAddress) -> None:
        self.server = server
        self.clock = clock
        #: This connection's address (its number is ``address.connection``).
        self.address = address
        limits = server.limits
        self.parser = ClientParser(limits.max_payload, limits.max_control_line)
        #: The client's ``CONNECT`` options (empty until it sent one).
        self.connect_options: dict[str, Any] = {}
        #: Messages this connection published, and messages delivered to it.
        self.in_msgs = 0
        self.out_msgs = 0
        self._subs: dict[bytes, Subscription] = {}
        self._verbose = True
        self._echo = True
        self._authorized = not limits.auth_required
        self._pings_out = 0
        self._held: list[bytes] = []
        self._timers: dict[str, IDelayedCall] = {}
        self._closed: list[Deferred[None]] | None = []
        self._lost = False
        # Set once the server decided to close: it reads nothing more.
        self._closing = False
        self._greeted = False

    # ------------------------------------------------------------------ public
    @property
    def name(self) -> str | None:
        """The ``name`` the client gave in ``CONNECT``."""
        name = self.connect_options.get("name")
        return name if isinstance(name, str) else None

    @property
    def subscriptions(self) -> list[tuple[str, str, str | None]]:
        """The connection's subscriptions now: ``(sid, subject, queue)`` each."""
        def text(b: bytes) -> str:
            return b.decode("utf-8", "surrogateescape")

        return [
            (text(s.sid), text(s.subject), None if s.queue is None else text(s.queue))
            for s in self._subs.values()
        ]

    @property
    def open(self) -> bool:
        """Whether the connection is still open."""
        return not self._lost

    @property
    def echo(self) -> bool:
        """Whether the client hears its own messages (``"echo"`` in ``CONNECT``)."""
        return self._echo

    def drop(self) -> None:
        """Reset the connection now (the client sees the connection lost, as when the
        server's host dies); what was not delivered is lost."""
        if self.transport is not None:
            self.transport.abortConnection()  # type: ignore[attr-defined]

    def close(self) -> None:
        """Close the connection cleanly once what was sent is delivered (as a server
        shutting down does); nothing it receives from now on is read."""
        self._closing = True
        if self.transport is not None:
            self.transport.loseConnection()

    def blackhole(self) -> None:
        """Hold every byte of this connection, both ways, until :meth:`pass_through`:
        a network partition. Server timers go on (a client that answers no PING is
        declared stale)."""
        self._memory_transport().freeze()

    def pass_through(self) -> None:
        """Deliver again what :meth:`blackhole` held, and what follows."""
        self._memory_transport().thaw()

    def send_error(self, text: str, *, close: bool | None = None) -> None:
        """
        Send ``-ERR '<text>'``.

        :param close: close the connection afterwards; by default it is closed unless
            nats-server keeps a connection after that error (a permissions violation, an
            invalid subject, too many subscriptions).
        """
        self._write(_error(text))
        if close is None:
            close = not text.lower().startswith(_SURVIVES)
        if close:
            self.close()

    def send_info(self, info: dict[str, Any]) -> None:
        """Send ``INFO`` with ``info`` (as a server does when its cluster changes, or
        with ``"ldm": true`` as it enters lame duck mode)."""
        self._write(b"INFO %s\r\n" % json.dumps(info, separators=(",", ":")).encode())

    def when_closed(self) -> Deferred[None]:
        """A Deferred that fires once the connection is closed (at once if it is)."""
        if self._closed is None:
            return succeed(None)
        d: Deferred[None] = Deferred()
        self._closed.append(d)
        return d

    def __repr__(self) -> str:
        state = "open" if self.open else "closed"
        return f"<MemoryConnection #{self.address.connection} {self.name or ''} {state}>"

    # ------------------------------------------------------------------ Twisted
    def connectionMade(self) -> None:
        limits = self.server.limits
        if not self.server.paused():
            self.hello()
        self._start("ping", min(FIRST_PING, limits.ping_interval), self._ping_tick)
        if limits.auth_required:
            self._start("auth", limits.auth_timeout, self._auth_expired)

    def hello(self) -> None:
        """Send the connection's first ``INFO`` (when it opened, or when the paused
        server resumed)."""
        if not self._lost and not self._greeted:
            self._greeted = True
            self.send_info(self.server.hello(self))

    def dataReceived(self, data: bytes) -> None:
        if self._lost or self._closing:
            return
        if self.server.paused():
            self._held.append(data)
            return
        self.parser.receive_data(data)
        self.process()

    def process(self) -> None:
        """Act on every complete frame received (the server resumed, or bytes came)."""
        if self._held:
            held, self._held = self._held, []
            for chunk in held:
                self.parser.receive_data(chunk)
        while not (self._lost or self._closing or self.server.paused()):
            try:
                event = self.parser.next_event()
            except ClientViolation as e:
                log.info("MemoryNats closes {conn}: {detail}", conn=self, detail=e.detail)
                if e.error is not None:
                    self._write(_error(e.error))
                self.close()
                return
            if event is None:
                return
            self._handle(event)

    def connectionLost(self, reason: Failure | None = None) -> None:
        if self._lost:
            return
        self._lost = True
        for call in self._timers.values():
            if call.active():
                call.cancel()
        self._timers.clear()
        router = self.server.router
        for sub in self._subs.values():
            router.remove(sub)
        self._subs.clear()
        self.server.forget(self)
        waiting, self._closed = self._closed or [], None
        for d in waiting:
            d.callback(None)

    # ------------------------------------------------------------------ frames
    def _handle(self, event: object) -> None:
        if not self._authorized and not isinstance(event, Connect):
            self._refuse("Authorization Violation")
            return
        if isinstance(event, Pub):
            self._on_pub(event)
        elif isinstance(event, Ping):
            self._write(b"PONG\r\n")
        elif isinstance(event, Pong):
            self._pings_out = 0
        elif isinstance(event, Sub):
            self._on_sub(event)
        elif isinstance(event, Unsub):
            self._on_unsub(event)
        elif isinstance(event, Connect):
            self._on_connect(event.options)

    def _on_connect(self, options: dict[str, Any]) -> None:
        if int(options.get("protocol") or 0) > 1:
            self._refuse("invalid client protocol")
            return
        headers = bool(options.get("headers", False))
        if options.get("no_responders") and not headers:
            self._refuse("no responders requires headers support")
            return
        if not self._authorized:
            if not self.server.authorize(options):
                self._refuse("Authorization Violation")
                return
            self._authorized = True
            self._cancel("auth")
        self.connect_options = options
        self.parser.headers = headers
        self._verbose = bool(options.get("verbose", True))
        self._echo = bool(options.get("echo", True))
        self._ok()

    def _on_pub(self, msg: Pub) -> None:
        self.in_msgs += 1
        if not is_literal_subject(msg.subject):
            self._write(_error("Invalid Publish Subject"))
        self._ok()
        router = self.server.router
        heard = router.route(self, msg)
        if not heard and msg.reply is not None and self._no_responders:
            self._answer_no_responders(msg)
        self.server.published(self, msg, heard)

    @property
    def _no_responders(self) -> bool:
        options = self.connect_options
        return bool(options.get("headers")) and bool(options.get("no_responders"))

    def _answer_no_responders(self, msg: Pub) -> None:
        assert msg.reply is not None
        router = self.server.router
        for sub in router.matching(msg.reply):
            if sub.owner is self:
                header = b"NATS/1.0 503\r\nNats-Subject: %s\r\n\r\n" % msg.subject
                router.deliver(sub, Pub(msg.reply, None, header, b""))
                return

    def _on_sub(self, event: Sub) -> None:
        if not is_valid_subject(event.subject):
            self._write(_error("Invalid Subject"))
            return
        if event.sid not in self._subs:
            sub = Subscription(self, event.sid, event.subject, event.queue)
            self._subs[event.sid] = sub
            self.server.router.add(sub)
        self._ok()

    def _on_unsub(self, event: Unsub) -> None:
        sub = self._subs.get(event.sid)
        if sub is not None:
            limit = event.max_msgs
            if limit is None or limit <= 0 or sub.delivered >= limit:
                del self._subs[event.sid]
                self.server.router.remove(sub)
            else:
                sub.max_msgs = limit
        self._ok()

    def deliver(self, sub: Subscription, msg: Pub) -> None:
        """Send ``msg`` to ``sub`` of this connection (called by the router)."""
        if sub.max_msgs is not None and sub.delivered >= sub.max_msgs:
            self._subs.pop(sub.sid, None)
        reply = b"" if msg.reply is None else msg.reply + b" "
        if msg.headers and self.parser.headers:  # an empty header block goes as MSG
            hdr = len(msg.headers)
            frame = b"HMSG %s %s %s%d %d\r\n%s%s\r\n" % (
                msg.subject, sub.sid, reply, hdr, hdr + len(msg.payload), msg.headers,
                msg.payload,
            )
        else:
            frame = b"MSG %s %s %s%d\r\n%s\r\n" % (
                msg.subject, sub.sid, reply, len(msg.payload), msg.payload,
            )
        self.out_msgs += 1
        self._write(frame)
        transport: Any = self.transport
        limit = self.server.limits.max_pending
        if isinstance(transport, MemoryTransport) and transport.pending > limit:
            log.info("MemoryNats: slow consumer {conn}, closed", conn=self)
            self.drop()

    # ------------------------------------------------------------------ helpers
    def _ok(self) -> None:
        if self._verbose:
            self._write(b"+OK\r\n")

    def _refuse(self, text: str) -> None:
        self._write(_error(text))
        self.close()

    def _write(self, data: bytes) -> None:
        if self.transport is not None and not self._lost:
            self.transport.write(data)

    def _memory_transport(self) -> MemoryTransport:
        transport: Any = self.transport
        if not isinstance(transport, MemoryTransport):
            raise RuntimeError(f"{self!r} is not connected")
        return transport

    def _start(self, name: str, delay: float, fn: Callable[[], None]) -> None:
        self._timers[name] = self.clock.callLater(delay, fn)

    def _cancel(self, name: str) -> None:
        call = self._timers.pop(name, None)
        if call is not None and call.active():
            call.cancel()

    def _ping_tick(self) -> None:
        limits = self.server.limits
        self._start("ping", limits.ping_interval, self._ping_tick)
        if self.server.paused() or self._lost:
            return
        if self._pings_out + 1 > limits.max_pings_out:
            self._refuse("Stale Connection")
            return
        self._pings_out += 1
        self._write(b"PING\r\n")

    def _auth_expired(self) -> None:
        self._timers.pop("auth", None)
        if not self._authorized and not self.server.paused():
            self._refuse("Authentication Timeout")

