#!/usr/bin/env bash
# make test, before the venv: start building, in the background, the images that need no venv
# (the Debian base, Redis, Prometheus, the node base, the Ansible suite's hosts), beside the
# wheelhouse's download and the venv's install, which mostly wait on the network and the disk.
# scripts/test_tiers.py builds the rest (the packages' layer, minihpc's code) under the same
# lock, beside the unit tier, and waits for it before the tiers that follow: built beside the
# integration tier, the images slowed it from 7 to 10-17 minutes and took 10-18 minutes
# themselves, where alone they take under 4.
set -euo pipefail
cd "$(dirname "$0")/.."

command -v docker >/dev/null && docker info >/dev/null 2>&1 || exit 0  # the Docker tiers skip
command -v flock >/dev/null || exit 0  # test_tiers.py builds everything then
mkdir -p build/test-logs
log=build/test-logs/images-early.log
echo "==> building the images that need no venv in the background ($log)"
# The lock is scripts/test_tiers.py's ImageBuild.LOCK.
nohup flock build/images.lock bash -c 'bash scripts/build-images.sh --base && python3 -m tests.ansible.hosts build' \
    > "$log" 2>&1 < /dev/null &
