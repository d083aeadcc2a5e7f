"""One connection's protocol state, sans I/O: the handshake, PINGs, what ``-ERR`` means,
and the outbox.

:class:`Connection` is fed the server's bytes (:meth:`Connection.receive_data`) and
returns what they mean for the client; what it must answer (a PONG, the CONNECT) it
queues in its :class:`~txnats.protocol.outbox.Outbox`, which the transport's adapter
empties. It keeps the handshake's states, INFO -> [TLS] -> CONNECT + PING -> PONG (see
:class:`Phase`), and every PING in flight. It does no I/O, keeps no time and calls no
one: the adapter (:class:`txnats.connection.NatsProtocol`) starts TLS, arms the timers
and passes on what comes out.

What :meth:`Connection.receive_data` returns, in order: the messages (:class:`Msg`, as
the parser made them; a read of messages only is handed back as the parser's own list)
and these events:

- :class:`Greeted`: the server's first INFO, always the last event returned. The
  adapter starts TLS if ``start_tls``, builds the CONNECT fields and calls
  :meth:`Connection.send_connect`, then :meth:`Connection.resume` for what the read
  brought after the INFO.
- :class:`Established`: the server answered the handshake's PING: the connection is up.
- :class:`InfoUpdate`: a later INFO (cluster changes, lame duck mode).
- :class:`Ponged`: the PONG for :meth:`Connection.ping`'s ``token``.
- :class:`Refused`: a ``-ERR`` the connection survives (a permissions violation...).
- :class:`BadHeaders`: the message before it carries a header block that does not parse.
- :class:`Closing`: the connection must end, for the reason given (a fatal ``-ERR``, a
  broken protocol): nothing after it in the read is for the client.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from enum import Enum
from typing import Any, Generic, TypeVar

from txnats.errors import (
    AuthorizationError,
    ConnectError,
    NatsError,
    ProtocolError,
    ServerError,
    StaleConnectionError,
    TLSError,
)
from txnats.protocol.commands import PING, PONG, encode_connect
from txnats.protocol.errors import classify_error
from txnats.protocol.events import BadHeaders, Err, Info, Msg, Ping, Pong
from txnats.protocol.outbox import Outbox
from txnats.protocol.parser import HARD_MAX_PAYLOAD, Parser

__all__ = [
    "Closing",
    "Connection",
    "Established",
    "Greeted",
    "InfoUpdate",
    "Phase",
    "Ponged",
    "Refused",
]

T = TypeVar("T")

#: Leeway above the server's max_payload for headers the server itself adds (JetStream
#: direct get, republish) to messages that were at the limit.
INBOUND_PAYLOAD_SLACK = 64 * 1024


class Phase(Enum):
    """Where a connection stands."""

    #: Waiting for the server's first INFO (TLS may be under way already).
    GREETING = "NATS handshake (waiting for INFO)"
    #: INFO came; the adapter starts TLS (if wanted) and sends CONNECT.
    CONNECTING = "NATS handshake (building CONNECT)"
    #: CONNECT + PING sent; waiting for the PONG.
    AWAITING_PONG = "NATS handshake (CONNECT sent, waiting for PONG)"
    #: Up.
    READY = "connected"


@dataclass(frozen=True, slots=True)
class Greeted:
    """The server's first INFO; ``start_tls``: the adapter must start TLS now."""

    info: dict[str, Any]
    start_tls: bool


@dataclass(frozen=True, slots=True)
class Established:
    """The handshake is done."""


@dataclass(frozen=True, slots=True)
class InfoUpdate:
    """An INFO after the handshake."""

    info: dict[str, Any]


@dataclass(frozen=True, slots=True)
class Ponged(Generic[T]):
    """The PONG for the PING :meth:`Connection.ping` sent with ``token``."""

    token: T


@dataclass(frozen=True, slots=True)
class Refused:
    """A ``-ERR`` the connection survives."""

    error: ServerError


@dataclass(frozen=True, slots=True)
class Closing:
    """The connection must end; ``error`` says why."""

    error: NatsError


_ESTABLISHED = Established()
_READY = Phase.READY


