#!/usr/bin/env bash
# `make build`: every image docker-compose.yml runs, with or without a registry.
#
# With a registry the node image is built on the official python image and Redis, Prometheus and
# Grafana are the official pinned images. Without one (docker pull fails), a Debian base image is
# bootstrapped locally (scripts/bootstrap-base.sh), the node image is built on it, Redis and
# Prometheus are built from Debian's packages, and Grafana is left out (it is not in Debian).
# MINIHPC_IMAGE_SOURCE=registry|offline forces either path. The choice is written to .env.
#   build-images.sh --base   only what needs no venv (the base, Redis, Prometheus and the node
#                            base image): make test starts it beside the venv's build
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/dotenv.sh
env_ensure

NODE_IMAGE=$(setting MINIHPC_IMAGE minihpc/node:0.1.0)
PYTHON_IMAGE=$(setting PYTHON_BASE_IMAGE python:3.11.13-slim-bookworm)
OFFICIAL_REDIS=redis:7.2.5-bookworm
OFFICIAL_PROMETHEUS=prom/prometheus:v2.53.1
OFFICIAL_ALERTMANAGER=prom/alertmanager:v0.27.0
OFFICIAL_GRAFANA=grafana/grafana:11.1.0
DEBIAN_BASE=minihpc/debian:bookworm
OFFLINE_REDIS=minihpc/redis:bookworm
OFFLINE_PROMETHEUS=minihpc/prometheus:bookworm
OFFLINE_ALERTMANAGER=$OFFLINE_PROMETHEUS  # one image from Debian's packages serves both

# Without buildx the classic builder does the job; say so once instead of warning per image.
docker buildx version >/dev/null 2>&1 || export DOCKER_BUILDKIT=0

# docker build, minus the classic builder's deprecation banner.
quiet_build() {
    docker build "$@" 2> >(grep -v -e DEPRECATED -e 'BuildKit is currently disabled' -e 'environment-variable' -e '^ *$' >&2)
}

have() { docker image inspect "$1" >/dev/null 2>&1; }
pull() { have "$1" || docker pull --quiet "$1" >/dev/null 2>&1; }

only_base=false
case "${1:-}" in
--base) only_base=true ;;
"") ;;
*) echo "build: unknown option '$1' (only --base)" >&2; exit 2 ;;
esac

source_mode=${MINIHPC_IMAGE_SOURCE:-auto}
if [ "$source_mode" = auto ]; then
    if pull "$PYTHON_IMAGE"; then source_mode=registry; else source_mode=offline; fi
fi

start=$(date +%s)
case "$source_mode" in
registry)
    echo "==> registry reachable: official images $PYTHON_IMAGE, $OFFICIAL_REDIS, $OFFICIAL_PROMETHEUS," \
         "$OFFICIAL_ALERTMANAGER, $OFFICIAL_GRAFANA"
    for image in "$PYTHON_IMAGE" "$OFFICIAL_REDIS" "$OFFICIAL_PROMETHEUS" "$OFFICIAL_ALERTMANAGER" "$OFFICIAL_GRAFANA"; do
        pull "$image" || { echo "build: cannot pull $image" >&2; exit 1; }
    done
    base=$PYTHON_IMAGE
    env_set REDIS_IMAGE "$OFFICIAL_REDIS"
    env_set PROMETHEUS_IMAGE "$OFFICIAL_PROMETHEUS"
    env_set ALERTMANAGER_IMAGE "$OFFICIAL_ALERTMANAGER"
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
    env_set ALERTMANAGER_IMAGE "$OFFLINE_ALERTMANAGER"
    env_set COMPOSE_PROFILES ""
    echo "==> Grafana left out: it has no Debian package and no registry is reachable to pull" \
         "$OFFICIAL_GRAFANA. Everything else runs; Prometheus is at http://127.0.0.1:$(setting PROMETHEUS_PORT 9090)."
    ;;
*)
    echo "build: MINIHPC_IMAGE_SOURCE must be auto, registry or offline, not '$source_mode'" >&2
    exit 2
    ;;
esac

# -- The node image, in three layers (see Dockerfile) -----------------------------------------
VENV=${VENV:-.venv}
NODE_BASE=minihpc/node-base:local
NODE_DEPS=minihpc/node-deps
echo "==> image $NODE_BASE (users, venv, entrypoint) on $base"
quiet_build --quiet --build-arg BASE_IMAGE="$base" -t "$NODE_BASE" - < scripts/images/node-base.Dockerfile >/dev/null
if $only_base; then
    echo "==> base images ready in $(( $(date +%s) - start ))s ($source_mode); the packages and minihpc's code follow with make build"
    exit 0
fi

# The venv's packages go into the image as they are when its Python is the image's version on
# the image's machine and it is up to date (make build makes it first); pip installs them otherwise.
py_id='import sys, platform; print(*sys.version_info[:2], platform.machine())'
how=pip
if [ -x "$VENV/bin/python" ] && VENV=$VENV bash scripts/venv.sh --current && [ "$("$VENV/bin/python" -c "$py_id")" = \
        "$(docker run --rm --network none --entrypoint python3 "$NODE_BASE" -c "$py_id")" ]; then
    how=venv
