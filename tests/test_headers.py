"""Tests for ``txnats.protocol.headers``: the Headers multi-map and the ADR-4 block codec."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from twisted.trial.unittest import SynchronousTestCase

from txnats.errors import BadHeaderError, NatsError, ProtocolError
from txnats.protocol.headers import Headers, encode_headers, parse_headers

HEARTBEAT = b"NATS/1.0 100 Idle Heartbeat\r\nNats-Last-Consumer: 0\r\nNats-Last-Stream: 0\r\n\r\n"


class HeadersMappingTests(SynchronousTestCase):
    """Headers is an ordered, case-sensitive multi-map."""

    def test_getitem_returns_first_value(self) -> None:
        """``h[name]`` is the first value received for that name."""
        h = Headers([("A", "1"), ("B", "x"), ("A", "2")])
        self.assertEqual(h["A"], "1")
        self.assertEqual(h.get("A"), "1")

    def test_missing_name(self) -> None:
        """A missing name raises KeyError and ``get`` returns the default."""
        h = Headers({"A": "1"})
        self.assertRaises(KeyError, lambda: h["B"])
        self.assertIsNone(h.get("B"))
        self.assertEqual(h.get("B", "d"), "d")
        self.assertEqual(h.get_all("B"), [])

    def test_get_all_in_order(self) -> None:
        """``get_all`` returns every value of a name in the order added."""
        h = Headers([("A", "1"), ("B", "x"), ("A", "2"), ("A", "3")])
        self.assertEqual(h.get_all("A"), ["1", "2", "3"])
        self.assertEqual(h.get_all("B"), ["x"])

    def test_add_appends(self) -> None:
        """``add`` keeps existing values and appends one at the end."""
        h = Headers({"A": "1"})
        h.add("B", "2")
        h.add("A", "3")
        self.assertEqual(h.multi_items(), [("A", "1"), ("B", "2"), ("A", "3")])

    def test_setitem_replaces_all_values(self) -> None:
        """Assigning a name replaces all its values, keeping its first position."""
        h = Headers([("A", "1"), ("B", "x"), ("A", "2"), ("C", "y"), ("A", "3")])
        h["A"] = "new"
        self.assertEqual(h.multi_items(), [("A", "new"), ("B", "x"), ("C", "y")])
        self.assertEqual(h.get_all("A"), ["new"])

    def test_setitem_new_name_appends(self) -> None:
        """Assigning an absent name appends it."""
        h = Headers({"A": "1"})
        h["B"] = "2"
        self.assertEqual(h.multi_items(), [("A", "1"), ("B", "2")])

    def test_delitem_removes_all_values(self) -> None:
        """``del h[name]`` removes every value of that name and nothing else."""
        h = Headers([("A", "1"), ("B", "x"), ("A", "2")])
        del h["A"]
        self.assertEqual(h.multi_items(), [("B", "x")])
        self.assertNotIn("A", h)

    def test_delitem_missing_raises(self) -> None:
        """Deleting an absent name raises KeyError."""
        h = Headers({"A": "1"})

        def delete() -> None:
            del h["B"]

        self.assertRaises(KeyError, delete)

    def test_pop_and_update_via_mutable_mapping(self) -> None:
        """MutableMapping mixins (``pop``, ``update``, ``setdefault``) follow the same rules."""
        h = Headers([("A", "1"), ("A", "2")])
        self.assertEqual(h.pop("A"), "1")
        self.assertNotIn("A", h)
        h.update({"B": "3"})
        self.assertEqual(h.setdefault("B", "zzz"), "3")
        self.assertEqual(h.multi_items(), [("B", "3")])

    def test_order_kept(self) -> None:
        """Iteration yields distinct names in first-seen order; items are in wire order."""
        h = Headers([("Z", "1"), ("A", "2"), ("Z", "3"), ("M", "4")])
        self.assertEqual(list(h), ["Z", "A", "M"])
        self.assertEqual(list(h.keys()), ["Z", "A", "M"])
        self.assertEqual(h.multi_items(), [("Z", "1"), ("A", "2"), ("Z", "3"), ("M", "4")])

    def test_len_counts_distinct_names(self) -> None:
        """``len`` counts names, not values."""
        self.assertEqual(len(Headers([("A", "1"), ("A", "2"), ("B", "3")])), 2)
        self.assertEqual(len(Headers()), 0)

    def test_case_sensitive(self) -> None:
        """Names differing only in case are distinct headers."""
        h = Headers([("Foo", "1"), ("foo", "2"), ("FOO", "3")])
        self.assertEqual(h["Foo"], "1")
        self.assertEqual(h["foo"], "2")
        self.assertEqual(h["FOO"], "3")
        self.assertNotIn("fOO", h)
        self.assertEqual(len(h), 3)

    def test_contains_only_names(self) -> None:
        """``in`` tests names (not values), and accepts non-str without error."""
        h = Headers({"A": "B"})
        self.assertIn("A", h)
        self.assertNotIn("B", h)
        self.assertNotIn(1, h)

    def test_from_mapping_with_sequence_values(self) -> None:
        """A mapping value that is a list becomes one header line per element."""
        h = Headers({"A": ["1", "2"], "B": "3"})
        self.assertEqual(h.multi_items(), [("A", "1"), ("A", "2"), ("B", "3")])

    def test_status_and_description(self) -> None:
        """status/description default to None, are settable, and are not headers."""
        h = Headers()
        self.assertIsNone(h.status)
        self.assertIsNone(h.description)
        h = Headers({"A": "1"}, status=503, description="No Responders")
        self.assertEqual((h.status, h.description), (503, "No Responders"))
        self.assertEqual(list(h), ["A"])
        self.assertNotIn("Status", h)

    def test_copy_is_independent(self) -> None:
        """``copy`` and ``Headers(other)`` copy items and status without sharing them."""
        h = Headers([("A", "1"), ("A", "2")], status=100, description="Idle Heartbeat")
        for c in (h.copy(), Headers(h)):
            self.assertEqual(c, h)
            c.add("B", "x")
            self.assertNotIn("B", h)
        self.assertEqual(Headers(h, status=408).status, 408)

    def test_equality(self) -> None:
        """Headers equal when items (with order) and status match; plain mappings compare too."""
        self.assertEqual(Headers([("A", "1"), ("A", "2")]), Headers([("A", "1"), ("A", "2")]))
        self.assertNotEqual(Headers([("A", "1"), ("A", "2")]), Headers([("A", "2"), ("A", "1")]))
        self.assertNotEqual(Headers({"A": "1"}, status=503), Headers({"A": "1"}))
        self.assertEqual(Headers({"A": "1", "B": "2"}), {"A": "1", "B": "2"})
        self.assertEqual(Headers({"A": ["1", "2"]}), {"A": ["1", "2"]})
        self.assertNotEqual(Headers({"A": "1"}, status=503), {"A": "1"})
        self.assertNotEqual(Headers({"A": "1"}), [("A", "1")])

    def test_equality_with_unencodable_mapping_is_false(self) -> None:
        """Comparing with a mapping that could never be Headers is False, not an exception."""
        self.assertNotEqual(Headers({"A": "1"}), {"A B": "1"})
        self.assertFalse(Headers() == {"A": "x\r\ny"})

    def test_unhashable(self) -> None:
        """Headers is mutable, so it is not hashable."""
        self.assertRaises(TypeError, hash, Headers())

    def test_repr_shows_items_and_status(self) -> None:
        """repr names the items and the status."""
        r = repr(Headers({"A": "1"}, status=503))
        self.assertIn("'A'", r)
        self.assertIn("503", r)


BAD_NAMES = [
    ("empty", ""),
    ("space", "A B"),
    ("leading_space", " A"),
    ("colon", "A:B"),
    ("only_colon", ":"),
    ("tab", "A\tB"),
    ("cr", "A\rB"),
    ("lf", "A\nB"),
    ("nul", "A\x00"),
    ("del", "A\x7f"),
    ("non_ascii", "Caf\u00e9"),
    ("non_ascii_cjk", "\u4e2d"),
    ("not_str_bytes", b"A"),
    ("not_str_int", 1),
    ("not_str_none", None),
]

BAD_VALUES = [
    ("cr", "a\rb"),
    ("lf", "a\nb"),
    ("crlf", "a\r\nB: injected"),
    ("trailing_crlf", "a\r\n"),
    ("only_lf", "\n"),
    ("not_str_bytes", b"a"),
    ("not_str_int", 5),
    ("not_str_none", None),
    ("lone_surrogate", "\ud800"),
]


class HeaderValidationTests(SynchronousTestCase):
    """Names and values that cannot be carried raise BadHeaderError wherever they enter."""

    def _raises(self, label: str, fn: object, *args: object) -> None:
        try:
            fn(*args)  # type: ignore[operator]
        except BadHeaderError as e:
            self.assertIsInstance(e, ValueError)
            self.assertIsInstance(e, NatsError)
        except Exception as e:
            self.fail(f"{label}: {fn!r}{args!r} raised {e!r}, not BadHeaderError")
        else:
            self.fail(f"{label}: {fn!r}{args!r} did not raise BadHeaderError")

    def test_bad_names(self) -> None:
        """Bad names are refused by add, []=, the constructor and encode_headers."""
        for label, name in BAD_NAMES:
            self._raises(label, Headers().add, name, "v")
            self._raises(label, Headers().__setitem__, name, "v")
            self._raises(label, Headers, [(name, "v")])
            self._raises(label, encode_headers, {name: "v"})
            self._raises(label, encode_headers, {name: ["v"]})

    def test_bad_values(self) -> None:
        """Bad values are refused by add, []=, the constructor and encode_headers."""
        for label, value in BAD_VALUES:
            self._raises(label, Headers().add, "A", value)
            self._raises(label, Headers().__setitem__, "A", value)
            self._raises(label, Headers, [("A", value)])
            self._raises(label, Headers, {"A": value})
            self._raises(label, encode_headers, {"A": value})
            self._raises(label, encode_headers, {"A": ["ok", value]})

    def test_bad_description(self) -> None:
        """A status description holding CR or LF cannot be encoded."""
        for desc in ("a\rb", "a\nb", "x\r\nA: b", "\ud800"):
            self._raises(repr(desc), encode_headers, Headers(status=503, description=desc))

    def test_bad_status(self) -> None:
        """A status that does not fit three digits cannot be encoded."""
        for status in (-1, 1000, 12345):
            self._raises(str(status), encode_headers, Headers(status=status))

    def test_failed_add_leaves_headers_unchanged(self) -> None:
        """A refused add or assignment does not modify the Headers."""
        h = Headers([("A", "1"), ("A", "2")])
        self.assertRaises(BadHeaderError, h.add, "A", "x\n")
        self.assertRaises(BadHeaderError, h.__setitem__, "A", "x\n")
        self.assertEqual(h.multi_items(), [("A", "1"), ("A", "2")])

    def test_edge_names_accepted(self) -> None:
        """Every printable ASCII character except ':' is allowed in a name."""
        name = "".join(chr(c) for c in range(33, 127) if chr(c) != ":")
        h = Headers([(name, "v")])
        self.assertEqual(parse_headers(encode_headers(h)).multi_items(), [(name, "v")])

    def test_edge_values_accepted(self) -> None:
        """Values may hold anything but CR and LF: tabs, NUL, colons, non-ASCII."""
        for value in ("", "a:b", "x\x00y", "tab\tinside", "caf\u00e9 \u4e2d", "\x7f\x0b"):
            block = encode_headers({"A": value})
            self.assertEqual(parse_headers(block).multi_items(), [("A", value)], repr(value))


class EncodeHeadersTests(SynchronousTestCase):
    """encode_headers produces ADR-4 blocks byte for byte."""

    def test_adr4_single_header(self) -> None:
        """The ADR-4 example block ``NATS/1.0\\r\\nBar: Baz\\r\\n\\r\\n`` (22 bytes)."""
        block = encode_headers({"Bar": "Baz"})
        self.assertEqual(block, b"NATS/1.0\r\nBar: Baz\r\n\r\n")
        self.assertEqual(len(block), 22)
        self.assertEqual(encode_headers(Headers({"Bar": "Baz"})), block)

    def test_adr4_idle_heartbeat(self) -> None:
        """The ADR-4 idle heartbeat block (75 bytes) encodes and parses exactly."""
        h = Headers(
            [("Nats-Last-Consumer", "0"), ("Nats-Last-Stream", "0")],
            status=100,
            description="Idle Heartbeat",
        )
        self.assertEqual(encode_headers(h), HEARTBEAT)
        self.assertEqual(len(HEARTBEAT), 75)
        parsed = parse_headers(HEARTBEAT)
        self.assertEqual(parsed, h)
        self.assertEqual(parsed.status, 100)
        self.assertEqual(parsed.description, "Idle Heartbeat")
        self.assertEqual(parsed["Nats-Last-Consumer"], "0")

    def test_no_responders_block(self) -> None:
        """A status without description: ``NATS/1.0 503\\r\\n\\r\\n``."""
        self.assertEqual(encode_headers(Headers(status=503)), b"NATS/1.0 503\r\n\r\n")
        parsed = parse_headers(b"NATS/1.0 503\r\n\r\n")
        self.assertEqual((parsed.status, parsed.description, len(parsed)), (503, None, 0))

    def test_small_status_zero_padded(self) -> None:
        """Statuses are always three digits on the wire."""
        self.assertEqual(encode_headers(Headers(status=7)), b"NATS/1.0 007\r\n\r\n")

    def test_empty_headers(self) -> None:
        """No headers is the 12-byte minimal block."""
        self.assertEqual(encode_headers({}), b"NATS/1.0\r\n\r\n")
        self.assertEqual(encode_headers(Headers()), b"NATS/1.0\r\n\r\n")

    def test_multi_value_order(self) -> None:
        """Repeated names become repeated lines, in order."""
        self.assertEqual(
            encode_headers({"A": ["1", "2"], "B": "3"}),
            b"NATS/1.0\r\nA: 1\r\nA: 2\r\nB: 3\r\n\r\n",
        )
        h = Headers([("A", "1"), ("B", "3"), ("A", "2")])
        self.assertEqual(encode_headers(h), b"NATS/1.0\r\nA: 1\r\nB: 3\r\nA: 2\r\n\r\n")

    def test_values_utf8(self) -> None:
        """Non-ASCII values are encoded as UTF-8."""
        self.assertEqual(encode_headers({"A": "caf\u00e9"}), b"NATS/1.0\r\nA: caf\xc3\xa9\r\n\r\n")


class ParseHeadersTests(SynchronousTestCase):
    """parse_headers accepts ADR-4 blocks and rejects malformed ones with ProtocolError."""

    def test_adr4_example(self) -> None:
        """The ADR-4 HPUB example block parses to Bar: Baz."""
        h = parse_headers(b"NATS/1.0\r\nBar: Baz\r\n\r\n")
        self.assertEqual(h.multi_items(), [("Bar", "Baz")])
        self.assertIsNone(h.status)

    def test_whitespace_after_colon_optional_and_trimmed(self) -> None:
        """``A:b``, ``A: b`` and ``A:\\t b \\t`` all give the value ``b``."""
        h = parse_headers(b"NATS/1.0\r\nA:b\r\nA: b\r\nA:\t b \t\r\n\r\n")
        self.assertEqual(h.get_all("A"), ["b", "b", "b"])

    def test_status_description_multiword(self) -> None:
        """A multi-word description after the status is kept whole."""
        h = parse_headers(b"NATS/1.0 409 Consumer is push based\r\n\r\n")
        self.assertEqual((h.status, h.description), (409, "Consumer is push based"))

    def test_invalid_utf8_value_round_trips(self) -> None:
        """A value with invalid UTF-8 survives parse -> encode byte for byte (re-publishing)."""
        block = b"NATS/1.0\r\nA: \xff\xfe ok\r\n\r\n"
        self.assertEqual(encode_headers(parse_headers(block)), block)

    def test_malformed_blocks(self) -> None:
        """Malformed blocks raise exactly ProtocolError."""
        bad = [
            b"",
            b"\r\n\r\n",
            b"NATS/1.0",
            b"NATS/1.0\r\n",
            b"NATS/1.0\r\nA: b\r\n",
            b"HTTP/1.0\r\n\r\n",
            b"nats/1.0\r\n\r\n",
            b"NATS/1.0503\r\n\r\n",
            b"NATS/1.0 50\r\n\r\n",
            b"NATS/1.0 5034\r\n\r\n",
            b"NATS/1.0 abc\r\n\r\n",
            b"NATS/1.0 \xef\xbc\x95\xef\xbc\x90\xef\xbc\x93\r\n\r\n",
            b"NATS/1.0 503 a\nb\r\n\r\n",
            b"NATS/1.0 503 a\rb\r\n\r\n",
            b"NATS/1.0\r\nNoColon\r\n\r\n",
            b"NATS/1.0\r\n: empty name\r\n\r\n",
            b"NATS/1.0\r\nA B: space in name\r\n\r\n",
            b"NATS/1.0\r\nCaf\xc3\xa9: x\r\n\r\n",
            b"NATS/1.0\r\nA: b\nc\r\n\r\n",
            b"NATS/1.0\r\nA: b\rc\r\n\r\n",
            b"NATS/1.0\r\n\r\nA: b\r\n\r\n",
        ]
        for block in bad:
            try:
                h = parse_headers(block)
            except ProtocolError as e:
                self.assertIs(type(e), ProtocolError, repr(block))
            else:
                self.fail(f"{block!r} parsed as {h!r}")


_NAME = st.text(
    st.characters(min_codepoint=33, max_codepoint=126, exclude_characters=":"),
    min_size=1,
    max_size=12,
)
_VALUE = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\r\n"), max_size=16)
_DESC_WORD = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=1, max_size=8)


class HeaderPropertyTests(SynchronousTestCase):
    """encode_headers and parse_headers are inverses on valid input."""

    @settings(max_examples=300, deadline=None)
    @given(
        pairs=st.lists(st.tuples(_NAME, _VALUE), max_size=8),
        status=st.none() | st.integers(0, 999),
        words=st.lists(_DESC_WORD, max_size=3),
    )
    def test_round_trip(
        self, pairs: list[tuple[str, str]], status: int | None, words: list[str]
    ) -> None:
        """encode -> parse returns the same items (values trimmed), status and description."""
        desc = " ".join(words) or None
        h = Headers(pairs, status=status, description=desc)
        parsed = parse_headers(encode_headers(h))
        self.assertEqual(parsed.multi_items(), [(n, v.strip(" \t")) for n, v in pairs])
        self.assertEqual(parsed.status, status)
        self.assertEqual(parsed.description, desc if status is not None else None)

    @settings(max_examples=300, deadline=None)
    @given(block=st.binary(max_size=64), prefix=st.sampled_from([b"", b"NATS/1.0", b"NATS/1.0 "]))
    def test_parse_arbitrary_bytes(self, block: bytes, prefix: bytes) -> None:
        """parse_headers on arbitrary bytes returns Headers or raises exactly ProtocolError."""
        try:
            h = parse_headers(prefix + block + b"\r\n\r\n")
        except ProtocolError as e:
            self.assertIs(type(e), ProtocolError)
        else:
            self.assertIsInstance(h, Headers)
