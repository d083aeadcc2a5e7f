"""Helpers the test modules share, each defined once.

- :mod:`tests.support.waits`: the reactor, bounded waits (``bounded``, ``wait_until``)
  and reactor-timed pauses (``sleep``, ``turn``).
- :mod:`tests.support.files`: temporary files and free ports.
- :mod:`tests.support.servers`: one ``nats-server`` (or cluster) per TestCase class.
- :mod:`tests.support.wire`: server frames (``INFO``, ``MSG``, ``HMSG``) as bytes.
- :mod:`tests.support.clients`: a :class:`txnats.Client` on a ``MemoryReactorClock``,
  played against :class:`txnats.testing.ServerSide` (``ClientTestMixin``).
- :mod:`tests.support.jetstream`: the same with a JetStream context; reads the frames the
  client wrote and answers its requests (``JsHarness``).
- :mod:`tests.support.events`: recorders of a client's callbacks and of logged failures.
- :mod:`tests.support.figures`: the ``FIGURE`` lines and memory readings of the
  resilience figures.
- :mod:`tests.support.peers`: a nats-py peer process for the interop tests.

The fakes themselves (``ServerSide``, ``FakeHandler``, ``CountingTransport``) are
public, in :mod:`txnats.testing.fakes`.
"""
