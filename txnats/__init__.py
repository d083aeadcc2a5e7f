"""txnats: the NATS client for Twisted."""

from __future__ import annotations

from zope.interface import classImplements

from txnats._connect import connect
from txnats._version import __version__
from txnats.client import Client, ClientState, Statistics
from txnats.errors import *  # noqa: F403
from txnats.errors import __all__ as _errors_all
from txnats.interfaces import IClient, IMsg, ISubscription
from txnats.options import Options
from txnats.protocol.events import Msg
from txnats.protocol.headers import Headers
from txnats.subscription import Subscription

classImplements(Msg, IMsg)

__all__ = [
    "Client",
    "ClientState",
    "Headers",
    "IClient",
    "IMsg",
    "ISubscription",
    "Msg",
    "Options",
    "Statistics",
    "Subscription",
    "__version__",
    "connect",
    *_errors_all,
]
