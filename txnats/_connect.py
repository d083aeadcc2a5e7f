"""``connect()``: every connection option as a keyword, a connected client out.

The options are declared once, as the fields of :class:`~txnats.options.Options`;
``connect()`` takes them as keywords and hands them over. For type checkers and
editors, :func:`_options_of` gives ``connect`` the fields' names and types as its
keyword parameters (a ``ParamSpec`` taken from ``Options``), so a misspelt option is
an error before the program runs, as it is (a ``TypeError`` naming the closest option)
when it runs.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, ParamSpec, Protocol

from twisted.internet.defer import Deferred, fail
from twisted.internet.interfaces import IReactorCore

from txnats._args import check_reactor
from txnats._keywords import check_keywords
from txnats.client import Client
from txnats.errors import NatsError
from txnats.options import DEFAULT_URL, Options

__all__ = ["connect"]

P = ParamSpec("P")


class _Connect(Protocol[P]):
    """``connect``'s type: the reactor, the servers, then the options' keywords."""

    def __call__(
        self,
        reactor: IReactorCore,
        servers: str | Sequence[str] = ...,
        /,
        *args: P.args,
        **kwargs: P.kwargs,
    ) -> Deferred[Client]: ...


def _options_of(
    options: Callable[P, Options],
) -> Callable[[Callable[..., Deferred[Client]]], _Connect[P]]:
    """Type the decorated function as taking ``options``' keyword parameters."""

    def typed(f: Callable[..., Deferred[Client]]) -> _Connect[P]:
        return f

    return typed


@_options_of(Options)
def connect(
    reactor: IReactorCore, servers: str | Sequence[str] = DEFAULT_URL, **options: Any
) -> Deferred[Client]:
    """Connect to a NATS server; the Deferred fires with a connected :class:`Client`.

    :param reactor: the reactor to run on (every call times itself with it).
    :param servers: a URL (``nats://[user:pass@|token@]host:port``, ``tls://``,
        ``ws://``, ``wss://``), a comma-separated string of them, a list, or Twisted
        client endpoint strings (``tcp:host=...:port=...``).
    :param options: any field of :class:`~txnats.options.Options` (each documented
        there, with its unit and default), e.g. ``name="svc"``, ``ping_interval=30.0``,
        ``user_credentials="app.creds"``, ``tls_ca_file="ca.pem"``.
    :returns: a Deferred that fires with the client once the server has answered the
        handshake (INFO, CONNECT + PING, PONG).
    :raises InvalidArgumentTypeError: ``reactor`` is not a reactor (raised, not a
        failed Deferred: a programming error).
    :raises TypeError: an unknown option, naming the closest known one.

    The Deferred fails with :class:`InvalidArgumentError` for a bad option value,
    :class:`AuthorizationError` if the server refuses the credentials,
    :class:`CredentialsError` or :class:`TLSError` for local credentials or TLS files
    that cannot be used, and :class:`NoServersError` if no server can be reached.
    """
    check_reactor("connect", reactor)  # a programming error: raised, not a failed Deferred
    check_keywords("connect()", Options, options)
    try:
        client = Client(reactor, servers, Options(**options))
    except NatsError as e:
        return fail(e)
    return client.start()
