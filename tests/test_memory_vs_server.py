"""
The in-memory server answers raw client bytes as ``nats-server`` does, byte for byte.

Each case is a script of client frames (as a hand-written client, or a broken one, would
send them). It runs once over TCP against a real ``nats-server`` and once against a
:class:`~txnats.testing.MemoryNats`, through the same raw protocol (no txnats client in
between), and what the two servers send back after their ``INFO`` must be the same
bytes, and both must close the connection, or both keep it.

The cases are the measurements written down in :mod:`txnats.testing._wire` and
:mod:`txnats.testing._session`: limits, errors that close and errors that do not,
silent closes, subject rules, auto-unsubscribe, verbose and echo, headers, and
no-responders. Edges where the two servers are known to differ (a size written with
leading zeros, the order in which one connection's subscriptions get a message, the
member of a queue group) have no case here.
"""

from __future__ import annotations

from typing import Any, ClassVar

from twisted.internet.defer import Deferred
from twisted.internet.endpoints import TCP4ClientEndpoint
from twisted.internet.interfaces import IStreamClientEndpoint
from twisted.internet.protocol import Factory, Protocol
from twisted.python.failure import Failure
from twisted.trial import unittest

from txnats.testing import MemoryNats, NatsServer
from txnats.testing._loopback import MemoryEndpoint

from .support.servers import PerClass
from .support.waits import WAIT, bounded, reactor

#: The CONNECT most cases start with.
CONNECT = b'CONNECT {"verbose":false,"headers":true,"no_responders":true}\r\n'
#: Sent after every script: the server's answer marks the end of its output.
END = b"SUB _END 999999\r\nPUB _END 0\r\n\r\n"
END_MSG = b"MSG _END 999999 0\r\n\r\n"
HDR = b"NATS/1.0\r\nK: v\r\n\r\n"


class RawClient(Protocol):
    """Writes a script once INFO has come; collects what the server sends after it."""

    def __init__(self, script: bytes, end: bytes = END_MSG) -> None:
        self.script = script
        self.end = end
        self.received = b""
        self.info = b""
        self.done: Deferred[tuple[bytes, bool]] = Deferred()

    def dataReceived(self, data: bytes) -> None:
        if not self.info:
            self.received += data
            if b"\r\n" not in self.received:
                return
            self.info, _, self.received = self.received.partition(b"\r\n")
            assert self.transport is not None
            self.transport.write(self.script)
            data = b""
        self.received += data
        if self.end in self.received and not self.done.called:
            self.done.callback((self.received.split(self.end)[0], False))
            assert self.transport is not None
            self.transport.loseConnection()

    def connectionLost(self, reason: Failure | None = None) -> None:
        if not self.done.called:
            self.done.callback((self.received, True))


async def exchange(endpoint: IStreamClientEndpoint, script: bytes) -> tuple[bytes, bool]:
    """Connect, send ``script`` (then :data:`END`) after INFO; return what came back
    after INFO (up to the end marker) and whether the server closed the connection.

    A script whose connection hears no echo ends with a PING instead (and must hold no
    PING of its own)."""
    if b'"echo":false' in script:
        assert b"PING" not in script
        proto = RawClient(script + b"PING\r\n", b"PONG\r\n")
    else:
        proto = RawClient(script + END)
    await bounded(endpoint.connect(Factory.forProtocol(lambda: proto)))
    result: tuple[bytes, bool] = await bounded(proto.done, WAIT)
    return result


class BothServers(PerClass):
    """One nats-server and one MemoryNats per class, made with the same settings."""

    fixture_name = "servers"
    servers: ClassVar[tuple[NatsServer, MemoryNats] | None] = None
    #: nats-server configuration text, and the same settings for MemoryNats.
    config: ClassVar[str] = ""
    memory_options: ClassVar[dict[str, Any]] = {}

    @classmethod
    def start_fixture(cls) -> Any:
        real = NatsServer(config=cls.config or None).start()
        memory = MemoryNats(**cls.memory_options).start()

        class Pair(tuple):  # type: ignore[type-arg]
            def stop(self) -> None:
                real.stop()
                memory.stop()

        return Pair((real, memory))

    async def compare(self, script: bytes) -> None:
        assert self.servers is not None
        real, memory = self.servers
        want = await exchange(TCP4ClientEndpoint(reactor, real.host, real.port), script)
        got = await exchange(MemoryEndpoint(reactor, memory.name), script)
        self.assertEqual(got, want, f"script {script[:200]!r}")


