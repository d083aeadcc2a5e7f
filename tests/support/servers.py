"""One fixture (a ``nats-server``, a cluster) for all the tests of a TestCase class.

pytest (like the standard library's unittest) calls ``setUpClass`` and
``tearDownClass``; trial does not (its ``TestSuite.run`` skips them). So under trial
``setUp`` starts the class's fixture on first use instead. Only one class fixture runs
at a time: starting one stops the fixture of any other class (under trial that class's
tests are done by then, as trial runs the tests of a class together), and the last one
is stopped when the test process exits.
"""

from __future__ import annotations

import atexit
from typing import Any, ClassVar

from txnats.testing import NatsServer

__all__ = ["PerClass", "ServerPerClass"]

#: The running fixture of each class (at most one at a time).
_running: dict[type, Any] = {}


def _stop(cls: type) -> None:
    """Stop the fixture of ``cls``, if it runs, and clear the class attribute."""
    fixture = _running.pop(cls, None)
    if fixture is not None:
        setattr(cls, cls.fixture_name, None)  # type: ignore[attr-defined]
        fixture.stop()


@atexit.register
def _stop_all() -> None:
    """Stop what is still running when trial exits (it never calls tearDownClass)."""
    for cls in list(_running):
        _stop(cls)


class PerClass:
    """Mix in before ``TestCase``: one fixture, made by :meth:`start_fixture`, per class.

    The tests read it from the class attribute named by :attr:`fixture_name`.
    """

    #: The class attribute that holds the fixture while it runs (None otherwise).
    fixture_name: ClassVar[str]

    @classmethod
    def start_fixture(cls) -> Any:
        """Start and return this class's fixture (it has a ``stop()`` method)."""
        raise NotImplementedError

    def reuse_fixture(self, fixture: Any) -> None:
        """Called by ``setUp`` when the class's fixture runs already: ready it for a test."""

    @classmethod
    def class_fixture(cls) -> Any:
        """This class's fixture, started now (and any other class's stopped) if need be."""
        fixture = _running.get(cls)
        if fixture is None:
            for other in list(_running):
                _stop(other)
            fixture = _running[cls] = cls.start_fixture()
            setattr(cls, cls.fixture_name, fixture)
        return fixture

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()  # type: ignore[misc]
        cls.class_fixture()

    @classmethod
    def tearDownClass(cls) -> None:
        _stop(cls)
        super().tearDownClass()  # type: ignore[misc]

    def setUp(self) -> Any:
        cls = type(self)
        if cls in _running:
            self.reuse_fixture(_running[cls])
        else:  # trial: no setUpClass
            cls.class_fixture()
        return super().setUp()  # type: ignore[misc]


class ServerPerClass(PerClass):
    """One :class:`NatsServer` per class; the tests use ``self.server``."""

    fixture_name = "server"
    server: ClassVar[NatsServer | None] = None
    #: Keyword arguments for :class:`NatsServer`.
    server_options: ClassVar[dict[str, Any]] = {}

    @classmethod
    def start_fixture(cls) -> NatsServer:
        return NatsServer(**cls.server_options).start()
