"""
Subject routing for :class:`~txnats.testing.MemoryNats`: which subscriptions a message
reaches, as nats-server decides it.

- Every plain subscription whose subject matches gets the message, once per
  subscription (two matching subscriptions of one connection: two copies, each with its
  own sid).
- Each queue group whose members match gets it once, by one member chosen at random.
- A connection whose ``CONNECT`` said ``"echo": false`` gets none of its own messages.
- A subscription with a message limit (``UNSUB <sid> <max>``) ends after its last one.

nats-server hands a message to matching subscriptions in the order of its internal
index; here it is the order they were made. No client may count on either.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Protocol

from txnats.testing._wire import Pub, subject_matches

__all__ = ["Router", "Subscriber", "Subscription"]


class Subscriber(Protocol):
    """The connection a subscription belongs to (what the router needs of it)."""

    @property
    def echo(self) -> bool:
        """Whether it hears its own messages."""

    def deliver(self, sub: Subscription, msg: Pub) -> None:
        """Send ``msg`` to ``sub`` (as ``MSG`` or ``HMSG``)."""


@dataclass(eq=False)
class Subscription:
    """One ``SUB`` of one connection."""

    owner: Subscriber
    sid: bytes
    subject: bytes
    queue: bytes | None
    #: Messages it ends after (``UNSUB <sid> <max>``), or ``None``.
    max_msgs: int | None = None
    #: Messages delivered to it so far.
    delivered: int = 0
    tokens: list[bytes] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tokens = self.subject.split(b".")


class Router:
    """
    Every subscription of a server, and the routing of messages to them.

    :param rng: chooses the member of a queue group that gets a message.
    """

    def __init__(self, rng: random.Random) -> None:
        self._rng = rng
        self._subs: dict[Subscription, None] = {}
        # subject -> matching subscriptions, in order; cleared when subscriptions change.
        self._cache: dict[bytes, list[Subscription]] = {}

    def __len__(self) -> int:
        return len(self._subs)

    def add(self, sub: Subscription) -> None:
        """Route matching messages to ``sub`` from now on."""
        self._subs[sub] = None
        self._cache.clear()

    def remove(self, sub: Subscription) -> None:
        """Stop routing to ``sub`` (nothing if it is gone already)."""
        if self._subs.pop(sub, 0) is None:
            self._cache.clear()

    def matching(self, subject: bytes) -> list[Subscription]:
        """The subscriptions ``subject`` matches, in the order they were made."""
        found = self._cache.get(subject)
        if found is None:
            tokens = subject.split(b".")
            found = [s for s in self._subs if subject_matches(s.tokens, tokens)]
            if len(self._cache) < 4096:
                self._cache[subject] = found
        return found

    def route(self, publisher: Subscriber, msg: Pub) -> int:
        """
        Deliver ``msg``, published by ``publisher``, to every subscription it reaches.

        :returns: how many deliveries were made (0: nobody heard it).
        """
        groups: dict[bytes, list[Subscription]] = {}
        chosen: list[Subscription] = []
        for sub in self.matching(msg.subject):
            if sub.owner is publisher and not publisher.echo:
                continue
            if sub.queue is None:
                chosen.append(sub)
            else:
                groups.setdefault(sub.queue, []).append(sub)
        for members in groups.values():
            chosen.append(members[0] if len(members) == 1 else self._rng.choice(members))
        for sub in chosen:
            self.deliver(sub, msg)
        return len(chosen)

    def deliver(self, sub: Subscription, msg: Pub) -> None:
        """Hand ``msg`` to ``sub`` and count it; a subscription at its limit ends."""
        if sub not in self._subs:
            return
        sub.delivered += 1
        if sub.max_msgs is not None and sub.delivered >= sub.max_msgs:
            self.remove(sub)
        sub.owner.deliver(sub, msg)