# name -> script (CONNECT included where the case needs one).
CASES: dict[str, bytes] = {
    "ping_variants": CONNECT + b"PING\r\nping\r\nPINGX\r\nPING   \r\nPONG xyz\r\nPING\n",
    "unknown_operation": CONNECT + b"FOO bar\r\n",
    "unknown_pubx": CONNECT + b"PUBX a 1\r\nx\r\n",
    "unknown_empty_line": CONNECT + b"\r\nPING\r\n",
    "unknown_leading_space": CONNECT + b" PING\r\n",
    "unknown_msg_from_client": CONNECT + b"MSG a 1 1\r\nx\r\n",
    "unknown_plus": CONNECT + b"+X\r\n",
    "ignored_ok_and_info": CONNECT + b"+OK\r\n+OKAY\r\nINFO {}\r\nPING\r\n",
    "bare_sub": CONNECT + b"SUB\r\n",
    "sub_args_4096": CONNECT + b"SUB " + b"a" * 4094 + b" 1\r\nPING\r\n",
    "sub_args_4097": CONNECT + b"SUB " + b"a" * 4095 + b" 1\r\nPING\r\n",
    "sub_args_4096_after_blanks": CONNECT + b"SUB  \t" + b"a" * 4094 + b" 1\r\nPING\r\n",
    "pub_args_4097": CONNECT + b"PUB " + b"a" * 4095 + b" 1\r\nx\r\n",
    "pub_args_4096": CONNECT + b"PUB " + b"a" * 4094 + b" 1\r\nx\r\nPING\r\n",
    "connect_4096": b'CONNECT {"verbose":false,"name":"' + b"n" * 4075 + b'"}\r\nPING\r\n',
    "connect_4097": b'CONNECT {"verbose":false,"name":"' + b"n" * 4076 + b'"}\r\nPING\r\n',
    "utf8_args_4096": CONNECT + b"SUB " + "\u00e9".encode() * 2046 + b" 1\r\nPING\r\n",
    "silent_bad_size": CONNECT + b"PUB x abc\r\nx\r\n",
    "silent_signed_size": CONNECT + b"PUB x +1\r\nx\r\n",
    "silent_pub_too_few": CONNECT + b"PUB x\r\n",
    "silent_pub_too_many": CONNECT + b"PUB a b c 1\r\nx\r\n",
    "silent_sub_too_many": CONNECT + b"SUB a q 1 2\r\n",
    "silent_sub_too_few": CONNECT + b"SUB a\r\n",
    "silent_unsub_too_many": CONNECT + b"UNSUB 1 2 3\r\n",
    "silent_hpub_header_over_total": CONNECT + b"HPUB a 5 3\r\nxxx\r\n",
    "silent_hpub_without_headers": b'CONNECT {"verbose":false}\r\nHPUB a 12 14\r\n',
    "silent_connect_not_json": b"CONNECT {nope\r\n",
    "silent_connect_array": b"CONNECT []\r\n",
    "silent_connect_wrong_type": b'CONNECT {"verbose":"yes"}\r\n',
    "silent_connect_trailing": b'CONNECT {"verbose":false} x\r\n',
    "silent_err_from_client": CONNECT + b"-ERR 'x'\r\n",
    "connect_null": b"CONNECT null\r\nPING\r\n",
    "connect_unknown_field": b'CONNECT {"verbose":false,"bogus":1}\r\nPING\r\n',
    "connect_protocol_2": b'CONNECT {"verbose":false,"protocol":2}\r\n',
    "no_responders_needs_headers": b'CONNECT {"verbose":false,"no_responders":true}\r\n',
    "max_payload_pub": CONNECT + b"PUB a 1048577\r\n",
    "max_payload_hpub": CONNECT + b"HPUB a 10 1048577\r\n",
    "payload_exactly_max": CONNECT + b"SUB a 1\r\nPUB a 1048576\r\n" + b"p" * 1048576 + b"\r\n",
    "payload_without_crlf": CONNECT + b"SUB x 1\r\nPUB x 1\r\nxyPING\r\n",
    "payload_lf_only": CONNECT + b"SUB x 1\r\nPUB x 1\r\nx\nPING\r\n",
    "blanks_and_tabs": CONNECT + b"SUB\ta\t1\r\nPUB   a   1 \r\nx\r\nPUB a 0\r\n\r\n",
    "lf_only_lines": CONNECT + b"SUB a 1\nPUB a 1\nx\r\nPING\n",
    "lowercase_operations": b'connect {"verbose":false}\r\nsub a 1\r\npub a 1\r\nx\r\n',
    "publish_wildcard_routed": CONNECT + b"SUB > 1\r\nPUB a.* 1\r\nx\r\nPUB > 1\r\ny\r\n",
    "publish_wildcard_star_sub": CONNECT + b"SUB a.* 1\r\nPUB a.* 1\r\nx\r\n",
    "publish_empty_token": CONNECT + b"SUB > 1\r\nPUB a..b 1\r\nx\r\nPUB .a 1\r\ny\r\n",
    "reply_not_checked": CONNECT + b"SUB a 1\r\nPUB a r.* 1\r\nx\r\nPUB a r..b 1\r\ny\r\n",
    "invalid_subscriptions": CONNECT + b"SUB a..b 1\r\nSUB a.>.b 2\r\nSUB .a 3\r\nSUB a. 4\r\n",
    "partial_wildcard_tokens": CONNECT + b"SUB a* 2\r\nPUB a* 1\r\nx\r\nPUB ab 1\r\ny\r\n",
    "gt_needs_a_token": CONNECT + b"SUB g.> 1\r\nPUB g 1\r\nx\r\nPUB g.a.b 1\r\ny\r\n",
    "star_one_token": CONNECT + b"SUB w.* 1\r\nPUB w 0\r\n\r\nPUB w.a.b 0\r\n\r\nPUB w.a 0\r\n\r\n",
    "queue_names_not_checked": CONNECT + b"SUB q g.* 1\r\nPUB q 1\r\nx\r\n",
    "utf8_and_nul_subjects": CONNECT + "SUB é.ü 1\r\nPUB é.ü 1\r\nx\r\n".encode()
    + b"SUB a\x00b 2\r\nPUB a\x00b 1\r\ny\r\n",
    "sid_is_any_token": CONNECT + b"SUB a xy\r\nPUB a 1\r\nx\r\n",
    "sid_reused_ignored": CONNECT
    + b"SUB x 1\r\nSUB y 1\r\nPUB x 1\r\nx\r\nPUB y 1\r\ny\r\nUNSUB 1\r\nPUB x 1\r\nz\r\n",
    "unsub_unknown_sid": CONNECT + b"UNSUB 99\r\nUNSUB x\r\nPING\r\n",
    "unsub_zero_negative_junk": CONNECT + b"SUB a 1\r\nUNSUB 1 0\r\nSUB b 2\r\nUNSUB 2 -1\r\n"
    b"SUB c 3\r\nUNSUB 3 x\r\nPUB a 0\r\n\r\nPUB b 0\r\n\r\nPUB c 0\r\n\r\n",
    "auto_unsubscribe": CONNECT
    + b"SUB a 1\r\nUNSUB 1 2\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nPUB a 1\r\n3\r\n",
    "auto_unsubscribe_reached": CONNECT
    + b"SUB a 1\r\nPUB a 1\r\n1\r\nPUB a 1\r\n2\r\nUNSUB 1 2\r\nPUB a 1\r\n3\r\n",
    "auto_unsubscribe_counts_earlier": CONNECT + b"SUB a 1\r\nPUB a 1\r\n1\r\nUNSUB 1 3\r\n"
    b"PUB a 1\r\n2\r\nPUB a 1\r\n3\r\nPUB a 1\r\n4\r\n",
    "verbose_before_connect": b"SUB a 1\r\nPUB a 1\r\nx\r\nPING\r\n",
    "verbose_connect": b'CONNECT {"verbose":true}\r\nSUB a 1\r\nPUB a 1\r\nx\r\nUNSUB 1\r\n',
    "verbose_invalid_subject": b'CONNECT {"verbose":true}\r\nSUB a..b 1\r\nPUB a.* 0\r\n\r\n',
    "echo_off": b'CONNECT {"verbose":false,"echo":false}\r\nSUB a 1\r\nPUB a 1\r\nx\r\n',
    "headers_relayed_untouched": CONNECT
    + b"SUB a 1\r\nHPUB a 5 7\r\nxxxxxhi\r\nHPUB a 0 1\r\nx\r\nHPUB a 2 2\r\nxy\r\n",
    "hmsg": CONNECT + b"SUB h 9\r\nHPUB h r %d %d\r\n%shi\r\n" % (len(HDR), len(HDR) + 2, HDR),
    "no_responders": CONNECT + b"SUB _I.x 5\r\nPUB nobody _I.x 1\r\nA\r\n"
    b"HPUB nobody _I.x %d %d\r\n%shi\r\nPUB nobody 0\r\n\r\n" % (len(HDR), len(HDR) + 2, HDR),
    "no_responders_without_reply_sub": CONNECT + b"PUB nobody _I.x 1\r\nA\r\n",
    "no_responders_needs_both_flags": b'CONNECT {"verbose":false,"headers":true}\r\n'
    b"SUB _I.x 5\r\nPUB nobody _I.x 1\r\nA\r\n",
    "no_responders_echo_off": b'CONNECT {"verbose":false,"headers":true,"no_responders":true,'
    b'"echo":false}\r\nSUB self 1\r\nSUB _I.y 2\r\nPUB self _I.y 0\r\n\r\n',
    "jetstream_absent": CONNECT + b"SUB _I.x 2\r\nPUB $JS.API.INFO _I.x 0\r\n\r\n",
}


