#!/usr/bin/env bash
# Run `minihpc ...` on the Docker host against the Compose cluster (make drill, make report):
# for what must happen outside the containers -- stopping, killing, pausing or disconnecting
# them, which only the host may do, or writing files the user opens. It reads the cluster's
# Redis through the port published on 127.0.0.1, as the Redis user `cli` (password from .env).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dotenv.sh
if [ ! -f "$ENV_FILE" ]; then
    echo "minihpc: error: no $ENV_FILE, so no Compose cluster to talk to; start one with: make up" >&2
    exit 1
fi
export MINIHPC_REDIS_URL="redis://cli:$(setting REDIS_CLI_PASSWORD)@127.0.0.1:$(setting REDIS_PORT 6379)/0"
export MINIHPC_COMPOSE_PROJECT="$(setting COMPOSE_PROJECT_NAME minihpc)"
exec "${VENV:-.venv}/bin/minihpc" "$@"
