#!/usr/bin/env bash
# `make demo`: build the images, start the cluster, prepare MNIST, train it with DDP across
# master-node, worker-node-1 and worker-node-2, validate the model and show the result.
set -euo pipefail
cd "$(dirname "$0")/.."
read -r -a compose <<< "${COMPOSE:-docker-compose}"
EPOCHS=${EPOCHS:-8}
MIN_ACCURACY=${MIN_ACCURACY:-0.90}
t0=$(date +%s)
in_master() { "${compose[@]}" exec -T control "$@"; }
step() { echo; echo "=== [$1/6] $2"; }

step 1 "images (make build; cached after the first run)"
bash scripts/build-images.sh

step 2 "cluster (make up)"
COMPOSE="${COMPOSE:-docker-compose}" bash scripts/up.sh
in_master minihpc nodes

step 3 "data (make prepare-data)"
in_master python /opt/minihpc/jobs/prepare_mnist.py --root /shared/data

step 4 "training jobs/train_mnist_distributed.py on 3 nodes, $EPOCHS epochs"
id=$(in_master minihpc submit --parsable -N 3 --script-name train_mnist_distributed.py - --epochs "$EPOCHS" \
    < jobs/train_mnist_distributed.py)
echo "Submitted batch job $id; its output as it runs (node: line):"
in_master minihpc logs --follow "$id"
status=0
in_master minihpc wait "$id" || status=$?
summary=$(in_master minihpc show "$id" --json | python3 -c '
import json, sys
j = json.load(sys.stdin)
took = (j["ended_at"] or 0) - j["submitted_at"]
ran = (j["ended_at"] or 0) - (j["started_at"] or j["submitted_at"])
jid, state, nodes = j["id"], j["state"], ", ".join(j["nodes"])
print(f"job {jid} {state} {took:.1f}s after submit ({ran:.1f}s running), ranks on {nodes}")
' 2>&1)
echo "$summary"
[ "$status" = 0 ] || { echo "demo: the training job did not complete; see make logs ID=$id" >&2; exit 1; }

step 5 "validation (make validate-model ID=$id)"
validation=$(in_master python /opt/minihpc/jobs/validate_mnist.py --job "$id" --models-root /shared/models \
    --data-root /shared/data --min-accuracy "$MIN_ACCURACY") || { echo "$validation"; exit 1; }
echo "$validation"

step 6 "result"
project=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.project"}}' "$("${compose[@]}" ps -q master-node)")
echo "$summary"
grep 'test accuracy' <<< "$validation" | sed 's/^/model: /'
echo "logs: /shared/logs/job-$id/ in the ${project}_logs volume (make logs ID=$id)"
echo "checkpoints: /shared/models/job-$id/ in the ${project}_models volume"
source scripts/dotenv.sh
echo "dashboards: Prometheus http://127.0.0.1:$(setting PROMETHEUS_PORT)/targets"
if grafana_enabled; then
    echo "            Grafana http://127.0.0.1:$(setting GRAFANA_PORT) (admin / GRAFANA_ADMIN_PASSWORD in .env)"
else
    echo "            Grafana left out: no registry reachable to pull it"
fi
echo "demo done in $(( $(date +%s) - t0 ))s; the cluster keeps running (make down stops it)"
