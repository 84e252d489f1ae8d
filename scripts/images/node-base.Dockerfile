# The node image without its Python packages and without minihpc's code: users, folders, an
# empty venv, the command wrappers, the environment and the entrypoint. `make build`
# (scripts/build-images.sh) adds the packages on top of it (minihpc/node-deps), and the
# top-level Dockerfile adds minihpc's source tree on top of that.
#
# Small on purpose: on this machine's storage driver every build step on top of the 6 GB of
# packages costs about 9 s, whatever it does, so everything that is not the packages or the
# code is done here, on a 170 MB image, where a step costs about a second.
#
# BASE_IMAGE is the official python image when a registry is reachable; without one,
# `make build` passes a Debian image it bootstrapped itself (scripts/bootstrap-base.sh).
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

# iptables: the node agent's rule that keeps jobs off Redis's port (src/minihpc/core/firewall.py).
RUN command -v iptables >/dev/null || { apt-get update -qq \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends iptables >/dev/null \
    && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin; }

# Daemons run as `minihpc`. Jobs' ranks run as `job`, a user of their own: node agents run as
# root with a few capabilities only to start them as that user (src/minihpc/node/identity.py),
# so a job can read no daemon's environment, signal no daemon and write neither the spool nor
# the daemons' files.
ARG UID=10001
ARG JOB_UID=10002
RUN groupadd --gid ${UID} minihpc \
    && useradd --uid ${UID} --gid ${UID} --create-home --shell /bin/bash minihpc \
    && groupadd --gid ${JOB_UID} job \
    && useradd --uid ${JOB_UID} --gid ${JOB_UID} --create-home --shell /usr/sbin/nologin job \
    && mkdir -p /shared/jobs /shared/data /shared/models /shared/logs /shared/prometheus /opt/minihpc \
    && chown -R minihpc:minihpc /shared

# The venv the packages go into (owned by root: no daemon or job can change them), without pip:
# the packages layer brings it with the rest. `minihpc` runs the CLI from the source tree on
# PYTHONPATH.
RUN python3 -m venv --without-pip /opt/venv \
    && printf '#!/bin/sh\nexec python3 -m minihpc.cli "$@"\n' > /opt/venv/bin/minihpc \
    && chmod 755 /opt/venv/bin/minihpc

# Slurm's command names, made like `minihpc` above: sbatch runs `minihpc submit`, and so on
# (minihpc.cli.slurm.ALIASES).
RUN for alias in sbatch squeue scancel sinfo sacct scontrol srun; do \
        printf '#!/bin/sh\nexec python3 -m minihpc.cli.slurm %s "$@"\n' "$alias" > "/opt/venv/bin/$alias" \
        && chmod 755 "/opt/venv/bin/$alias" || exit 1; \
    done

# PYTHONSAFEPATH: no daemon, healthcheck or `docker compose exec` command puts its working
# directory on sys.path, so a module a job drops into /shared/jobs (a redis.py, say) is never
# imported by them. Jobs' ranks run without it (core.launch_spec.job_env), as plain Python does.
ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONPATH=/opt/minihpc/src:/opt/minihpc/jobs \
    PYTHONSAFEPATH=1 \
    PYTHONUNBUFFERED=1
USER minihpc
# A working directory no job can write (daemons never import from it anyway: PYTHONSAFEPATH).
WORKDIR /opt/minihpc
ENTRYPOINT ["python3", "-m", "minihpc.node.entrypoint"]
CMD ["--help"]
