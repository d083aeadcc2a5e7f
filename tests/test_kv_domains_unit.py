"""Key-value buckets across JetStream domains, without a server: what a domain, an API
prefix and a mirror's or source's origin may be (checked before anything is sent), and
the subjects a bucket writes and reads through another domain (as nats.go's kv.go does:
a context's API prefix in front of the key's subject, or a mirror origin's external API
prefix). tests/test_kv_domains.py proves the same on a hub and a leaf nats-server.
"""

from __future__ import annotations

from typing import Any

from twisted.trial.unittest import SynchronousTestCase

from tests.support.jetstream import JsHarness
from txnats.errors import InvalidArgumentError, InvalidArgumentTypeError
from txnats.jetstream import JetStreamContext, StreamConfig, StreamInfo
from txnats.jetstream.config import ExternalStream, StreamSource
from txnats.jetstream.kv import KeyValue, bucket_stream_config

#: Domain names nats-server refuses too (or that make no subject), and non-strings.
BAD_DOMAINS: list[Any] = ["a.b", "a b", "*", ">", "a>", "a*b", "tab\there", "x\n", "hub."]
#: API prefixes that are not subjects without wildcards.
BAD_PREFIXES: list[Any] = ["a b", "a.*", "a.>", ">", "a..b", ".a", "\r\n"]


class NoIO:
    """A client or context that fails the test when anything is asked of it."""

    def __init__(self, case: SynchronousTestCase) -> None:
        self._case = case

    def __getattr__(self, name: str) -> Any:
        self._case.fail(f"I/O attempted: .{name}")


class ContextDomainTests(SynchronousTestCase):
    """``nc.jetstream(domain=..., prefix=...)`` checks both when the context is made."""

    def context(self, **options: Any) -> JetStreamContext:
        return JetStreamContext(NoIO(self), **options)  # type: ignore[arg-type]

    def test_bad_domain_raises_before_io(self) -> None:
        """A domain that would make a prefix nothing answers raises at once, naming it
        (before: it made ``$JS.a.b.API`` and every request failed later as "JetStream
        not enabled")."""
        for bad in BAD_DOMAINS:
            with self.assertRaises(InvalidArgumentError) as cm:
                self.context(domain=bad)
            self.assertIn("domain", str(cm.exception))
        for bad in (5, b"hub", ["hub"]):
            self.assertRaises(InvalidArgumentTypeError, self.context, domain=bad)

    def test_bad_prefix_raises_before_io(self) -> None:
        for bad in BAD_PREFIXES:
            with self.assertRaises(InvalidArgumentError) as cm:
                self.context(prefix=bad)
            self.assertIn("prefix", str(cm.exception))
        self.assertRaises(InvalidArgumentTypeError, self.context, prefix=7)

    def test_domain_and_prefix_together_raise(self) -> None:
        self.assertRaises(InvalidArgumentError, self.context, domain="hub", prefix="$JS.API")

    def test_good_domains_and_prefixes(self) -> None:
        """A domain becomes ``$JS.<domain>.API``; a prefix loses trailing dots; an empty
        one is the local JetStream (as nats.go)."""
        self.assertEqual(self.context(domain="hub").prefix, "$JS.hub.API")
        self.assertEqual(self.context(domain="hub").domain, "hub")
        self.assertEqual(self.context(domain="edge-1_b/x").prefix, "$JS.edge-1_b/x.API")
        self.assertEqual(self.context(prefix="$JS.hub.API.").prefix, "$JS.hub.API")
        self.assertEqual(self.context(prefix="JS.acme.API").prefix, "JS.acme.API")
        self.assertEqual(self.context(domain="").prefix, "$JS.API")
        self.assertEqual(self.context(prefix="").prefix, "$JS.API")
        self.assertEqual(self.context().prefix, "$JS.API")


