#!/bin/bash
# Records @modelcontextprotocol/server-everything (Streamable HTTP) with curl -i.
# Usage: record.sh <dir where it is npm-installed> <output dir>
set -u
NPM=$1 OUT=$(realpath -m "$2"); mkdir -p "$OUT"
cd "$NPM"
PORT=3917 node node_modules/@modelcontextprotocol/server-everything/dist/index.js streamableHttp > "$OUT/server.log" 2>&1 &
SRV=$!
trap "kill $SRV" EXIT
for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:3917/mcp && break; sleep 0.2; done
U=http://127.0.0.1:3917/mcp
H=(-H 'content-type: application/json' -H 'accept: application/json, text/event-stream')
curl -s -i "${H[@]}" -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}' $U > $OUT/initialize.http
SID=$(grep -i '^mcp-session-id:' $OUT/initialize.http | awk '{print $2}' | tr -d '\r')
echo "SID=$SID"
S=(-H "mcp-session-id: $SID" -H 'mcp-protocol-version: 2025-11-25')
curl -s -i "${H[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","method":"notifications/initialized"}' $U > $OUT/initialized.http
curl -s -i "${H[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"echo","arguments":{"message":"hello replay"}}}' $U > $OUT/post-tools-call-echo.http
PRIME=$(grep -m1 '^id:' $OUT/post-tools-call-echo.http | awk '{print $2}' | tr -d '\r')
echo "PRIME=$PRIME"
curl -s -i --max-time 3 -H 'accept: text/event-stream' "${S[@]}" -H "last-event-id: $PRIME" $U > $OUT/get-replay-after-priming.http
# a second id (the result's own id) -> nothing after it
LAST=$(grep '^id:' $OUT/post-tools-call-echo.http | tail -1 | awk '{print $2}' | tr -d '\r')
curl -s -i --max-time 3 -H 'accept: text/event-stream' "${S[@]}" -H "last-event-id: $LAST" $U > $OUT/get-replay-after-result.http
# dropped POST: cut after the first event
curl -s -i --max-time 1 -N "${H[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"trigger-long-running-operation","arguments":{"duration":2,"steps":2},"_meta":{"progressToken":"p3"}}}' $U > $OUT/post-dropped-long-running.http
P3=$(grep -m1 '^id:' $OUT/post-dropped-long-running.http | awk '{print $2}' | tr -d '\r')
sleep 2.5
curl -s -i --max-time 3 -H 'accept: text/event-stream' "${S[@]}" -H "last-event-id: $P3" $U > $OUT/get-resume-dropped.http
# tasks
curl -s -i "${H[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"name":"simulate-research-query","arguments":{"topic":"otters"},"task":{"ttl":60000}}}' $U > $OUT/post-tools-call-task.http
TASK=$(grep -o '"taskId":"[^"]*"' $OUT/post-tools-call-task.http | head -1 | cut -d'"' -f4)
echo "TASK=$TASK"
curl -s -i "${H[@]}" "${S[@]}" -d "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"$TASK\"}}" $U > $OUT/post-tasks-get-working.http
sleep 5
curl -s -i "${H[@]}" "${S[@]}" -d "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tasks/get\",\"params\":{\"taskId\":\"$TASK\"}}" $U > $OUT/post-tasks-get-completed.http
curl -s -i --max-time 10 "${H[@]}" "${S[@]}" -d "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tasks/result\",\"params\":{\"taskId\":\"$TASK\"}}" $U > $OUT/post-tasks-result.http
curl -s -i "${H[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","id":8,"method":"tasks/list","params":{}}' $U > $OUT/post-tasks-list.http
P7=$(grep -m1 '^id:' $OUT/post-tasks-result.http | awk '{print $2}' | tr -d '\r')
curl -s -i --max-time 3 -H 'accept: text/event-stream' "${S[@]}" -H "last-event-id: $P7" $U > $OUT/get-replay-tasks-result.http
curl -s -i "${H[@]}" "${S[@]}" -d '{"jsonrpc":"2.0","id":9,"method":"tools/list","params":{}}' $U > $OUT/tools-list.http