fi
# Its tag names what it holds: the pins, the node base, and how (the venv's stamp, which covers MINIHPC_TORCH_INDEX).
deps_tag=$({ cat requirements.txt constraints.txt; docker image inspect -f '{{.Id}}' "$NODE_BASE"
             echo "$how"; [ "$how" = pip ] || cat "$VENV/.minihpc-stamp"; } | sha256sum | cut -c1-12)
deps=$NODE_DEPS:$deps_tag

import_from_venv() {  # the base image's files plus the venv's packages, written once by docker import
    local cid changes=()
    mapfile -t changes < <(docker image inspect -f '{{json .Config}}' "$NODE_BASE" | python3 -c '
import json, sys
c = json.load(sys.stdin)
for e in c.get("Env") or []:
    k, _, v = e.partition("=")
    print(f"--change=ENV {k}={json.dumps(v)}")
for key, word in (("User", "USER"), ("WorkingDir", "WORKDIR")):
    if c.get(key):
        print(f"--change={word} {c[key]}")
for key in ("Entrypoint", "Cmd"):
    if c.get(key):
        print(f"--change={key.upper()} {json.dumps(c[key])}")')
    cid=$(docker create "$NODE_BASE")
    docker export "$cid" | "$VENV/bin/python" scripts/images/venv_layer.py requirements.txt \
        | docker import "${changes[@]}" --message "minihpc node packages from $VENV" - "$deps" >/dev/null
    docker rm "$cid" >/dev/null
}

server=""
install_with_pip() {  # pip in a build step, from the wheelhouse served over loopback (or PyPI)
    local pip_opts="" port
    if python3 -c 'import sys, platform; sys.exit(not (sys.version_info[:2] == (3, 11) and platform.machine() == "x86_64"))'; then
        local wheelhouse
        wheelhouse=$(bash scripts/wheelhouse.sh)
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
    quiet_build --network host --build-arg BASE_IMAGE="$NODE_BASE" --build-arg PIP_OPTS="$pip_opts" -t "$deps" \
        -f scripts/images/node-deps.Dockerfile . | grep --line-buffered -E '^Step|^Successfully|^Installing|ERROR|rror:' || true
}

if have "$deps"; then
    echo "==> image $deps (the Python packages) already here"
else
    t=$(date +%s)
    if [ "$how" = venv ]; then
        echo "==> image $deps: the Python packages of $VENV, imported as one layer"
        import_from_venv
    else
        echo "==> image $deps: the Python packages, installed by pip ($VENV is missing, out of date, or not the image's Python)"
        install_with_pip
    fi
    have "$deps" || { echo "build: the packages image $deps was not built" >&2; exit 1; }
    echo "    $deps ready in $(( $(date +%s) - t ))s"
    # Earlier package layers are 6 GB each: drop their tags (images still in use keep their layers).
    docker images --format '{{.Repository}}:{{.Tag}}' "$NODE_DEPS" | grep -vx "$deps" | xargs -r docker rmi >/dev/null 2>&1 || true
fi

# minihpc's code, compiled by the image's Python, as the build context (see Dockerfile).
stage=build/node-src
rm -rf "$stage" && mkdir -p "$stage"
tar --exclude=__pycache__ --exclude='*.egg-info' -cf - src jobs | tar -C "$stage" -xf -
docker run --rm --network none --user "$(id -u):$(id -g)" --entrypoint python3 -v "$PWD/$stage:/opt/minihpc" \
    "$deps" -m compileall -q /opt/minihpc/src /opt/minihpc/jobs
old=$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE" 2>/dev/null || true)
echo "==> image $NODE_IMAGE: minihpc's code on $deps"
quiet_build --quiet --build-arg DEPS_IMAGE="$deps" -t "$NODE_IMAGE" -f Dockerfile "$stage" >/dev/null
have "$NODE_IMAGE" || { echo "build: the node image $NODE_IMAGE was not built" >&2; exit 1; }
new=$(docker image inspect -f '{{.Id}}' "$NODE_IMAGE")
# The image this build replaced, unless something still uses it.
if [ -n "$old" ] && [ "$old" != "$new" ] && [ -z "$(docker image inspect -f '{{join .RepoTags ","}}' "$old" 2>/dev/null)" ]; then
    docker rmi "$old" >/dev/null 2>&1 || true
fi
env_set MINIHPC_IMAGE "$NODE_IMAGE"
echo "==> images ready in $(( $(date +%s) - start ))s ($source_mode): $NODE_IMAGE $(env_get REDIS_IMAGE) $(env_get PROMETHEUS_IMAGE) $(env_get ALERTMANAGER_IMAGE)$( [ "$source_mode" = registry ] && echo " $OFFICIAL_GRAFANA")"
