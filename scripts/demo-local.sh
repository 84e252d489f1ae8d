#!/usr/bin/env bash
# The local-mode quick start: a 3-node cluster of processes, a DDP job across all three nodes.
set -euo pipefail
cd "$(dirname "$0")/.."
M=.venv/bin/minihpc
export MINIHPC_STATE_DIR=${MINIHPC_STATE_DIR:-$PWD/.minihpc/demo}
port=$(.venv/bin/python -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')

$M down >/dev/null 2>&1 || true
echo "==> starting a local cluster (master-node, worker-node-1, worker-node-2)"
eval "$($M up --local --workers 2 --port "$port")"
trap '$M down >/dev/null' EXIT
$M nodes
echo
echo "==> submitting jobs/hello.py on 3 nodes"
id=$($M submit --parsable -N 3 jobs/hello.py)
echo "Submitted batch job $id"
$M queue
status=0
$M wait "$id" --timeout 300 || status=$?
echo
$M logs "$id"
echo
$M history
echo
SHOW_JSON=$($M show "$id" --json) .venv/bin/python - <<'PY'
import json, os
j = json.loads(os.environ["SHOW_JSON"])
took = j["ended_at"] - j["submitted_at"]
nodes = ", ".join(j["nodes"])
print(f"job {j['id']}: {j['state']} (exit code {j['exit_code']}) {took:.1f}s after submit; ranks on {nodes}")
PY
echo "logs: $MINIHPC_STATE_DIR/shared/logs/job-$id/"
exit $status
