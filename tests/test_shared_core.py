"""
The core integration tests of ``tests/test_integration.py``, run against the in-memory
server (:class:`txnats.testing.MemoryNats`) instead of a ``nats-server`` process.

Each class here is a class of ``test_integration`` whose fixture is a ``MemoryNats``:
the test bodies are the same code, asserting the same outcomes, and
``test_integration`` runs them against the real server. So a difference between the
two servers that a client can see in these tests fails one of the two runs. The module
is imported as a whole (``core``), so that pytest does not collect its classes twice.

Left out, with the reason: the tests that put credentials in a ``nats://`` URL (an
in-memory server has a ``memory:`` address, and credentials go as options).
"""

from __future__ import annotations

from typing import Any, ClassVar

from twisted.trial.unittest import SkipTest

from txnats.testing import MemoryNats

from . import test_integration as core

#: Why a test of test_integration does not run here.
NO_URL_CREDENTIALS = "credentials in a nats:// URL: a memory: address carries none"


class InMemory:
    """Mix in before a ``test_integration`` class: its server is a ``MemoryNats``."""

    #: Keyword arguments for :class:`MemoryNats` (the class's ``server_options`` are
    #: nats-server configuration text).
    memory_options: ClassVar[dict[str, Any]] = {}

    @classmethod
    def start_fixture(cls) -> MemoryNats:
        return MemoryNats(**cls.memory_options).start()


class MemoryPubSubTests(InMemory, core.PubSubTests):
    """PubSubTests against MemoryNats."""


class MemoryWildcardTests(InMemory, core.WildcardTests):
    """WildcardTests against MemoryNats."""


class MemoryQueueGroupTests(InMemory, core.QueueGroupTests):
    """QueueGroupTests against MemoryNats."""


class MemoryAutoUnsubscribeTests(InMemory, core.AutoUnsubscribeTests):
    """AutoUnsubscribeTests against MemoryNats."""


class MemorySlowConsumerTests(InMemory, core.SlowConsumerTests):
    """SlowConsumerTests against MemoryNats."""


class MemoryHandlerTests(InMemory, core.HandlerTests):
    """HandlerTests against MemoryNats."""


class MemoryNextMsgTests(InMemory, core.NextMsgTests):
    """NextMsgTests against MemoryNats."""


class MemoryRequestTests(InMemory, core.RequestTests):
    """RequestTests against MemoryNats."""


class MemoryRequestManyTests(InMemory, core.RequestManyTests):
    """RequestManyTests against MemoryNats."""


class MemoryFlushTests(InMemory, core.FlushTests):
    """FlushTests against MemoryNats."""


class MemoryDrainTests(InMemory, core.DrainTests):
    """DrainTests against MemoryNats."""


class MemoryMaxPayloadTests(InMemory, core.MaxPayloadTests):
    """MaxPayloadTests against MemoryNats (max_payload 1024, as the class's config says)."""

    memory_options = {"max_payload": 1024}


class MemoryBadSubjectTests(InMemory, core.BadSubjectTests):
    """BadSubjectTests against MemoryNats."""


class MemoryCloseTests(InMemory, core.CloseTests):
    """CloseTests against MemoryNats."""


class MemoryUserPasswordAuthTests(InMemory, core.UserPasswordAuthTests):
    """UserPasswordAuthTests against MemoryNats (the same user and password)."""

    memory_options = {"user": core.USER, "password": core.PASSWORD}

    async def test_credentials_in_url(self) -> None:
        """Not here: see NO_URL_CREDENTIALS."""
        raise SkipTest(NO_URL_CREDENTIALS)

    async def test_wrong_password_in_url(self) -> None:
        """Not here: see NO_URL_CREDENTIALS."""
        raise SkipTest(NO_URL_CREDENTIALS)


class MemoryTokenAuthTests(InMemory, core.TokenAuthTests):
    """TokenAuthTests against MemoryNats (the same token)."""

    memory_options = {"token": core.TOKEN}

    async def test_token_in_url(self) -> None:
        """Not here: see NO_URL_CREDENTIALS."""
        raise SkipTest(NO_URL_CREDENTIALS)

    async def test_wrong_token(self) -> None:
        """A wrong token as an option fails with AuthorizationError (the URL half of the
        real-server test is left out: see NO_URL_CREDENTIALS)."""
        await self.assert_fails(
            core.txnats.connect(core.reactor, self.server.url, token="wrong"),
            core.AuthorizationError,
        )