class TopologyArgumentTests(SynchronousTestCase):
    """A mirror's or a source's origin is checked before the stream is asked for."""

    def setUp(self) -> None:
        self.js: Any = NoIO(self)

    def refused(self, **config: Any) -> str:
        """Creating bucket ``b`` with ``config`` fails before any I/O; the message."""
        f = self.failureResultOf(
            KeyValue.create_bucket(self.js, "b", **config), InvalidArgumentError
        )
        self.assertRaises(InvalidArgumentError, bucket_stream_config, "b", **config)
        return str(f.value)

    def both_ways(self, origin: Any) -> list[str]:
        """The messages of ``origin`` refused as a mirror and as a source."""
        return [self.refused(mirror=origin), self.refused(sources=["ok", origin])]

    def test_domain_and_api_prefix_together(self) -> None:
        for msg in self.both_ways({"bucket": "o", "domain": "hub", "api_prefix": "$JS.hub.API"}):
            self.assertIn("domain and api_prefix", msg)
        for msg in self.both_ways({"bucket": "o", "domain": "hub",
                                   "external": {"api": "$JS.hub.API"}}):
            self.assertIn("external and domain", msg)

    def test_invalid_domain_names(self) -> None:
        """Before: ``{"domain": "h.u.b"}`` made a mirror of ``$JS.h.u.b.API`` that the
        server accepted and that never filled."""
        for bad in BAD_DOMAINS:
            for msg in self.both_ways({"bucket": "o", "domain": bad}):
                self.assertIn("domain", msg)
                self.assertIn(repr(bad), msg)
        for bad in (5, b"hub"):
            f = self.failureResultOf(
                KeyValue.create_bucket(self.js, "b", mirror={"bucket": "o", "domain": bad}),
                InvalidArgumentTypeError,
            )
            self.assertIn("domain must be a str", str(f.value))

    def test_invalid_api_prefixes(self) -> None:
        """Before: a trailing dot went to the server (which refused it with 10052)."""
        for bad in BAD_PREFIXES:
            for msg in self.both_ways({"bucket": "o", "api_prefix": bad}):
                self.assertIn("api_prefix", msg)
        for bad in ("a b", None, 5):
            self.both_ways({"bucket": "o", "external": {"api": bad}})
        self.both_ways({"bucket": "o", "external": {"api": "$JS.hub.API", "other": "x"}})
        self.both_ways({"bucket": "o", "external": "$JS.hub.API"})

    def test_unknown_fields_and_bad_names(self) -> None:
        """A misspelt field would have been sent as a field the server ignores (a
        local mirror where one of another domain was meant)."""
        msg = self.both_ways({"bucket": "o", "domian": "hub"})[0]
        self.assertIn("unknown field(s) domian", msg)
        self.both_ways({"bucket": "o", "name": "KV_p"})
        self.both_ways({"domain": "hub"})
        self.both_ways({"bucket": "a.b"})
        self.both_ways({"name": "KV_a b"})
        self.both_ways(5)

    def test_origins_as_the_server_gets_them(self) -> None:
        """domain -> external api ``$JS.<domain>.API``; api_prefix without trailing dots;
        a name without ``KV_`` gets it (nats.go); source fields pass through; sourced
        keys are mapped into the bucket unless subject_transforms is given."""
        mirror = bucket_stream_config("m", mirror={"bucket": "o", "domain": "hub"})
        self.assertEqual(mirror["mirror"], {"name": "KV_o", "external": {"api": "$JS.hub.API"}})
        self.assertTrue(mirror["mirror_direct"])
        self.assertNotIn("subjects", mirror)
        own = [{"src": "$KV.q.a.>", "dest": "$KV.s.a.>"}]
        cfg = bucket_stream_config("s", sources=[
            {"name": "p", "api_prefix": "$JS.hub.API.", "filter_subject": "$KV.p.x.>"},
            {"bucket": "q", "subject_transforms": own},
            {"bucket": "s", "domain": "hub"},
            {"bucket": "local", "domain": ""},
        ])
        self.assertEqual(cfg["subjects"], ["$KV.s.>"])
        p, q, s, local = cfg["sources"]
        self.assertEqual(p, {
            "name": "KV_p", "external": {"api": "$JS.hub.API"}, "filter_subject": "$KV.p.x.>",
            "subject_transforms": [{"src": "$KV.p.>", "dest": "$KV.s.>"}],
        })
        self.assertEqual(q, {"name": "KV_q", "subject_transforms": own})
        self.assertEqual(s, {"name": "KV_s", "external": {"api": "$JS.hub.API"}})
        self.assertNotIn("external", local)
        ext = bucket_stream_config("m", mirror={
            "bucket": "o", "external": {"api": "$JS.acc.API", "deliver": "deliver.acc"},
        })
        self.assertEqual(
            ext["mirror"]["external"], {"api": "$JS.acc.API", "deliver": "deliver.acc"}
        )


