"""One ``nats-server`` for all the tests of a TestCase class.

pytest (like the standard library's unittest) calls ``setUpClass`` and
``tearDownClass``; trial does not (its ``TestSuite.run`` skips them). So under
trial ``setUp`` starts the class's server on first use instead, and it is
stopped when the test process exits.
"""

from __future__ import annotations

import atexit
from typing import Any, ClassVar

from txnats.testing import NatsServer

__all__ = ["ServerPerClass"]


class ServerPerClass:
    """Mix in before ``TestCase``; the tests use ``self.server``."""

    server: ClassVar[NatsServer | None] = None
    #: Keyword arguments for :class:`NatsServer`.
    server_options: ClassVar[dict[str, Any]] = {}

    @classmethod
    def setUpClass(cls) -> None:
        super().setUpClass()  # type: ignore[misc]
        cls.server = NatsServer(**cls.server_options).start()

    @classmethod
    def tearDownClass(cls) -> None:
        server, cls.server = cls.__dict__.get("server"), None
        if server is not None:
            server.stop()
        super().tearDownClass()  # type: ignore[misc]

    def setUp(self) -> Any:
        cls = type(self)
        if cls.__dict__.get("server") is None:  # trial: no setUpClass
            server = cls.server = NatsServer(**cls.server_options).start()
            atexit.register(server.stop)
        return super().setUp()  # type: ignore[misc]