def _case(script: bytes, doc: str) -> Any:
    async def test(self: BothServers) -> None:
        await self.compare(script)

    test.__doc__ = doc
    return test


class RawProtocolTests(BothServers, unittest.TestCase):
    """Both servers send the same bytes back for each script of :data:`CASES`."""


for _name, _script in CASES.items():
    setattr(
        RawProtocolTests, f"test_{_name}",
        _case(_script, f"{_name.replace('_', ' ')}: the same answer from both servers."),
    )


class AuthorizationTests(BothServers, unittest.TestCase):
    """With a user and password required, both servers refuse and accept alike."""

    config = "authorization { user: u, password: p }\n"
    memory_options = {"user": "u", "password": "p"}

    async def test_wrong_password(self) -> None:
        """A wrong password: -ERR 'Authorization Violation' and a close."""
        await self.compare(b'CONNECT {"verbose":false,"user":"u","pass":"x"}\r\nPING\r\n')

    async def test_operation_before_connect(self) -> None:
        """Any operation before CONNECT: -ERR 'Authorization Violation' and a close."""
        await self.compare(b"SUB a 1\r\nPING\r\n")

    async def test_good_credentials(self) -> None:
        """The right user and password: the connection works."""
        await self.compare(
            b'CONNECT {"verbose":false,"user":"u","pass":"p"}\r\nSUB a 1\r\nPUB a 1\r\nx\r\n'
        )

    async def test_info_says_auth_required(self) -> None:
        """Both INFOs say auth_required."""
        assert self.servers is not None
        real, memory = self.servers
        infos = []
        for endpoint in (
            TCP4ClientEndpoint(reactor, real.host, real.port),
            MemoryEndpoint(reactor, memory.name),
        ):
            proto = RawClient(b'CONNECT {"verbose":false,"user":"u","pass":"p"}\r\n' + END)
            await bounded(endpoint.connect(Factory.forProtocol(lambda p=proto: p)))
            await bounded(proto.done)
            infos.append(proto.info)
        for info in infos:
            self.assertIn(b'"auth_required":true', info)