def mirror_info(name: str, origin: str, api: str | None) -> StreamInfo:
    """The info of a mirror bucket ``name`` of ``origin`` (through ``api`` if given)."""
    external = ExternalStream(api=api) if api is not None else None
    return StreamInfo(StreamConfig(
        f"KV_{name}", mirror=StreamSource(name=f"KV_{origin}", external=external),
        mirror_direct=True, allow_direct=True,
    ))


class WriteSubjectTests(JsHarness, SynchronousTestCase):
    """Where a bucket's writes and reads go: the subjects on the wire."""

    def writes(self, kv: KeyValue) -> list[str]:
        """The subjects of put, update, create, delete and purge of key ``k``."""
        kv.put("k", b"v")
        kv.update("k", b"v", 3)
        kv.create("k", b"v")
        kv.delete("k")
        kv.purge("k")
        return [f.subject for f in self.pubs()]

    def test_bucket_through_a_domain_context(self) -> None:
        """nats.go's useJSPfx: writes go to ``$JS.hub.API.$KV.b.k``, reads to the
        domain's Direct Get of the bucket's stream."""
        js = self.client.jetstream(domain="hub")
        kv = KeyValue(js, "b", StreamInfo(StreamConfig("KV_b", allow_direct=True)))
        self.assertEqual(self.writes(kv), ["$JS.hub.API.$KV.b.k"] * 5)
        kv.get("k")
        self.assertEqual(self.one_request("$JS.hub.API.DIRECT.GET.KV_b.$KV.b.k").data, b"")

    def test_mirror_of_a_bucket_in_another_domain(self) -> None:
        """nats.go's putPre: a mirror's writes go to its origin through the origin's
        external API prefix, whatever the context's; reads stay on the mirror's stream
        (with the origin's key subjects, which the mirror stores)."""
        for js in (self.js, self.client.jetstream(domain="leaf")):
            kv = KeyValue(js, "m", mirror_info("m", "o", "$JS.hub.API"))
            self.assertEqual(kv.subject_prefix, "$KV.o.")
            self.assertEqual(self.writes(kv), ["$JS.hub.API.$KV.o.k"] * 5)
            kv.get("k")
            self.one_request(f"{js.prefix}.DIRECT.GET.KV_m.$KV.o.k")
            kv.watch("a.>")
            create = [f for f in self.pubs() if ".CONSUMER.CREATE." in f.subject]
            self.assertEqual(len(create), 1)
            self.assertTrue(create[0].subject.startswith(f"{js.prefix}.CONSUMER.CREATE.KV_m."))
            self.assertEqual(create[0].json()["config"]["filter_subject"], "$KV.o.a.>")

    def test_local_mirror_through_a_domain_context(self) -> None:
        """A mirror of a bucket in its own domain, bound through a domain context:
        writes to the origin behind that context's prefix (as nats.go)."""
        js = self.client.jetstream(domain="leaf")
        kv = KeyValue(js, "m", mirror_info("m", "o", None))
        self.assertEqual(self.writes(kv), ["$JS.leaf.API.$KV.o.k"] * 5)
        local = KeyValue(self.js, "m", mirror_info("m", "o", None))
        self.assertEqual(self.writes(local), ["$KV.o.k"] * 5)
