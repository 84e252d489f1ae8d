#!/usr/bin/env bash
# Install the programs a make target needs on this machine, from Debian's packages:
#   host-deps.sh venv   python3's venv and ensurepip (make venv)
#   host-deps.sh test   + redis-server (integration suite), promtool and prometheus (alert-rule
#                       and dashboard-query tests), curl, chromium and chromium-driver (the web
#                       page's browser test), zsh (the shell completion test); with a Docker
#                       engine also the Compose tool and mmdebstrap (e2e suite, image build
#                       without a registry)
#   host-deps.sh local  + redis-server (minihpc up --local)
#   host-deps.sh ansible  ssh and rsync, which Ansible uses to reach and copy to the hosts
#                       (make ansible-setup)
#   host-deps.sh slurm  + Debian's Slurm (slurm-wlm) and munge: the oracle test that runs the
#                       same batch scripts through real Slurm (scripts/slurm-oracle.sh)
# As root with apt-get it installs what is missing; otherwise it stops with one line naming
# the exact command to run. Nothing is installed when everything is already there.
set -euo pipefail

purpose=${1:-test}
what="make $purpose"
need=()
python3 -c 'import venv, ensurepip' 2>/dev/null || need+=(python3-venv)
case "$purpose" in
venv) ;;
local)
    command -v redis-server >/dev/null || need+=(redis-server)
    ;;
ansible)
    command -v ssh >/dev/null || need+=(openssh-client)
    command -v rsync >/dev/null || need+=(rsync)
    ;;
slurm)
    what="the Slurm oracle test"
    # By path: the venv's sbatch/scontrol aliases are minihpc's, not Slurm's.
    [ -x /usr/sbin/slurmctld ] && [ -x /usr/sbin/slurmd ] && [ -x /usr/bin/sbatch ] || need+=(slurm-wlm)
    [ -x /usr/sbin/munged ] || need+=(munge)
    ;;
test)
    command -v redis-server >/dev/null || need+=(redis-server)
    command -v promtool >/dev/null && command -v prometheus >/dev/null || need+=(prometheus)
    command -v curl >/dev/null || need+=(curl)
    command -v jq >/dev/null || need+=(jq)  # the validator spec's CI recipe pipes its report through jq
    command -v chromium >/dev/null || need+=(chromium)
    command -v chromedriver >/dev/null || need+=(chromium-driver)
    command -v zsh >/dev/null || need+=(zsh)  # the zsh completion test types into a real zsh
    if command -v docker >/dev/null && docker info >/dev/null 2>&1; then
        docker compose version >/dev/null 2>&1 || command -v docker-compose >/dev/null || need+=(docker-compose)
        command -v mmdebstrap >/dev/null || command -v debootstrap >/dev/null || need+=(mmdebstrap)
        # The Ansible suite: real SSH to the hosts, rsync for the wheelhouse.
        command -v ssh >/dev/null || need+=(openssh-client)
        command -v rsync >/dev/null || need+=(rsync)
    fi
    ;;
*)
    echo "host-deps.sh: unknown purpose '$purpose' (venv, local, ansible, slurm or test)" >&2
    exit 2
    ;;
esac

[ ${#need[@]} -eq 0 ] && exit 0

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "==> installing ${need[*]} from Debian's packages ($what needs them)"
    export DEBIAN_FRONTEND=noninteractive
    # Debian's redis-server and prometheus would start system services on 6379 and 9090, the
    # ports minihpc's own clusters use, and slurm-wlm its daemons on the system's config: keep
    # them from starting (Debian's policy-rc.d).
    policy=/usr/sbin/policy-rc.d
    if [ ! -e "$policy" ]; then
        printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod 755 "$policy"
        trap 'rm -f "$policy"' EXIT
    fi
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2> >(grep -v '^debconf: delaying' >&2)
    exit 0
fi
echo "$what: missing ${need[*]}; install with: sudo apt-get install -y ${need[*]}" >&2
exit 1
