#!/bin/sh
# The bridge's HTTP API with curl, against a running `twistd -n nats-bridge` (a test
# runs it against a bridge of its own, with a stream ORDERS and a bucket config):
#
#     sh examples/bridge_curl.sh         # BRIDGE=http://host:port for another bridge
set -eu
B=${BRIDGE:-http://127.0.0.1:8080}

# Publish (202, {"published": ..., "bytes": ...}); Nats-Header-* become NATS headers.
curl -sS -X POST -H 'Nats-Header-X-Trace: 1' --data 'hello' "$B/v1/publish/greet.joe"; echo
# A request: the reply's body (504 on timeout, 503 when nobody listens).
curl -sS -X POST --data 'hi' "$B/v1/request/svc.echo?timeout=2"; echo
# Server-Sent Events of greet.> (here for 2 seconds only).
curl -sS -N --max-time 2 "$B/v1/subscribe/greet.%3E" || true
# JetStream publish: the acknowledgement; twice the same msg_id is a duplicate.
curl -sS -X POST --data 'order 1' "$B/v1/js/publish/orders.new?msg_id=o-1"; echo
curl -sS -X POST --data 'order 1' "$B/v1/js/publish/orders.new?msg_id=o-1"; echo
# Key-value: put, get (with its Kv-Revision header), delete, get again (404).
curl -sS -X PUT --data 'blue' "$B/v1/kv/config/color"; echo
curl -sS -D - "$B/v1/kv/config/color" | grep -i -e '^kv-revision' -e '^blue'
curl -sS -X DELETE "$B/v1/kv/config/color"; echo
curl -sS "$B/v1/kv/config/color"; echo
# Health, readiness and the connection's status.
curl -sS -o /dev/null -w 'healthz %{http_code}\n' "$B/healthz"
curl -sS -o /dev/null -w 'readyz %{http_code}\n' "$B/readyz"
