#!/usr/bin/env bash
# `make build`: every image docker-compose.yml runs, with or without a registry.
#
# With a registry the node image is built on the official python image and Redis, Prometheus and
# Grafana are the official pinned images. Without one (docker pull fails), a Debian base image is
# bootstrapped locally (scripts/bootstrap-base.sh), the node image is built on it, Redis and
# Prometheus are built from Debian's packages, and Grafana is left out (it is not in Debian).
# MINIHPC_IMAGE_SOURCE=registry|offline forces either path. The choice is written to .env.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dotenv.sh
env_ensure

NODE_IMAGE=$(setting MINIHPC_IMAGE minihpc/node:0.1.0)
PYTHON_IMAGE=$(setting PYTHON_BASE_IMAGE python:3.11.13-slim-bookworm)
OFFICIAL_REDIS=redis:7.2.5-bookworm
OFFICIAL_PROMETHEUS=prom/prometheus:v2.53.1
OFFICIAL_GRAFANA=grafana/grafana:11.1.0
DEBIAN_BASE=minihpc/debian:bookworm
OFFLINE_REDIS=minihpc/redis:bookworm
OFFLINE_PROMETHEUS=minihpc/prometheus:bookworm

# Without buildx the classic builder does the job; say so once instead of warning per image.
docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0

# docker build, minus the classic builder's deprecation banner.
quiet_build() {
    docker build "$@" 2> >(grep -v -e DEPRECATED -e 'BuildKit is currently disabled' -e 'environment-variable' -e '^ *$' >&2)
}

have() { docker image inspect "$1" >/dev/null 2>&1; }
pull() { have "$1" || docker pull --quiet "$1" >/dev/null 2>&1; }

source_mode=${MINIHPC_IMAGE_SOURCE:-auto}
if [ "$source_mode" = auto ]; then
    if pull "$PYTHON_IMAGE"; then source_mode=registry; else source_mode=offline; fi
fi

start=$(date +%s)
case "$source_mode" in
registry)
    echo "==> registry reachable: official images $PYTHON_IMAGE, $OFFICIAL_REDIS, $OFFICIAL_PROMETHEUS, $OFFICIAL_GRAFANA"
    for image in "$PYTHON_IMAGE" "$OFFICIAL_REDIS" "$OFFICIAL_PROMETHEUS" "$OFFICIAL_GRAFANA"; do
        pull "$image" || { echo "build: cannot pull $image" >&2; exit 1; }
    done
    base=$PYTHON_IMAGE
    env_set REDIS_IMAGE "$OFFICIAL_REDIS"
    env_set PROMETHEUS_IMAGE "$OFFICIAL_PROMETHEUS"
    env_set GRAFANA_IMAGE "$OFFICIAL_GRAFANA"
    env_set COMPOSE_PROFILES grafana
    ;;
offline)
    echo "==> no registry reachable: building every image from a locally bootstrapped Debian base"
    bash scripts/bootstrap-base.sh "$DEBIAN_BASE"
    base=$DEBIAN_BASE
    for svc in redis prometheus; do
        tag=$OFFLINE_REDIS; [ "$svc" = prometheus ] && tag=$OFFLINE_PROMETHEUS
        echo "==> image $tag (Debian's $svc package)"
        quiet_build --quiet --network host --build-arg BASE_IMAGE="$base" -t "$tag" \
            - < "scripts/images/$svc.Dockerfile" >/dev/null
    done
    env_set REDIS_IMAGE "$OFFLINE_REDIS"
    env_set PROMETHEUS_IMAGE "$OFFLINE_PROMETHEUS"
    env_set COMPOSE_PROFILES ""
    echo "==> Grafana left out: it has no Debian package and no registry is reachable to pull" \
         "$OFFICIAL_GRAFANA. Everything else runs; Prometheus is at http://127.0.0.1:$(setting PROMETHEUS_PORT 9090)."
    ;;
*)
    echo "build: MINIHPC_IMAGE_SOURCE must be auto, registry or offline, not '$source_mode'" >&2
    exit 2
    ;;
esac

# Python packages come from the wheelhouse, served to the build over loopback (the build runs
# on the host network), so the big pip layer needs no PyPI once the wheelhouse is filled.
pip_opts=""
if python3 -c 'import sys, platform; sys.exit(not (sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64"))'; then
    wheelhouse=$(bash scripts/wheelhouse.sh)
    # A fixed port keeps the build argument, and so Docker's layer cache, the same every build.
    port=${MINIHPC_WHEELHOUSE_PORT:-38111}
    if curl -s -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null; then
        echo "build: port $port is taken; set MINIHPC_WHEELHOUSE_PORT to a free one" >&2
        exit 1
    fi
    python3 -m http.server --bind 127.0.0.1 --directory "$wheelhouse" "$port" >/dev/null 2>&1 &
    server=$!
    trap 'kill $server 2>/dev/null || true' EXIT
    pip_opts="--no-index --find-links http://127.0.0.1:$port/"
    for _ in $(seq 50); do curl -fsS -o /dev/null "http://127.0.0.1:$port/" 2>/dev/null && break; sleep 0.1; done
fi
echo "==> image $NODE_IMAGE on $base"
quiet_build --network host --build-arg BASE_IMAGE="$base" --build-arg PIP_OPTS="$pip_opts" \
    -t "$NODE_IMAGE" . | grep --line-buffered -E '^Step|^Successfully|ERROR|rror:' || true
have "$NODE_IMAGE" || { echo "build: the node image $NODE_IMAGE was not built" >&2; exit 1; }
env_set MINIHPC_IMAGE "$NODE_IMAGE"
echo "==> images ready in $(( $(date +%s) - start ))s ($source_mode): $NODE_IMAGE $(env_get REDIS_IMAGE) $(env_get PROMETHEUS_IMAGE)$( [ "$source_mode" = registry ] && echo " $OFFICIAL_GRAFANA")"
