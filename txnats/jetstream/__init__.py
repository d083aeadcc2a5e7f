"""JetStream: streams, consumers, publishing with acks, the key-value and object stores.

``nc.jetstream()`` (or ``JetStreamContext(nc)``) gives the context; everything here is
built on the client's public API.
"""

from __future__ import annotations

from txnats.jetstream.context import JetStreamContext, PubAck, RawStreamMsg
from txnats.jetstream.msg import JsMsg, MsgMetadata, SequencePair
from txnats.jetstream.ordered import OrderedConsumer
from txnats.jetstream.pull import PullConsumer

__all__ = [
    "JetStreamContext",
    "JsMsg",
    "MsgMetadata",
    "OrderedConsumer",
    "PubAck",
    "PullConsumer",
    "RawStreamMsg",
    "SequencePair",
]
