#!/bin/bash
# Records the Go SDK v1.8.0 servers of cmd/mcp-echo with curl -i.
# Usage: record-go.sh <mcp-echo binary> <output dir>
set -u
BIN=$1 OUT=$2
mkdir -p "$OUT"
H=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream')

"$BIN" -addr 127.0.0.1:3942 -mode resumable & R=$!
"$BIN" -addr 127.0.0.1:3943 -mode stateless & S=$!
trap "kill $R $S" EXIT
sleep 1
U=http://127.0.0.1:3942/mcp
curl -s -i "${H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}' $U > "$OUT/go-initialize.http"
SID=$(grep -i '^mcp-session-id:' "$OUT/go-initialize.http" | awk '{print $2}' | tr -d '\r')
SS=(-H "mcp-session-id: $SID" -H 'mcp-protocol-version: 2025-11-25')
curl -s -o /dev/null "${H[@]}" "${SS[@]}" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' $U
curl -s -i "${H[@]}" "${SS[@]}" -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"progress","arguments":{"steps":2},"_meta":{"progressToken":"p"}}}' $U > "$OUT/go-post-tools-call-progress.http"
PRIME=$(grep -m1 '^id:' "$OUT/go-post-tools-call-progress.http" | awk '{print $2}' | tr -d '\r')
curl -s -i --max-time 3 -H 'accept: text/event-stream' "${SS[@]}" -H "last-event-id: $PRIME" $U > "$OUT/go-get-replay-after-priming.http"
curl -s -i "${SS[@]}" -X DELETE $U > /dev/null

U=http://127.0.0.1:3943/mcp
META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'
V=(-H 'mcp-protocol-version: 2026-07-28' -H 'mcp-method: tools/call' -H 'mcp-name: transfer')
curl -s -i "${H[@]}" "${V[@]}" -H 'mcp-param-account: acme-42' -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"transfer","arguments":{"account":"acme-42","amount":5},'"$META"'}}' $U > "$OUT/go-stateless-transfer.http"
curl -s -i "${H[@]}" "${V[@]}" -H 'mcp-param-account: acme-42' -d '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"transfer","arguments":{"account":"[REDACTED]","amount":5},'"$META"'}}' $U > "$OUT/go-stateless-header-mismatch.http"
