"""JetStream: streams, consumers, publishing with acks, the key-value and object stores.

``nc.jetstream()`` (or ``JetStreamContext(nc)``) gives the context; everything here is
built on the client's public API. The typed configurations and infos
(:class:`StreamConfig`, :class:`ConsumerInfo`, the enums, ...) come from
:mod:`txnats.jetstream.config` and are exported here too.
"""

from __future__ import annotations

from zope.interface import classImplements

from txnats.interfaces import IJsMsg, IKeyValue, IObjectStore
from txnats.jetstream._api import RawStreamMsg
from txnats.jetstream._manage import Paged
from txnats.jetstream._obj_put import ObjectWriter
from txnats.jetstream._obj_watch import ObjectWatcher
from txnats.jetstream.config import *  # noqa: F403  (the typed records and enums)
from txnats.jetstream.config import __all__ as _config_all
from txnats.jetstream.consume import ConsumeContext, MessagesContext
from txnats.jetstream.context import JetStreamContext
from txnats.jetstream.kv import Entry, KeyValue, KeyValueStatus, KeyWatcher
from txnats.jetstream.msg import JsMsg, MsgMetadata, SequencePair
from txnats.jetstream.object_store import ObjectInfo, ObjectStore, ObjectStoreStatus
from txnats.jetstream.ordered import OrderedConsumer, OrderedMessages
from txnats.jetstream.pull import PullConsumer
from txnats.jetstream.push import PushSubscription
from txnats.jetstream.store_config import KeyValueConfig, ObjectStoreConfig

classImplements(JsMsg, IJsMsg)
classImplements(KeyValue, IKeyValue)
classImplements(ObjectStore, IObjectStore)

__all__ = [
    "ConsumeContext",
    "Entry",
    "JetStreamContext",
    "JsMsg",
    "KeyValue",
    "KeyValueConfig",
    "KeyValueStatus",
    "KeyWatcher",
    "MessagesContext",
    "MsgMetadata",
    "ObjectInfo",
    "ObjectStore",
    "ObjectStoreConfig",
    "ObjectStoreStatus",
    "ObjectWatcher",
    "ObjectWriter",
    "OrderedConsumer",
    "OrderedMessages",
    "Paged",
    "PullConsumer",
    "PushSubscription",
    "RawStreamMsg",
    "SequencePair",
    *_config_all,
]
