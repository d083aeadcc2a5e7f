"""The public surface: what ``import txnats`` offers, and that it keeps its contracts."""

from __future__ import annotations

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

import txnats
from txnats import errors
from txnats.interfaces import IClient, IMsg, ISubscription


class ExportsTests(SynchronousTestCase):
    def test_exports(self) -> None:
        """The top-level names are exactly the documented ones (a change here is an API change)."""
        expected = {
            "Client", "ClientState", "Headers", "IClient", "IMsg", "ISubscription", "Msg",
            "Options", "Statistics", "Subscription", "__version__", "connect", *errors.__all__,
        }
        self.assertEqual(set(txnats.__all__), expected)
        for name in txnats.__all__:
            self.assertTrue(hasattr(txnats, name), name)

    def test_error_tree(self) -> None:
        """Every exported error derives from NatsError, and the built-in bases hold."""
        for name in errors.__all__:
            cls = getattr(errors, name)
            self.assertTrue(issubclass(cls, errors.NatsError), name)
        self.assertTrue(issubclass(errors.TimeoutError, TimeoutError))
        self.assertTrue(issubclass(errors.FlushTimeoutError, errors.TimeoutError))
        self.assertTrue(issubclass(errors.BadSubjectError, ValueError))
        self.assertTrue(issubclass(errors.AuthorizationError, errors.ConnectError))
        self.assertTrue(issubclass(errors.NoServersError, errors.ConnectError))


class InterfaceTests(SynchronousTestCase):
    def test_client_provides_iclient(self) -> None:
        """Client provides IClient."""
        client = txnats.Client(MemoryReactorClock(), "nats://127.0.0.1:4222")
        self.assertTrue(verifyObject(IClient, client))

    def test_subscription_provides_isubscription(self) -> None:
        """Subscription provides ISubscription."""
        client = txnats.Client(MemoryReactorClock(), "nats://127.0.0.1:4222")
        sub = client.subscribe("a.b")
        self.assertTrue(verifyObject(ISubscription, sub))

    def test_msg_provides_imsg(self) -> None:
        """Msg provides IMsg."""
        msg = txnats.Msg("a", None, b"x", None, 1)
        self.assertTrue(verifyObject(IMsg, msg))


class JetStreamInterfaceTests(SynchronousTestCase):
    """The JetStream message and the two stores keep their interfaces."""

    def setUp(self) -> None:
        client = txnats.Client(MemoryReactorClock(), "nats://127.0.0.1:4222")
        self.js = client.jetstream()

    def test_exports(self) -> None:
        """txnats.jetstream exports exactly the documented names."""
        import txnats.jetstream as jetstream
        from txnats.jetstream import config

        self.assertEqual(set(jetstream.__all__), {
            "Entry", "JetStreamContext", "JsMsg", "KeyValue", "KeyValueStatus", "KeyWatcher",
            "MsgMetadata", "ObjectInfo", "ObjectStore", "ObjectStoreStatus",
            "OrderedConsumer", "Paged", "PubAck", "PullConsumer", "RawStreamMsg",
            "SequencePair", "ConsumeContext", "MessagesContext", "OrderedMessages",
            "PushSubscription", "KeyValueConfig", "ObjectStoreConfig", "ObjectWatcher",
            "ObjectWriter", *config.__all__,
        })
        for name in jetstream.__all__:
            self.assertTrue(hasattr(jetstream, name), name)

    def test_jsmsg_provides_ijsmsg(self) -> None:
        """JsMsg provides IJsMsg (and so IMsg)."""
        from txnats.interfaces import IJsMsg
        from txnats.jetstream import JsMsg

        msg = txnats.Msg("a", "$JS.ACK.S.C.1.2.3.4.5", b"x", None, 1)
        jm = JsMsg(msg, self.js.client)
        self.assertTrue(verifyObject(IJsMsg, jm))
        self.assertTrue(verifyObject(IMsg, jm))
        self.assertEqual(jm.metadata.sequence.stream, 2)

    def test_key_value_provides_ikeyvalue(self) -> None:
        """KeyValue provides IKeyValue."""
        from txnats.interfaces import IKeyValue
        from txnats.jetstream import KeyValue, StreamConfig, StreamInfo

        kv = KeyValue(self.js, "b", StreamInfo(StreamConfig("KV_b")))
        self.assertTrue(verifyObject(IKeyValue, kv))

    def test_object_store_provides_iobjectstore(self) -> None:
        """ObjectStore provides IObjectStore."""
        from txnats.interfaces import IObjectStore
        from txnats.jetstream import ObjectStore

        self.assertTrue(verifyObject(IObjectStore, ObjectStore(self.js, "b")))