class Listener(Protocol):
    """A raw subscriber: sends its script after INFO and keeps what comes back."""

    def __init__(self, script: bytes) -> None:
        self.script = script
        self.received = b""
        self.greeted = False
        self.waiters: list[tuple[bytes, int, Deferred[None]]] = []

    def dataReceived(self, data: bytes) -> None:
        self.received += data
        if not self.greeted and b"\r\n" in self.received:
            self.greeted = True
            self.received = self.received.partition(b"\r\n")[2]
            assert self.transport is not None
            self.transport.write(self.script)
        for waiter in list(self.waiters):
            text, count, d = waiter
            if self.received.count(text) >= count:
                self.waiters.remove(waiter)
                d.callback(None)

    def wait_for(self, text: bytes, count: int = 1) -> Deferred[None]:
        """Fires once ``text`` has come ``count`` times."""
        d: Deferred[None] = Deferred()
        self.waiters.append((text, count, d))
        self.dataReceived(b"")
        return bounded(d)


class TwoConnectionTests(BothServers, unittest.TestCase):
    """What one connection publishes, as another receives it, on both servers."""

    async def listen(self, endpoint: IStreamClientEndpoint, script: bytes) -> Listener:
        proto = Listener(script + b"PING\r\n")
        await bounded(endpoint.connect(Factory.forProtocol(lambda: proto)))
        await proto.wait_for(b"PONG\r\n")
        return proto

    async def run_both(self, sub_script: bytes, pub_script: bytes, until: bytes,
                       count: int = 1) -> list[bytes]:
        assert self.servers is not None
        real, memory = self.servers
        out = []
        for make in (
            lambda: TCP4ClientEndpoint(reactor, real.host, real.port),
            lambda: MemoryEndpoint(reactor, memory.name),
        ):
            listener = await self.listen(make(), sub_script)
            await exchange(make(), pub_script)
            await listener.wait_for(until, count)
            assert listener.transport is not None
            listener.transport.loseConnection()
            out.append(listener.received.split(b"PONG\r\n", 1)[1])
        return out

    async def test_headers_to_a_subscriber_without_headers(self) -> None:
        """A subscriber whose CONNECT has no headers gets an HPUB as MSG, payload only."""
        want, got = await self.run_both(
            b'CONNECT {"verbose":false}\r\nSUB h 1\r\n',
            CONNECT + b"HPUB h r %d %d\r\n%shi\r\nPUB h 2\r\nok\r\n" % (len(HDR), len(HDR) + 2,
                                                                      HDR),
            b"ok\r\n",
        )
        self.assertEqual(got, want)
        self.assertEqual(got, b"MSG h 1 r 2\r\nhi\r\nMSG h 1 2\r\nok\r\n")

    async def test_headers_to_a_subscriber_with_headers(self) -> None:
        """A subscriber with headers gets the header block as the publisher wrote it."""
        want, got = await self.run_both(
            CONNECT + b"SUB h 1\r\n",
            CONNECT + b"HPUB h %d %d\r\n%shi\r\n" % (len(HDR), len(HDR) + 2, HDR),
            b"hi\r\n",
        )
        self.assertEqual(got, want)

    async def test_echo_off_still_hears_others(self) -> None:
        """echo false hides a connection's own messages only."""
        want, got = await self.run_both(
            b'CONNECT {"verbose":false,"echo":false}\r\nSUB e 1\r\nPUB e 4\r\nself\r\n',
            CONNECT + b"PUB e 5\r\nother\r\n",
            b"other\r\n",
        )
        self.assertEqual(got, want)
        self.assertEqual(got, b"MSG e 1 5\r\nother\r\n")
