"""
A NATS server that lives in the test's process: no subprocess, no port.

:class:`MemoryNats` speaks the real protocol to the real client: a client dials
``memory.url`` (``memory:name=...``) as it would dial ``nats://``, its own parser and
:class:`~txnats.connection.NatsProtocol` read what the server writes, and the server
reads what the client writes with a parser that refuses what nats-server refuses (see
:mod:`txnats.testing._wire` and :mod:`txnats.testing._session` for what was measured
against nats-server 2.15.1 and what is imitated).

It covers core NATS: subjects with ``*`` and ``>``, queue groups, request/reply with
no-responders, headers, ``max_payload``, auto-unsubscribe, PING/PONG both ways,
``verbose``/``echo``, user/password and token authorization, and faults on demand:
drop every connection (:meth:`MemoryNats.drop_connections`), a partition
(:meth:`MemoryNats.blackhole`), a frozen server (:meth:`MemoryNats.pause`), an ``-ERR``
(:meth:`MemoryNats.send_error`), lame duck mode, and a restart.

**It has no JetStream**: ``INFO`` says ``"jetstream": false`` and nobody answers on
``$JS.API``, so ``nc.jetstream()`` calls fail with
:class:`~txnats.errors.JetStreamNotEnabledError` as against a ``nats-server`` run without
``-js``. Use :class:`~txnats.testing.NatsServer` (``jetstream=True``) for those tests.
Nor does it have clustering, TLS, WebSocket, NKEY/JWT authentication or accounts.

Time: every connection runs on the clock its client dialled with. On the real reactor
bytes cross in the next reactor turn, as over loopback TCP; with a
:class:`~twisted.internet.task.Clock` nothing moves until ``clock.advance``, so a test
drives timeouts, reconnection back-off and PING/PONG with ``clock.advance(seconds)``.
"""

from __future__ import annotations

import itertools
import random
import secrets
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from twisted.internet.defer import Deferred, gatherResults
from twisted.internet.interfaces import IProtocol, IReactorTime
from twisted.logger import Logger

from txnats.testing import _loopback
from txnats.testing._loopback import MEMORY_PREFIX, MemoryAddress
from txnats.testing._routing import Router
from txnats.testing._session import Limits, MemoryConnection, ServerHooks
from txnats.testing._wire import MAX_CONTROL_LINE, Pub

if TYPE_CHECKING:
    from txnats.client import Client

__all__ = ["IMITATED_VERSION", "MemoryNats", "PublishedMessage"]

log = Logger()

#: The nats-server release whose behaviour the in-memory server was checked against
#: (and the ``version`` its INFO announces).
IMITATED_VERSION = "2.15.1"
_names = itertools.count(1)


@dataclass(frozen=True)
class PublishedMessage:
    """A message a client published: its subject, reply subject, raw header block (or
    ``None``), payload, and how many subscriptions it reached."""

    subject: str
    reply: str | None
    headers: bytes | None
    data: bytes
    heard: int


def _text(b: bytes) -> str:
    return b.decode("utf-8", "surrogateescape")


