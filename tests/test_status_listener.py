"""``Client.add_status_listener``: code built on the client learns of every state change."""

from __future__ import annotations

from twisted.trial.unittest import SynchronousTestCase

from txnats import ClientState
from txnats.errors import InvalidArgumentTypeError
from txnats.testing import ServerSide

from .support.clients import ClientTestMixin, endpoint
from .support.wire import info_line

S = ClientState


class StatusListenerTests(ClientTestMixin, SynchronousTestCase):
    def test_every_state_change_in_order(self) -> None:
        client = self.make_client(max_reconnect_attempts=-1, reconnect_wait=0.5, reconnect_jitter=0)
        seen: list[ClientState] = []
        client.add_status_listener(seen.append)
        client.start()
        self.clock.advance(0)
        server = self.accept()
        self.assertEqual(seen, [S.CONNECTED])
        server.lose()
        self.clock.advance(0)
        self.assertEqual(seen, [S.CONNECTED, S.RECONNECTING])
        self.clock.advance(1)
        server = self.accept()
        self.assertEqual(seen, [S.CONNECTED, S.RECONNECTING, S.CONNECTED])
        d = client.close()
        self.pump(server)
        self.successResultOf(d)
        self.assertEqual(seen[-1], S.CLOSED)

    def test_removed_listener_hears_nothing(self) -> None:
        client = self.make_client()
        seen: list[ClientState] = []
        remove = client.add_status_listener(seen.append)
        remove()
        remove()  # harmless
        client.start()
        self.clock.advance(0)
        self.accept()
        self.assertEqual(seen, [])

    def test_raising_listener_does_not_stop_the_others(self) -> None:
        client = self.make_client()
        seen: list[ClientState] = []

        def bad(state: ClientState) -> None:
            raise RuntimeError("listener bug")

        client.add_status_listener(bad)
        client.add_status_listener(seen.append)
        client.start()
        self.clock.advance(0)
        self.accept()
        self.assertEqual(seen, [S.CONNECTED])
        self.assertEqual(len(self.flushLoggedErrors(RuntimeError)), 1)

    def test_not_callable_is_refused(self) -> None:
        client = self.make_client()
        with self.assertRaises(InvalidArgumentTypeError):
            client.add_status_listener("CONNECTED")  # type: ignore[arg-type]

    def test_lame_duck_move_is_heard_as_connected(self) -> None:
        """A move to another server changes no state, but listeners hear CONNECTED again
        once the new connection carries the subscriptions."""
        client = self.make_client([endpoint(4222), endpoint(4223)], reconnect_jitter=0)
        seen: list[ClientState] = []
        client.add_status_listener(seen.append)
        client.start()
        self.clock.advance(0)
        old = self.accept()
        old.send(info_line(ldm=True))
        self.clock.advance(0)
        self.assertEqual(seen, [S.CONNECTED])
        new = ServerSide(self.clock)
        new.send(info_line())
        new.send(b"PONG\r\n")  # the handshake
        self.clock.advance(0)
        self.assertEqual(seen, [S.CONNECTED])  # subscriptions not yet confirmed
        new.send(b"PONG\r\n")
        self.clock.advance(0)
        self.assertEqual(client.connected_url, endpoint(4223))
        self.assertEqual(seen, [S.CONNECTED, S.CONNECTED])