class Connection(Generic[T]):
    """The client side of one NATS connection, sans I/O.

    :param tls_wanted: the client insists on TLS (a ``tls://`` URL or TLS options).
    :param tls_active: TLS was started before INFO (the endpoint is wrapped already).
    :param tls_possible: the client can start TLS (it has the means to verify a server).
    :param max_control_line: the longest control line the server accepts from the
        client (its ``max_control_line``), in bytes: a CONNECT over it is refused.
    :param max_inbound_line: the longest control line accepted from the server.
    :param max_pings_out: keep-alive PINGs without a PONG after which the connection is
        stale.
    """

    def __init__(
        self,
        *,
        tls_wanted: bool = False,
        tls_active: bool = False,
        tls_possible: bool = True,
        max_control_line: int = 4096,
        max_inbound_line: int = 64 * 1024,
        max_pings_out: int = 2,
    ) -> None:
        self.parser = Parser(max_control_line=max_inbound_line)
        #: What waits to be written.
        self.outbox = Outbox()
        #: Where the connection stands (or stood when it ended: see :attr:`closed`).
        self.phase = Phase.GREETING
        #: True once the connection ends: nothing more is read.
        self.closed = False
        #: The server's latest INFO.
        self.info: dict[str, Any] = {}
        self.tls_wanted = tls_wanted
        #: TLS is on (started before INFO, or after it at :class:`Greeted`).
        self.tls_active = tls_active
        self.tls_possible = tls_possible
        self.max_control_line = max_control_line
        self.max_pings_out = max_pings_out
        #: True once the server's first INFO came (stays True).
        self.greeted = False
        #: True when the last :meth:`receive_data` returned messages only (the parser's
        #: own list: no event to interpret).
        self.messages_only = False
        #: Keep-alive PINGs sent since the last PONG.
        self.pings_out = 0
        # One entry per PING sent but the handshake's: its token, or None (keep-alive).
        self._pings: deque[T | None] = deque()
        # What came in the read after the first INFO, read once CONNECT is sent.
        self._held: list[Any] = []

    @property
    def ready(self) -> bool:
        """True once the handshake is done, until the connection ends."""
        return self.phase is Phase.READY and not self.closed

    # ------------------------------------------------------------------ inbound
    def receive_data(self, data: bytes) -> list[Any]:
        """Take the server's bytes; return what they mean, in order (see the module).

        Never raises: a broken protocol is a :class:`Closing` event (after the messages
        that came before it), and a connection that is closing reads nothing more.
        """
        if self.closed:
            self.messages_only = False
            return []
        parser = self.parser
        try:
            events = parser.feed(data)
        except ProtocolError as e:
            self.messages_only = False
            return [*self._interpret(e.events), self._close(e)]
        if parser.controls == 0 and self.phase is _READY:
            self.messages_only = True
            return events  # messages only: the common case, handed back as they are
        self.messages_only = False
        return self._interpret(events)

    def _interpret(self, events: list[Any]) -> list[Any]:
        if not events:
            return events
        out: list[Any] = []
        if self.phase is Phase.GREETING and type(events[0]) not in (Info, Err):
            # The server speaks first, with INFO; anything else is not a NATS server.
            name = type(events[0]).__name__
            return [self._close(ProtocolError(f"expected INFO first, got {name}"))]
        for i, ev in enumerate(events):
            kind = type(ev)
            if kind is Msg:
                out.append(ev)
            elif kind is Ping:
                self.outbox.write(PONG)
            elif kind is Pong:
                event = self._on_pong()
                if event is not None:
                    out.append(event)
            elif kind is Info:
                greeting = self._on_info(ev.options)
                if greeting is not None:
                    out.append(greeting)
                if type(greeting) is Greeted:
                    # The adapter acts on it (TLS, CONNECT) before the rest is read.
                    self._held = events[i + 1 :]
                    break
            elif kind is Err:
                out.append(self._on_err(ev.message))
            elif kind is BadHeaders:
                out.append(ev)
            if self.closed:
                break  # only a control event ends the connection: stop at once
        return out

    def resume(self) -> list[Any]:
        """What the read that brought :class:`Greeted` held after it, read now that the
        adapter has acted on it (as :meth:`receive_data` returns it)."""
        held, self._held = self._held, []
        return self._interpret(held) if not self.closed else []

    def _on_info(self, info: dict[str, Any]) -> Greeted | InfoUpdate | Closing | None:
        first = self.phase is Phase.GREETING
        self.info = info
        mp = info.get("max_payload")
        if isinstance(mp, int):
            self.parser.max_payload = min(mp + INBOUND_PAYLOAD_SLACK, HARD_MAX_PAYLOAD)
        if not first:
            return InfoUpdate(info) if self.phase is Phase.READY else None
        self.greeted = True
        start_tls = False
        if not self.tls_active:
            server_requires = bool(info.get("tls_required"))
            server_offers = server_requires or bool(info.get("tls_available"))
            if self.tls_wanted or server_requires:
                if not server_offers:
                    return self._close(
                        TLSError("TLS required by the client, but the server offers none")
                    )
                if not self.tls_possible:
                    return self._close(
                        TLSError("the server requires TLS, and TLS is not available")
                    )
                start_tls = True
        self.phase = Phase.CONNECTING
        return Greeted(info, start_tls)

    def _on_pong(self) -> Ponged[T | None] | Established | None:
        if self.phase is Phase.AWAITING_PONG:
            self.phase = Phase.READY
            self.pings_out = 0
            return _ESTABLISHED
        if self.phase is not Phase.READY:
            self._close(ProtocolError("PONG before the handshake's PING"))
            return None
        self.pings_out = 0
        if self._pings:
            token = self._pings.popleft()
            if token is not None:
                return Ponged(token)
        return None

    def _on_err(self, message: str) -> Refused | Closing:
        error, survives = classify_error(message)
        if self.phase is not Phase.READY:
            # Any -ERR during the handshake ends this attempt.
            if isinstance(error, AuthorizationError):
                return self._close(error)
            refused = ConnectError(f"server refused the connection: {error.server_message}")
            refused.__cause__ = error
            return self._close(refused)
        if survives:
            return Refused(error)
        if message.lower().startswith("stale connection"):
            return self._close(StaleConnectionError(f"server: {message}"))
        return self._close(error)

    def _close(self, error: NatsError) -> Closing:
        self.closed = True
        return Closing(error)

    # ------------------------------------------------------------------ outbound
    def tls_started(self) -> None:
        """The adapter started TLS (at :class:`Greeted`)."""
        self.tls_active = True

    def send_connect(self, options: dict[str, Any]) -> None:
        """Queue CONNECT (with ``options``) and the handshake's PING.

        :raises ConnectError: the CONNECT would be longer than the server's
            ``max_control_line`` (the message names no option's value: the options
            hold credentials).
        """
        options["tls_required"] = self.tls_active
        connect = encode_connect(options)
        length = len(connect) - len(b"CONNECT \r\n")
        if length > self.max_control_line:
            raise ConnectError(
                f"CONNECT would be {length} bytes, over the server's max_control_line "
                f"of {self.max_control_line} bytes (a long name or JWT? raise the "
                "max_control_line connect option if the server allows more)"
            )
        self.outbox.write(connect + PING)
        self.phase = Phase.AWAITING_PONG

    def ping(self, token: T) -> None:
        """Queue a PING; its PONG comes back as :class:`Ponged` with ``token``."""
        self._pings.append(token)
        self.outbox.write(PING)

    def keepalive(self) -> NatsError | None:
        """A keep-alive PING is due: queue it, or return the error that ends a
        connection whose last ``max_pings_out`` PINGs went unanswered."""
        self.pings_out += 1
        if self.pings_out > self.max_pings_out:
            return StaleConnectionError(f"{self.max_pings_out} PINGs without a PONG")
        self._pings.append(None)
        self.outbox.write(PING)
        return None

    def take_pings(self) -> list[T]:
        """The tokens of every PING still waiting for its PONG (the connection is lost)."""
        tokens = [t for t in self._pings if t is not None]
        self._pings.clear()
        return tokens

    def close(self) -> None:
        """The connection ends: nothing more is read."""
        self.closed = True
