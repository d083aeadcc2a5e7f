"""Figure 1: the service API against nats-py's ``nats.micro``, both ways, in one run.

A txnats service is discovered by a nats-py program (tests/micro_peer.py, a
subprocess): every PING, INFO and STATS answer validates against the ADR-32 schemas
(tests/support/micro.py) and is read by nats-py's own response classes; nats-py calls
its endpoints. A nats-py ``nats.micro`` service is then discovered, measured and called
through ``txnats.micro``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from twisted.internet import defer
from twisted.trial.unittest import TestCase

import txnats
from tests.support.figures import figure
from tests.support.micro import validate
from tests.support.peers import WAIT, Peer
from tests.support.servers import ServerPerClass
from tests.support.waits import reactor
from txnats import micro
from txnats.micro import ERROR_CODE_HEADER, ERROR_HEADER, Request, ServiceError

ROOT = Path(__file__).resolve().parent.parent
PEER = ROOT / "tests" / "micro_peer.py"
#: Gathering answers ends this long after the latest one (or at WAIT with none).
STALL = 0.5


class MicroInteropTests(ServerPerClass, TestCase):
    """txnats services and nats-py's nats.micro find and call each other."""

    timeout = 90

    async def connect(self) -> txnats.Client:
        assert self.server is not None
        nc = await txnats.connect(reactor, self.server.url, name=self._testMethodName)
        self.addCleanup(nc.close)
        return nc

    async def peer(self, *args: str) -> Peer:
        """Start ``micro_peer.py MODE URL ...``; wait until it says it is ready."""
        assert self.server is not None
        argv = [args[0], self.server.url, *args[1:]]
        peer = Peer(argv)
        transport = reactor.spawnProcess(
            peer, sys.executable, [sys.executable, str(PEER), *argv],
            env=dict(os.environ), path=str(ROOT),
        )

        def reap() -> defer.Deferred[None] | None:
            if peer.ended:
                return None
            transport.signalProcess("KILL")
            return defer.ensureDeferred(peer._wait(lambda: peer.ended, "die", WAIT))

        self.addCleanup(reap)
        await peer.wait_ready()
        return peer

    async def test_figure_1_interop(self) -> None:
        """Both directions in the same run (the figure's two halves)."""
        natspy_found = await self.natspy_discovers_txnats()
        txnats_found = await self.txnats_discovers_natspy()
        figure(1, **natspy_found, **txnats_found)

    async def natspy_discovers_txnats(self) -> dict[str, object]:
        nc = await self.connect()
        svc = micro.add_service(nc, name="tx-calc", version="1.4.0-beta.2",
                                description="a txnats service", metadata={"impl": "txnats"},
                                stats_handler=lambda e: {"endpoint": e.name})
        group = svc.add_group("txcalc")
        group.add_endpoint("echo", lambda r: r.respond(b"txnats says: " + r.data),
                           metadata={"kind": "text"})

        def refuse(req: Request) -> None:
            raise ServiceError(422, "cannot do that")

        group.add_endpoint("refuse", refuse, queue_group="other")
        await nc.flush(timeout=WAIT)
        peer = await self.peer("discover", "tx-calc", svc.id, "txcalc.echo", "txcalc.refuse")
        out = await peer.wait_exit()

        answers = [o for o in out if "verb" in o]
        self.assertEqual(len(answers), 9, out)
        validated = 0
        for a in answers:
            self.assertEqual(len(a["raw"]), 1, a)  # this instance, at every level
            validate(a["raw"][0], f"io.nats.micro.v1.{a['verb'].lower()}_response")
            validated += 1
            (read,) = a["read"]
            self.assertEqual(read, {"id": svc.id, "name": "tx-calc",
                                    "version": "1.4.0-beta.2", "metadata": {"impl": "txnats"}})
        info = next(a for a in answers if a["verb"] == "INFO")
        self.assertEqual(info["raw"][0]["description"], "a txnats service")
        self.assertEqual(info["endpoints"], [[
            {"name": "echo", "subject": "txcalc.echo", "queue_group": "q",
             "metadata": {"kind": "text"}},
            {"name": "refuse", "subject": "txcalc.refuse", "queue_group": "other",
             "metadata": {}},
        ]])
        stats = next(a for a in answers if a["verb"] == "STATS")
        self.assertEqual([e["data"] for e in stats["endpoints"][0]],
                         [{"endpoint": "echo"}, {"endpoint": "refuse"}])

        ok = next(o for o in out if o.get("call") == "ok")
        self.assertEqual(ok["data"], "txnats says: from nats-py")
        self.assertIsNone(ok["headers"])
        bad = next(o for o in out if o.get("call") == "error")
        self.assertEqual(bad["headers"],
                         {ERROR_HEADER: "cannot do that", ERROR_CODE_HEADER: "422"})
        after = next(o for o in out if "stats_after" in o)
        validate(after["stats_after"])
        self.assertEqual(after["read"], [
            {"name": "echo", "num_requests": 1, "num_errors": 0},
            {"name": "refuse", "num_requests": 1, "num_errors": 1},
        ])
        self.assertEqual(len(self.flushLoggedErrors()), 0)
        await svc.stop()
        return {"natspy_read_txnats": f"{len(answers)}/9",
                "schema_valid": f"{validated + 1}/10", "natspy_calls_answered": 2}

    async def txnats_discovers_natspy(self) -> dict[str, object]:
        peer = await self.peer("serve", "natspy-calc")
        (hello,) = [o for o in peer.out if "id" in o]
        sid = hello["id"]
        nc = await self.connect()

        pings = await micro.ping(nc, "natspy-calc", timeout=WAIT, stall=STALL)
        self.assertEqual([(p.id, p.version, p.metadata) for p in pings],
                         [(sid, "2.0.0", {"impl": "nats-py"})])
        everywhere = await micro.ping(nc, timeout=WAIT, stall=STALL)
        self.assertIn(sid, [p.id for p in everywhere])
        (info,) = await micro.info(nc, "natspy-calc", sid, timeout=WAIT)
        self.assertEqual(info.description, "a nats-py service")
        self.assertEqual(
            [(e.name, e.subject, e.queue_group, e.metadata) for e in info.endpoints],
            [("upper", "natspy.upper", "q", {"kind": "text"}),
             ("fail", "natspy.fail", "q", {}), ("quit", "natspy.quit", "q", {})],
        )
        reply = await nc.request("natspy.upper", b"hello from txnats", timeout=WAIT)
        self.assertEqual(reply.data, b"HELLO FROM TXNATS")
        failed = await nc.request("natspy.fail", timeout=WAIT)
        self.assertEqual(failed.headers[ERROR_CODE_HEADER], "409")
        self.assertEqual(failed.headers[ERROR_HEADER], "conflict")
        (stats,) = await micro.stats(nc, "natspy-calc", timeout=WAIT, stall=STALL)
        counts = {e.name: (e.num_requests, e.num_errors) for e in stats.endpoints}
        self.assertEqual(counts, {"upper": (1, 0), "fail": (1, 1), "quit": (0, 0)})
        self.assertEqual(stats.id, sid)
        bye = await nc.request("natspy.quit", timeout=WAIT)
        self.assertEqual(bye.data, b"bye")
        await peer.wait_exit()
        return {"txnats_found_natspy": len(pings), "txnats_info_endpoints": len(info.endpoints),
                "txnats_calls_answered": 3,
                "natspy_stats_counted": sum(c[0] for c in counts.values())}
