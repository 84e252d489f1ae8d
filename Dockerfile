# One image for every minihpc node role; docker-compose.yml picks the role with `command:`
# (`node master-node --master ...` or `node worker-node-1`). `make build` builds it.
#
# BASE_IMAGE is the official python image when a registry is reachable; without one,
# `make build` passes a Debian image it bootstrapped itself (scripts/bootstrap-base.sh).
# PIP_OPTS points pip at the local wheelhouse `make build` serves, so the same build works
# with and without PyPI; left empty, pip installs from PyPI.
#
# Layer order matters: every step after a change is rebuilt and committed, which is slow on a
# multi-GB image, so the project's own files come last, in a single COPY.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG UID=10001
RUN groupadd --gid ${UID} minihpc \
    && useradd --uid ${UID} --gid ${UID} --create-home --shell /bin/bash minihpc \
    && mkdir -p /shared/jobs /shared/data /shared/models /shared/logs /shared/prometheus \
    && chown -R minihpc:minihpc /shared

# The large layer: it changes only when requirements.txt or constraints.txt change.
COPY requirements.txt constraints.txt /tmp/deps/
ARG PIP_OPTS=
RUN python3 -m venv /opt/venv \
    && /opt/venv/bin/pip install --no-cache-dir --quiet --disable-pip-version-check $PIP_OPTS \
        -r /tmp/deps/requirements.txt -c /tmp/deps/constraints.txt \
    && printf '#!/bin/sh\nexec python3 -m minihpc.cli "$@"\n' > /opt/venv/bin/minihpc \
    && chmod 755 /opt/venv/bin/minihpc

# Slurm's command names, made like `minihpc` above: sbatch runs `minihpc submit`, and so on
# (minihpc.cli.slurm.ALIASES). A layer of its own, so changing the list reinstalls nothing.
RUN for alias in sbatch squeue scancel sinfo sacct scontrol srun; do \
        printf '#!/bin/sh\nexec python3 -m minihpc.cli.slurm %s "$@"\n' "$alias" > "/opt/venv/bin/$alias" \
        && chmod 755 "/opt/venv/bin/$alias" || exit 1; \
    done

# Jobs' ranks run as `job`, a user of their own: node agents run as root with a few
# capabilities only to start them as that user (src/minihpc/node/identity.py), so a job can read
# no daemon's environment, signal no daemon and write neither the spool nor the daemons' files.
# After the large layer, so adding it does not reinstall the packages.
ARG JOB_UID=10002
RUN groupadd --gid ${JOB_UID} job \
    && useradd --uid ${JOB_UID} --gid ${JOB_UID} --create-home --shell /usr/sbin/nologin job \
    && mkdir -p /opt/minihpc

# The package runs from its source tree; jobs/mnist.py is importable by submitted job copies.
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

# Only what .dockerignore lets through: src/, jobs/, and the files above. Compiled here, as
# root: the daemons and jobs cannot write __pycache__ there, so every job's processes
# would otherwise compile these modules again on every start.
COPY . /opt/minihpc/
USER root
RUN python3 -m compileall -q /opt/minihpc/src /opt/minihpc/jobs
USER minihpc
