"""The public surface: what ``import txnats`` offers, and that it keeps its contracts."""

from __future__ import annotations

from twisted.internet.testing import MemoryReactorClock
from twisted.trial.unittest import SynchronousTestCase
from zope.interface.verify import verifyObject

import txnats
from txnats import errors
from txnats.interfaces import IClient, IMsg, IReader, ISubscription


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


def public_names(cls: type) -> set[str]:
    """The public attributes and methods of ``cls`` (its MRO's, object's excluded)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass is object:
            continue
        names.update(n for n in vars(klass) if not n.startswith("_"))
    return names


class InterfaceCompletenessTests(SynchronousTestCase):
    """Each interface lists what users call on its implementation, with real types."""

    CORE = ("IMsg", "IReader", "ISubscription", "IClient")

    def test_client_interface_is_complete(self) -> None:
        """Every public name of Client is in IClient (before, jetstream, request_many,
        rtt, new_inbox and most properties were missing)."""
        self.assertEqual(public_names(txnats.Client) - set(IClient.names(all=True)), set())

    def test_subscription_interface_is_complete(self) -> None:
        """Every public name of Subscription is in ISubscription, ``__aiter__``
        (async for) included."""
        sub = txnats.Client(MemoryReactorClock(), "nats://h").subscribe("a")
        names = public_names(type(sub))  # (its attributes are slots: in the class)
        # Settings a subscription was made with, and its limits: readable, not a
        # contract for test doubles.
        names -= {"pending_msgs_limit", "pending_bytes_limit", "concurrency"}
        self.assertEqual(names - set(ISubscription.names(all=True)), set())
        self.assertIn("__aiter__", IReader.names(all=True))

    def test_core_interfaces_have_real_return_types(self) -> None:
        """No method of the core interfaces is annotated ``-> object``."""
        import ast
        from pathlib import Path

        import txnats.interfaces

        tree = ast.parse(Path(txnats.interfaces.__file__).read_text())
        vague = [
            f"{cls.name}.{fn.name}"
            for cls in tree.body if isinstance(cls, ast.ClassDef) and cls.name in self.CORE
            for fn in cls.body if isinstance(fn, ast.FunctionDef)
            if fn.returns is None or ast.unparse(fn.returns) == "object"
        ]
        self.assertEqual(vague, [])
