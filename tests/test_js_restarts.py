"""Issue 15, figure 1: JetStream publishing with ``msg_id`` through server restarts.

A real ``nats-server -js`` with its own store directory is killed (SIGKILL, as a crash)
and started again on the same port three times while 50 callers publish 10,000 messages
with ``js.publish`` and a ``msg_id`` each, retrying every failed call until it has a
PubAck. The stream ends with exactly 10,000 messages: none missing (every id
acknowledged, at 10,000 distinct sequences, and read back), none twice (a retry of a
publish that had been stored is acknowledged with ``duplicate=True`` and the original
sequence).

A publish the server stored but could not acknowledge before it died times out, is
retried, and comes back ``duplicate=True`` (how many depends on where the kill lands:
0 to 50 were seen). The server is started and killed in a worker thread so that the
reactor (and the publishers' retries) keeps running while it is down.
"""

from __future__ import annotations

import shutil
import tempfile
from collections import Counter

from twisted.internet import threads
from twisted.internet.defer import Deferred, gatherResults
from twisted.trial.unittest import TestCase

import txnats
from txnats.errors import NatsError
from txnats.jetstream import AckPolicy, JetStreamContext, PubAck
from txnats.testing import NatsServer

from .support.figures import figure
from .support.waits import bounded, reactor, sleep, wait_until

N = 10_000
CALLERS = 50
RESTARTS = 3


class Figure1PublishThroughRestartsTests(TestCase):
    timeout = 60

    def setUp(self) -> None:
        self.store = tempfile.mkdtemp(prefix="txnats-fig1-")
        self.addCleanup(shutil.rmtree, self.store, True)
        self.server = NatsServer(jetstream=True, store_dir=self.store).start()
        self.addCleanup(self.server.stop)

    async def test_ten_thousand_through_three_restarts(self) -> None:
        """10,000 publishes with msg_id, 3 restarts: exactly 10,000 stored, 0 missing."""
        nc = await bounded(txnats.connect(
            reactor, self.server.url, name="fig1", reconnect_wait=0.05,
            reconnect_jitter=0.0, max_reconnect_attempts=-1,
        ))
        self.addCleanup(lambda: bounded(nc.close()))
        js = nc.jetstream(timeout=1.0)
        await bounded(js.add_stream(name="FIG1", subjects=["fig1.>"], storage="file"))

        acks: dict[int, PubAck] = {}
        errors: Counter[str] = Counter()
        next_i = iter(range(N))

        async def caller() -> None:
            for i in next_i:
                while True:
                    try:
                        acks[i] = await js.publish(
                            f"fig1.{i % 16}", b"%d" % i, msg_id=f"m{i}", timeout=1.0,
                            retry_attempts=4, retry_wait=0.1,
                        )
                        break
                    except NatsError as e:  # down, restarting, electing: try again
                        errors[type(e).__name__] += 1
                        await sleep(0.05)

        async def restarter() -> None:
            for k in range(1, RESTARTS + 1):
                await wait_until(lambda k=k: len(acks) >= k * N // (RESTARTS + 1), 30,
                                 f"{k * N // (RESTARTS + 1)} acknowledgements")
                await threads.deferToThread(self.server.kill)
                await sleep(0.2)  # publishes meet a server that is gone
                await threads.deferToThread(self.server.start)

        t0 = reactor.seconds()
        work = [Deferred.fromCoroutine(caller()) for _ in range(CALLERS)]
        await bounded(gatherResults([*work, Deferred.fromCoroutine(restarter())],
                                    consumeErrors=True), 45, "publishing through restarts")
        elapsed = reactor.seconds() - t0

        stored = await bounded(js.stream_info("FIG1"))
        seqs = sorted(a.seq for a in acks.values())
        duplicates = sum(1 for a in acks.values() if a.duplicate)
        read = await self.read_all(js)
        missing = N - len(set(read.values()))
        figure(
            1, published=N, restarts=RESTARTS, stored=stored.state.messages, missing=missing,
            duplicates_reported=duplicates, failed_attempts=sum(errors.values()),
            errors=dict(errors), seconds=elapsed,
        )
        self.assertEqual(len(acks), N)
        self.assertEqual(seqs, list(range(1, N + 1)))  # every id at its own sequence
        self.assertEqual(stored.state.messages, N)
        self.assertEqual(stored.state.last_seq, N)
        self.assertEqual(missing, 0)
        # A duplicate is the answer to a retry: never more of them than failed attempts.
        self.assertLessEqual(duplicates, sum(errors.values()))
        self.assertEqual(read, {a.seq: i for i, a in acks.items()})  # each where its ack said

    async def read_all(self, js: JetStreamContext) -> dict[int, int]:
        """Every stored message: stream sequence -> the publish index it carries."""
        await bounded(js.create_consumer("FIG1", name="check", ack_policy=AckPolicy.NONE))
        pc = js.pull_consumer("FIG1", "check")
        out: dict[int, int] = {}
        while len(out) < N:
            batch = await bounded(pc.fetch(2000, expires=2.0), 10)
            if not batch:
                break
            for m in batch:
                out[m.metadata.sequence.stream] = int(m.data)
        return out
