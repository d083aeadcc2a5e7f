"""The sans-IO core of the NATS protocol: bytes in, events out; commands in, bytes out.

Nothing here imports Twisted or does any I/O, so every module can be driven and tested
with plain bytes:

- :mod:`txnats.protocol.parser`: :class:`~txnats.protocol.parser.Parser` turns the
  server's bytes into events, checking every frame against the protocol and the limits.
- :mod:`txnats.protocol.events`: the events it produces (``INFO``, ``MSG``/``HMSG`` as
  :class:`~txnats.protocol.events.Msg`, ``-ERR``, ``PING``, ``PONG``, ``+OK``).
- :mod:`txnats.protocol.commands`: the client's frames (``CONNECT``, ``PUB``, ``SUB``
  ...) as bytes, with subjects checked.
- :mod:`txnats.protocol.headers`: NATS headers, parsed and encoded.
- :mod:`txnats.protocol.errors`: what a ``-ERR`` means, and whether the connection
  survives it.

The package itself imports none of them: import the module you need.
"""
