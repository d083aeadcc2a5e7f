"""A Client whose arguments are refused never exists half-built.

Before, ``Client(reactor, servers, Options(max_pings_out=0))`` raised from ``__init__``
after some attributes were set: a subclass (or anything holding the object, a
traceback renderer calling ``repr``) then met ``AttributeError`` on ``is_closed``.
Now every check runs in ``__new__``, before the object exists.
"""

from __future__ import annotations

from typing import Any

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase

from txnats import Client, ConnectError, InvalidArgumentError, InvalidArgumentTypeError, Options

BAD: list[tuple[str, tuple[Any, ...], type[Exception]]] = [
    ("max_pings_out=0", ("nats://127.0.0.1:4222", Options(max_pings_out=0)), InvalidArgumentError),
    ("connect_timeout=-1", ("nats://h", Options(connect_timeout=-1)), InvalidArgumentError),
    ("max_control_line=1", ("nats://h", Options(max_control_line=1)), InvalidArgumentError),
    ("error_cb not callable", ("nats://h", Options(error_cb="x")), InvalidArgumentTypeError),  # type: ignore[arg-type]
    ("bad scheme", ("http://h:1",), ConnectError),
    ("empty server list", ([],), ConnectError),
    ("no host", ("nats://:4222",), ConnectError),
]


class Recording(Client):
    """A Client subclass that records every object whose __init__ ran."""

    made: list[Client] = []

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        Recording.made.append(self)
        super().__init__(*args, **kwargs)


class ConstructionTests(SynchronousTestCase):
    def setUp(self) -> None:
        Recording.made = []

    def test_refused_arguments_make_no_object(self) -> None:
        """Each refused argument raises before any object exists (__init__ never runs)."""
        for name, args, error in BAD:
            with self.assertRaises(error, msg=name):
                Recording(MemoryReactorClock(), *args)
            self.assertEqual(Recording.made, [], name)
        with self.assertRaises(InvalidArgumentTypeError):
            Recording("not a reactor")  # type: ignore[arg-type]
        self.assertEqual(Recording.made, [])

    def test_accepted_arguments_make_a_whole_client(self) -> None:
        """A client built with good arguments answers every state property."""
        client = Recording(MemoryReactorClock(), "nats://127.0.0.1:4222", Options())
        self.assertEqual(Recording.made, [client])
        self.assertEqual(
            (client.is_closed, client.is_connected, client.is_reconnecting, client.is_draining),
            (False, False, False, False),
        )
        self.assertEqual(client.servers, ["nats://127.0.0.1:4222"])
        self.assertIn("CONNECTING", repr(client))
        self.assertIsNone(client.connected_url)
        self.assertEqual(client.stats.out_msgs, 0)
