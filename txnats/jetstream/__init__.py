"""JetStream: streams, consumers, publishing with acks, the key-value and object stores.

``nc.jetstream()`` (or ``JetStreamContext(nc)``) gives the context; everything here is
built on the client's public API.
"""

from __future__ import annotations

from zope.interface import classImplements

from txnats.interfaces import IJsMsg, IKeyValue, IObjectStore
from txnats.jetstream._api import PubAck, RawStreamMsg
from txnats.jetstream.context import JetStreamContext
from txnats.jetstream.kv import Entry, KeyValue, KeyValueStatus, KeyWatcher
from txnats.jetstream.msg import JsMsg, MsgMetadata, SequencePair
from txnats.jetstream.object_store import ObjectInfo, ObjectStore, ObjectStoreStatus
from txnats.jetstream.ordered import OrderedConsumer
from txnats.jetstream.pull import PullConsumer

classImplements(JsMsg, IJsMsg)
classImplements(KeyValue, IKeyValue)
classImplements(ObjectStore, IObjectStore)

__all__ = [
    "Entry",
    "JetStreamContext",
    "JsMsg",
    "KeyValue",
    "KeyValueStatus",
    "KeyWatcher",
    "MsgMetadata",
    "ObjectInfo",
    "ObjectStore",
    "ObjectStoreStatus",
    "OrderedConsumer",
    "PubAck",
    "PullConsumer",
    "RawStreamMsg",
    "SequencePair",
]
