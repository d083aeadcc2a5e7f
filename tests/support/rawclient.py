"""A foreign client that writes raw NATS frames: what another program could publish.

:func:`send_raw` connects to a server, sends CONNECT (with headers on) and the given
bytes, then a PING, and fires once the server's PONG says it took them all: the
server has relayed every message before the Deferred fires.
"""

from __future__ import annotations

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.protocol import Factory, Protocol

from .waits import WAIT, bounded, reactor

__all__ = ["hpub", "send_raw"]


def hpub(subject: bytes, block: bytes, payload: bytes = b"", reply: bytes = b"") -> bytes:
    """An HPUB frame carrying ``block`` as it is (its sizes computed), valid or not."""
    rep = reply + b" " if reply else b""
    return b"HPUB %s %s%d %d\r\n%s%s\r\n" % (
        subject, rep, len(block), len(block) + len(payload), block, payload
    )


class _Raw(Protocol):
    def __init__(self, frames: bytes, done: Deferred[bytes]) -> None:
        self.frames = frames
        self.done = done
        self.got = b""

    def dataReceived(self, data: bytes) -> None:
        self.got += data
        if not self.frames:
            if b"PONG\r\n" in self.got and not self.done.called:
                self.done.callback(self.got)
                self.transport.loseConnection()  # type: ignore[union-attr]
            return
        if b"\r\n" in self.got:  # INFO: say hello, then send
            frames, self.frames = self.frames, b""
            self.got = b""
            self.transport.write(  # type: ignore[union-attr]
                b'CONNECT {"verbose":false,"headers":true,"protocol":1}\r\n' + frames + b"PING\r\n"
            )

    def connectionLost(self, reason: object = None) -> None:
        if not self.done.called:
            self.done.errback(AssertionError(f"raw client lost: {reason}; got {self.got!r}"))


async def send_raw(port: int, frames: bytes, seconds: float = WAIT) -> bytes:
    """Send ``frames`` to the server on loopback ``port``; return what it answered
    (everything after INFO, ending with the PONG)."""
    done: Deferred[bytes] = Deferred()
    endpoint = TCP4ClientEndpoint(reactor, "127.0.0.1", port)
    await endpoint.connect(Factory.forProtocol(lambda: _Raw(frames, done)))
    return await bounded(done, seconds, "the server's PONG to the raw client")