class MemoryNats:
    """
    An in-memory NATS server for unit tests (core NATS only; no JetStream).

    Start it, connect a client to :attr:`url`, stop it::

        server = MemoryNats().start()
        self.addCleanup(server.stop)
        nc = await txnats.connect(reactor, server.url)

    With a :class:`~twisted.internet.task.Clock` for the client, everything is
    synchronous and moves only with the clock::

        clock = Clock()
        d = txnats.connect(clock, server.url)
        clock.advance(0)
        nc = self.successResultOf(d)

    The server keeps only a weak reference of itself in the registry that ``memory:``
    addresses are looked up in: keep it referenced for as long as clients should reach it.

    :param name: the name in :attr:`url`; unique by default.
    :param max_payload: the largest message a client may publish (bytes; headers count).
    :param headers: whether the server supports headers (INFO ``"headers"``).
    :param ping_interval: seconds between the server's PINGs (nats-server: 2 minutes).
    :param max_pings_out: unanswered PINGs after which a client is stale.
    :param max_control_line: the most bytes of arguments one client control line may hold.
    :param max_pending: bytes waiting for a subscriber that does not read, above which it
        is a slow consumer and its connection is closed.
    :param user: with ``password``, the credentials every client must give.
    :param password: see ``user``.
    :param token: a token every client must give (``auth_token``).
    :param auth_timeout: seconds a client that must authenticate has to send ``CONNECT``.
    :param seed: seeds the choice of queue group members (random by default).
    :param record: how many published messages :attr:`messages` keeps (0: none).
    """

    def __init__(
        self,
        *,
        name: str | None = None,
        max_payload: int = 1024 * 1024,
        headers: bool = True,
        ping_interval: float = 120.0,
        max_pings_out: int = 2,
        max_control_line: int = MAX_CONTROL_LINE,
        max_pending: int = 64 * 1024 * 1024,
        user: str | None = None,
        password: str | None = None,
        token: str | None = None,
        auth_timeout: float = 2.0,
        seed: int | None = None,
        record: int = 10_000,
    ) -> None:
        if (user is None) != (password is None):
            raise ValueError("user and password go together")
        self.name = name if name is not None else f"txnats-{next(_names)}"
        if not self.name or any(c in self.name for c in ": =,\t\r\n"):
            raise ValueError(f"a server name without ':', '=', ',' or blanks, not {name!r}")
        #: What each connection applies.
        self.limits = Limits(
            max_payload=max_payload,
            max_control_line=max_control_line,
            max_pending=max_pending,
            ping_interval=ping_interval,
            max_pings_out=max_pings_out,
            auth_timeout=auth_timeout,
            auth_required=user is not None or token is not None,
        )
        self._headers = headers
        self._user, self._password, self._token = user, password, token
        self._router = Router(random.Random(seed))
        self._connections: list[MemoryConnection] = []
        self._running = False
        self._accepting = False
        self._paused = False
        self._lame_duck = False
        self._client_ids = itertools.count(1)
        self._server_id = ""
        self._js_warned = False
        #: What each connection is given of the server.
        self._hooks = ServerHooks(
            limits=self.limits, router=self._router, paused=lambda: self._paused,
            hello=self._hello, authorize=self._authorize, forget=self._forget,
            published=self._published,
        )
        #: The latest messages clients published (at most ``record``), oldest first.
        self.messages: deque[PublishedMessage] = deque(maxlen=record)
        #: How many connections were accepted since the server was made.
        self.accepted = 0

    # ------------------------------------------------------------------ lifecycle
    @property
    def url(self) -> str:
        """The address clients dial: ``memory:name=<name>``."""
        return f"{MEMORY_PREFIX}name={self.name}"

    @property
    def running(self) -> bool:
        """Whether the server is started (and not stopped or killed)."""
        return self._running

    @property
    def paused(self) -> bool:
        """Whether :meth:`pause` froze the server."""
        return self._paused

    @property
    def server_id(self) -> str:
        """The ``server_id`` of its INFO (new at each start)."""
        return self._server_id

    @property
    def info(self) -> dict[str, Any]:
        """The INFO a new connection gets (without its ``client_id``)."""
        info: dict[str, Any] = {
            "server_id": self._server_id,
            "server_name": self.name,
            "version": IMITATED_VERSION,
            "proto": 1,
            "go": "txnats.testing.MemoryNats",
            "host": "memory",
            "port": 0,
            "headers": self._headers,
            "max_payload": self.limits.max_payload,
            "jetstream": False,
            "client_ip": "127.0.0.1",
        }
        if self.limits.auth_required:
            info["auth_required"] = True
        if self._lame_duck:
            info["ldm"] = True
        return info

    def start(self) -> MemoryNats:
        """Accept connections (again, after :meth:`stop`, with a new ``server_id``).

        :returns: ``self``.
        """
        if not self._running:
            self._running = self._accepting = True
            self._lame_duck = self._paused = False
            self._server_id = "N" + secrets.token_hex(28).upper()
            _loopback.register(self.name, self)
        return self

    def stop(self) -> Deferred[None]:
        """
        Stop: refuse new connections and close every open one cleanly, as nats-server
        does when it shuts down (clients see the connection closed and reconnect).

        :returns: a Deferred that fires once every connection is closed (in a later
            turn of their clocks).
        """
        self._running = self._accepting = False
        self._paused = False
        _loopback.unregister(self.name, self)
        connections = list(self._connections)
        for connection in connections:
            connection.close()
        return self._all_closed(connections)

    def kill(self) -> Deferred[None]:
        """Stop as a crash would: every connection is reset at once, what was on its way
        is lost, new connections are refused. :meth:`start` brings the server back.

        :returns: a Deferred that fires once every connection is gone.
        """
        self._running = self._accepting = False
        self._paused = False
        _loopback.unregister(self.name, self)
        connections = list(self._connections)
        for connection in connections:
            connection.drop()
        return self._all_closed(connections)

    def restart(self) -> Deferred[None]:
        """:meth:`stop`, then :meth:`start` at once (a new ``server_id``; every
        subscription is gone, as the connections are). Clients reconnect by their own
        rules.

        :returns: the Deferred of :meth:`stop`.
        """
        d = self.stop()
        self.start()
        return d

    def pause(self) -> None:
        """Freeze the server, as ``SIGSTOP`` freezes a process: it reads nothing, answers
        nothing and sends no PING; new connections are taken but get no INFO. Bytes
        wait, and :meth:`resume` handles them."""
        self._paused = True

    def resume(self) -> None:
        """Undo :meth:`pause`: greet connections made meanwhile, then handle what every
        connection sent."""
        self._paused = False
        for connection in list(self._connections):
            connection.hello()
            connection.process()

    def lame_duck(self) -> None:
        """Enter lame duck mode: refuse new connections and send every client an INFO
        with ``"ldm": true`` (clients move to another server if they know one). The
        connections stay open until :meth:`stop`."""
        self._lame_duck = True
        self._accepting = False
        for connection in list(self._connections):
            connection.send_info(self._hello(connection))

    def __enter__(self) -> MemoryNats:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = "running" if self._running else "stopped"
        return f"<MemoryNats {self.url} {state}, {len(self._connections)} connections>"

    # ------------------------------------------------------------------ faults
    @property
    def connections(self) -> list[MemoryConnection]:
        """The open connections, oldest first (a copy of the list)."""
        return list(self._connections)

    def drop_connections(self) -> int:
        """Reset every open connection (clients see the connection lost and reconnect;
        the server keeps running).

        :returns: how many were dropped.
        """
        connections = list(self._connections)
        for connection in connections:
            connection.drop()
        return len(connections)

    def blackhole(self) -> None:
        """Hold every byte of every open connection, both ways (a partition): nothing is
        lost and nothing arrives until :meth:`pass_through`. New connections are not
        affected."""
        for connection in self._connections:
            connection.blackhole()

    def pass_through(self) -> None:
        """Undo :meth:`blackhole` on every open connection."""
        for connection in self._connections:
            connection.pass_through()

    def send_error(self, text: str, *, close: bool | None = None) -> int:
        """
        Send ``-ERR '<text>'`` to every open connection.

        :param close: close the connections afterwards; by default only where
            nats-server closes after that error (see :meth:`MemoryConnection.send_error`).
        :returns: how many connections it was sent to.
        """
        connections = list(self._connections)
        for connection in connections:
            connection.send_error(text, close=close)
        return len(connections)

    def send_info(self, **changes: Any) -> None:
        """Send every open connection an INFO with ``changes`` over the usual fields
        (``connect_urls=[...]`` announces servers, for instance)."""
        for connection in list(self._connections):
            connection.send_info({**self._hello(connection), **changes})

    # ------------------------------------------------------------------ clients
    def connect(self, reactor: Any, **options: Any) -> Deferred[Client]:
        """``txnats.connect(reactor, self.url, **options)``: a connected client.

        :param reactor: the reactor or :class:`~twisted.internet.task.Clock` the client
            runs on.
        """
        from txnats._connect import connect  # the client, imported only when used

        return connect(reactor, self.url, **options)

    def when_idle(self) -> Deferred[None]:
        """A Deferred that fires once no connection is open (at once if none is)."""
        return self._all_closed(list(self._connections))

    # ------------------------------------------------------------------ for connections
    def accept(self, clock: IReactorTime, address: MemoryAddress) -> IProtocol | None:
        """A new connection at ``address``: its protocol, or ``None`` (refused) when the
        server is stopped or in lame duck mode. Called by the ``memory:`` endpoint."""
        if not self._accepting:
            return None
        connection = MemoryConnection(self._hooks, clock, address)
        self._connections.append(connection)
        self.accepted += 1
        return connection

    def _hello(self, connection: MemoryConnection) -> dict[str, Any]:
        info = self.info
        info["client_id"] = connection.address.connection
        return info

    def _authorize(self, options: dict[str, Any]) -> bool:
        if self._token is not None:
            return options.get("auth_token") == self._token
        if self._user is not None:
            return options.get("user") == self._user and options.get("pass") == self._password
        return True

    def _forget(self, connection: MemoryConnection) -> None:
        if connection in self._connections:
            self._connections.remove(connection)

    def _published(self, connection: MemoryConnection, msg: Pub, heard: int) -> None:
        if self.messages.maxlen:
            reply = None if msg.reply is None else _text(msg.reply)
            self.messages.append(
                PublishedMessage(_text(msg.subject), reply, msg.headers, msg.payload, heard)
            )
        if not heard and msg.subject.startswith(b"$JS.") and not self._js_warned:
            self._js_warned = True
            log.info(
                "MemoryNats {name} has no JetStream: nobody answers {subject}",
                name=self.name, subject=_text(msg.subject),
            )

    def _all_closed(self, connections: list[MemoryConnection]) -> Deferred[None]:
        d = gatherResults([c.when_closed() for c in connections])
        return d.addCallback(lambda _: None)
