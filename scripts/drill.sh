#!/usr/bin/env bash
# make drill: inject a fault into the Compose cluster and time its recovery (minihpc drill).
# It runs on the Docker host, the only place allowed to stop, kill, pause or disconnect the
# cluster's containers; it reads the cluster's Redis through the port published on 127.0.0.1.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dotenv.sh
if [ ! -f "$ENV_FILE" ]; then
    echo "make drill: error: no $ENV_FILE, so no cluster to drill; start one with: make up" >&2
    exit 1
fi
export MINIHPC_REDIS_URL="redis://:$(setting REDIS_PASSWORD)@127.0.0.1:$(setting REDIS_PORT 6379)/0"
exec "${VENV:-.venv}/bin/minihpc" drill "$@" --compose "$(setting COMPOSE_PROJECT_NAME minihpc)"
