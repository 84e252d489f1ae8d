#!/usr/bin/env bash
# `make up`: start the Compose cluster and wait until every service is healthy.
# Creates .env (generated secrets) and builds the images first when they are missing.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dotenv.sh
source scripts/workers.sh
env_ensure
acl_before=$(sha256sum "$REDIS_ACL_FILE" 2>/dev/null || true)
redis_acl_write
workers_apply "${WORKERS:-$(env_get MINIHPC_WORKERS)}"
cpu_quotas "$(env_get MINIHPC_WORKERS)"
gpus_apply "$(env_get MINIHPC_WORKERS)"
export COMPOSE_FILE=$(env_get COMPOSE_FILE)  # as just written, whatever the caller's environment said
read -r -a compose <<< "${COMPOSE:-docker-compose}"

missing=()
for var in MINIHPC_IMAGE REDIS_IMAGE PROMETHEUS_IMAGE ALERTMANAGER_IMAGE; do
    image=$(setting "$var")
    docker image inspect "$image" >/dev/null 2>&1 || missing+=("$image")
done
if [ ${#missing[@]} -gt 0 ]; then
    echo "==> images not built yet (${missing[*]}); running make build first"
    bash scripts/build-images.sh
fi

start=$(date +%s.%N)
redis_was_up=$("${compose[@]}" ps -q redis 2>/dev/null || true)
"${compose[@]}" up -d --remove-orphans
if [ -n "$redis_was_up" ] && [ "$acl_before" != "$(sha256sum "$REDIS_ACL_FILE")" ]; then
    # A Redis left running keeps the users it read at its start: a release that adds a key
    # (or a changed password) would find every daemon refused on it. Its data is on its volume.
    echo "==> Redis's users changed: restarting Redis to read them"
    "${compose[@]}" restart redis >/dev/null
fi
timeout=${UP_TIMEOUT:-180}
tty=0; [ -t 1 ] && tty=1
while true; do
    mapfile -t ids < <("${compose[@]}" ps -q)
    report=$(docker inspect -f '{{index .Config.Labels "com.docker.compose.service"}} {{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "${ids[@]}" | sort)
    total=$(wc -l <<< "$report")
    healthy=$(grep -c ' healthy$' <<< "$report" || true)
    waiting=$(awk '$2 != "healthy" { printf "%s(%s) ", $1, $2 }' <<< "$report")
    elapsed=$(python3 -c "import time; print(f'{time.time() - $start:.0f}')")
    line="==> healthy $healthy/$total after ${elapsed}s ${waiting:+- waiting for $waiting}"
    if [ "$tty" = 1 ]; then printf '\r\033[K%s' "$line"; fi
    if [ "$healthy" = "$total" ]; then break; fi
    if grep -qE ' (unhealthy|exited|dead)$' <<< "$report" || [ "$elapsed" -ge "$timeout" ]; then
        [ "$tty" = 1 ] && echo
        echo "$line" >&2
        echo "up: the cluster did not become healthy; last lines of its logs:" >&2
        "${compose[@]}" logs --tail=20 >&2
        exit 1
    fi
    sleep 1
done
[ "$tty" = 1 ] && echo
# Workers scaled away: forget them once they are down, so they do not linger as DOWN nodes.
gone=$("${compose[@]}" exec -T control minihpc nodes --json | python3 -c '
import json, re, sys
n = int(sys.argv[1])
print(" ".join(x["name"] for x in json.load(sys.stdin)
               if (m := re.fullmatch(r"worker-node-(\d+)", x["name"])) and int(m[1]) > n))' "$(env_get MINIHPC_WORKERS)")
for node in $gone; do
    for _ in $(seq 30); do
        "${compose[@]}" exec -T control minihpc nodes --forget "$node" >/dev/null 2>&1 && break
        sleep 0.5
    done
done
took=$(python3 -c "import time; print(f'{time.time() - $start:.1f}')")
echo "==> cluster healthy in ${took}s: $(awk '{printf "%s ", $1}' <<< "$report")"
echo "    Prometheus: http://127.0.0.1:$(setting PROMETHEUS_PORT)"
if grafana_enabled; then
    echo "    Grafana:    http://127.0.0.1:$(setting GRAFANA_PORT)  (user admin, password GRAFANA_ADMIN_PASSWORD in .env)"
else
    echo "    Grafana:    left out (no registry to pull it from here); Prometheus has every metric"
fi
api_port=$(env_get MINIHPC_API_PORT)
echo "==> web page and REST API: http://127.0.0.1:${api_port:-8080}/ (a token for it: make token USER=$(id -un))"
