#!/bin/sh
# e2e.sh runs cmd/e2e against the kind deployment (make kind-e2e):
#
#   1. port-forward a free local port to the Envoy Service (svc/mcp-server);
#   2. the scripted session (allowed, denied, redacted calls; SSE; prompts;
#      resources) must end as expected;
#   3. a load of CONCURRENCY sessions runs for DURATION while the example
#      plugin is restarted (kubectl rollout restart) RESTART_AFTER seconds in;
#      a single failed MCP call fails the run.
#
# Environment: KUBECTL, KUBE_CONTEXT, NAMESPACE, CONCURRENCY, DURATION,
# RESTART_AFTER (mk/deploy.mk sets them all).
set -eu

KUBECTL=${KUBECTL:-kubectl}
KUBE_CONTEXT=${KUBE_CONTEXT:-kind-mcp-extproc}
NAMESPACE=${NAMESPACE:-mcp-extproc}
CONCURRENCY=${CONCURRENCY:-8}
DURATION=${DURATION:-60s}
RESTART_AFTER=${RESTART_AFTER:-15}

k() { "$KUBECTL" --context "$KUBE_CONTEXT" -n "$NAMESPACE" "$@"; }

work=$(mktemp -d)
pf_pid=
load_pid=
cleanup() {
	[ -n "$load_pid" ] && kill "$load_pid" 2>/dev/null || true
	[ -n "$pf_pid" ] && kill "$pf_pid" 2>/dev/null || true
	rm -rf "$work"
}
trap cleanup EXIT INT TERM

echo "== building cmd/e2e"
sh hack/build.sh e2e "$work"

echo "== port-forward svc/mcp-server"
k port-forward svc/mcp-server :8080 >"$work/pf.log" 2>&1 &
pf_pid=$!
port=
i=0
while [ $i -lt 30 ]; do
	port=$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9][0-9]*\) .*/\1/p' "$work/pf.log" | head -n 1)
	[ -n "$port" ] && break
	kill -0 "$pf_pid" 2>/dev/null || { cat "$work/pf.log" >&2; exit 1; }
	i=$((i + 1))
	sleep 1
done
if [ -z "$port" ]; then
	echo "port-forward did not start:" >&2
	cat "$work/pf.log" >&2
	exit 1
fi
url="http://127.0.0.1:$port/mcp"
echo "   $url"

echo "== scripted session"
"$work/e2e" --url "$url"

echo "== load: $CONCURRENCY sessions for $DURATION; example-plugin restarted after ${RESTART_AFTER}s"
"$work/e2e" --url "$url" --load --concurrency "$CONCURRENCY" --duration "$DURATION" &
load_pid=$!
sleep "$RESTART_AFTER"
k rollout restart deployment/example-plugin
k rollout status deployment/example-plugin --timeout=120s
if ! kill -0 "$load_pid" 2>/dev/null; then
	echo "the load ended before the plugin restart completed: raise DURATION (KIND_E2E_DURATION)" >&2
	exit 1
fi
status=0
wait "$load_pid" || status=$?
load_pid=
if [ "$status" -ne 0 ]; then
	echo "== load FAILED (exit $status)" >&2
	exit "$status"
fi
echo "== kind e2e passed"
