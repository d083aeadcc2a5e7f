"""A :class:`txnats.Client` on a ``MemoryReactorClock`` with its JetStream context,
played against :class:`txnats.testing.ServerSide`: read the frames the client wrote
(:func:`parse_frames`) and answer its requests (:class:`JsHarness`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from txnats.jetstream import JetStreamContext
from txnats.protocol.headers import Headers, encode_headers, parse_headers
from txnats.testing import ServerSide

from .clients import ClientTestMixin
from .wire import hmsg_frame, msg_frame

__all__ = ["Frame", "JsHarness", "ack_subject", "parse_frames", "status_block"]


@dataclass
class Frame:
    """One command the client wrote."""

    op: str
    subject: str = ""
    reply: str | None = None
    data: bytes = b""
    headers: Headers | None = None
    sid: int = 0

    def json(self) -> Any:
        return json.loads(self.data) if self.data else None


def parse_frames(raw: bytes) -> list[Frame]:
    """Split what the client wrote into PUB/HPUB/SUB/UNSUB/PING/... frames."""
    out: list[Frame] = []
    pos = 0
    while pos < len(raw):
        end = raw.index(b"\r\n", pos)
        op, *args = raw[pos:end].decode().split(" ")
        pos = end + 2
        if op == "PUB":
            subject, *reply, size = args
            n = int(size)
            out.append(Frame(op, subject, reply[0] if reply else None, raw[pos : pos + n]))
            pos += n + 2
        elif op == "HPUB":
            subject, *reply, hlen, tlen = args
            body = raw[pos : pos + int(tlen)]
            pos += int(tlen) + 2
            out.append(Frame(
                op, subject, reply[0] if reply else None, body[int(hlen) :],
                parse_headers(body[: int(hlen)]),
            ))
        elif op == "SUB":
            out.append(Frame(op, args[0], sid=int(args[-1])))
        elif op == "UNSUB":
            out.append(Frame(op, sid=int(args[0])))
        else:
            out.append(Frame(op))
    return out


def status_block(status: int, description: str = "", **headers: str) -> bytes:
    """A status header block (``NATS/1.0 408 Request Timeout``); ``a_b=v`` adds header ``a-b``."""
    h = Headers()
    for k, v in headers.items():
        h[k.replace("_", "-")] = v
    block = encode_headers(h) if headers else b"NATS/1.0\r\n\r\n"
    line = f"NATS/1.0 {status}" + (f" {description}" if description else "")
    return line.encode() + block[len(b"NATS/1.0") :]


def ack_subject(stream: str, consumer: str, sseq: int, cseq: int, delivered: int = 1) -> str:
    """The reply subject of a JetStream message (stream and consumer sequence)."""
    return f"$JS.ACK.{stream}.{consumer}.{delivered}.{sseq}.{cseq}.1700000000000000000.0"


class JsHarness(ClientTestMixin):
    """A connected client, its JetStream context, and the server's side of the wire."""

    server: ServerSide
    js: JetStreamContext

    def setUp(self) -> None:
        client, self.server = self.connected()
        self.js = client.jetstream()
        self.subs: dict[str, int] = {}

    def written(self) -> list[Frame]:
        """The frames written since the last call (after running the reactor turn)."""
        self.clock.advance(0)
        frames = parse_frames(self.server.transport.value())
        self.server.reset()
        for f in frames:
            if f.op == "SUB":
                self.subs[f.subject] = f.sid
        return frames

    def pubs(self, subject_prefix: str = "") -> list[Frame]:
        return [
            f for f in self.written()
            if f.op in ("PUB", "HPUB") and f.subject.startswith(subject_prefix)
        ]

    def sid_for(self, subject: str) -> int:
        if subject in self.subs:
            return self.subs[subject]
        wildcard = subject.rsplit(".", 1)[0] + ".*"
        return self.subs[wildcard]

    def send(self, data: bytes) -> None:
        self.server.send(data)
        self.clock.advance(0)

    def answer(self, frame: Frame, body: Any) -> None:
        """Answer a request frame with ``body`` (JSON-encoded unless bytes)."""
        assert frame.reply is not None
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        self.send(msg_frame(frame.reply, self.sid_for(frame.reply), data))

    def answer_status(self, frame: Frame, status: int, description: str = "") -> None:
        assert frame.reply is not None
        self.send(hmsg_frame(
            frame.reply, self.sid_for(frame.reply), status_block(status, description)
        ))

    def one_request(self, subject: str) -> Frame:
        [f] = self.pubs()
        self.assertEqual(f.subject, subject)  # type: ignore[attr-defined]
        return f
