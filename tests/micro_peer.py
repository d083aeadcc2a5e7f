"""The nats-py side of the service API interop test (tests/test_micro_interop.py).

Run as a separate process, so that nats-py's asyncio loop and the Twisted reactor never
share a process::

    python tests/micro_peer.py discover URL NAME ID SUBJECT ERROR_SUBJECT
    python tests/micro_peer.py serve    URL NAME

``discover`` finds a service the way a nats-py program would: it sends ``$SRV.PING``,
``$SRV.INFO`` and ``$SRV.STATS`` (to all, to NAME, to NAME.ID), gathers every answer,
reads each with ``nats.micro``'s own response classes (``ServicePing``, ``ServiceInfo``,
``ServiceStats`` ``from_dict``) and prints the raw JSON with what nats-py read from it;
then it calls SUBJECT and ERROR_SUBJECT with ``nc.request`` and asks for the stats again.

``serve`` runs a ``nats.micro`` service NAME 2.0.0 with the endpoints ``natspy.upper``
(answers the data in upper case), ``natspy.fail`` (raises ``ServiceError("409",
"conflict")``) and ``natspy.quit`` (answers, then stops the service and exits). It
prints its id, then ``ready`` once its subscriptions are confirmed.

Every line is ``ready`` or one JSON object. The whole run is bounded by PEER_TIMEOUT
seconds (exit status 3 past it).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

PEER_TIMEOUT = 30.0
#: Seconds to wait for the awaited instance's answer.
WAIT = 10.0


def emit(obj: object) -> None:
    print(obj if isinstance(obj, str) else json.dumps(obj, sort_keys=True), flush=True)


async def confirm(nc: Any) -> None:
    """Return once the server has our SUBs: nats-py's flush() PING can overtake the SUBs
    its flusher task has not written yet; by the first PONG it has, and the second PING
    follows them (as tests/interop_peer.py does)."""
    await nc.flush()
    await nc.flush()


async def gather(nc: Any, subject: str, id: str) -> list[dict[str, Any]]:
    """The answers to an empty request on ``subject``, up to the one from instance
    ``id`` (within WAIT seconds); other services on the server may answer too."""
    inbox = nc.new_inbox()
    sub = await nc.subscribe(inbox)
    await confirm(nc)
    await nc.publish(subject, b"", reply=inbox)
    out: list[dict[str, Any]] = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + WAIT
    while not any(a.get("id") == id for a in out):
        left = deadline - loop.time()
        if left <= 0:
            break
        try:
            msg = await sub.next_msg(timeout=left)
        except Exception:  # nats-py's TimeoutError: nothing more came
            break
        out.append(json.loads(msg.data))
    await sub.unsubscribe()
    return out


async def discover(nc: Any, name: str, id: str, subject: str, error_subject: str) -> None:
    from nats.micro.service import ServiceInfo, ServicePing, ServiceStats

    readers = {"PING": ServicePing, "INFO": ServiceInfo, "STATS": ServiceStats}
    for verb, reader in readers.items():
        for level, tail in (("all", ""), ("name", f".{name}"), ("id", f".{name}.{id}")):
            answers = await gather(nc, f"$SRV.{verb}{tail}", id)
            mine = [a for a in answers if a.get("id") == id]
            read = [reader.from_dict(a) for a in mine]
            emit({
                "verb": verb, "level": level, "raw": mine,
                "read": [{"id": r.id, "name": r.name, "version": r.version,
                          "metadata": r.metadata} for r in read],
                "endpoints": [_endpoints(r) for r in read],
            })
    ok = await nc.request(subject, b"from nats-py", timeout=5.0)
    emit({"call": "ok", "data": ok.data.decode(), "headers": ok.headers})
    bad = await nc.request(error_subject, b"", timeout=5.0)
    emit({"call": "error", "data": bad.data.decode(), "headers": bad.headers})
    (after,) = await gather(nc, f"$SRV.STATS.{name}.{id}", id)
    stats = ServiceStats.from_dict(after)
    emit({"stats_after": after, "read": [
        {"name": e.name, "num_requests": e.num_requests, "num_errors": e.num_errors}
        for e in stats.endpoints
    ]})


def _endpoints(read: Any) -> list[dict[str, Any]]:
    """What nats-py read of each endpoint of an INFO or STATS answer."""
    out = []
    for e in getattr(read, "endpoints", []):
        item = {"name": e.name, "subject": e.subject, "queue_group": e.queue_group}
        if hasattr(e, "num_requests"):
            item.update(num_requests=e.num_requests, num_errors=e.num_errors,
                        last_error=e.last_error, data=e.data)
        else:
            item["metadata"] = e.metadata
        out.append(item)
    return out


async def serve(nc: Any, name: str) -> None:
    from nats.micro import add_service
    from nats.micro.request import ServiceError

    done = asyncio.Event()

    async def upper(req: Any) -> None:
        await req.respond(req.data.upper())

    async def fail(req: Any) -> None:
        raise ServiceError("409", "conflict")

    async def quit_(req: Any) -> None:
        await req.respond(b"bye")
        done.set()

    svc = await add_service(nc, name=name, version="2.0.0", description="a nats-py service",
                            metadata={"impl": "nats-py"})
    group = svc.add_group(name="natspy")
    await group.add_endpoint(name="upper", handler=upper, metadata={"kind": "text"})
    await group.add_endpoint(name="fail", handler=fail)
    await group.add_endpoint(name="quit", handler=quit_)
    await confirm(nc)
    emit({"id": svc.id})
    emit("ready")
    await done.wait()
    await svc.stop()


async def run(argv: list[str]) -> int:
    import nats

    mode, url, *rest = argv
    nc = await nats.connect(url, name=f"micro-peer-{mode}", allow_reconnect=False)
    try:
        if mode == "discover":
            emit("ready")
            await discover(nc, *rest)
        elif mode == "serve":
            await serve(nc, *rest)
        else:
            print(f"unknown mode {mode!r}", file=sys.stderr)
            return 2
    finally:
        await nc.close()
    return 0


def main() -> int:
    try:
        return asyncio.run(asyncio.wait_for(run(sys.argv[1:]), PEER_TIMEOUT))
    except TimeoutError:
        print(f"micro_peer: no end within {PEER_TIMEOUT}s", file=sys.stderr)
        return 3


if __name__ == "__main__":
    sys.exit(main())
