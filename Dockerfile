# One image for every minihpc node role; docker-compose.yml picks the role with `command:`
# (`node master-node --master ...` or `node worker-node-1`). `make build` builds it.
#
# BASE_IMAGE is the official python image when a registry is reachable; without one,
# `make build` passes a Debian image it bootstrapped itself (scripts/bootstrap-base.sh).
# PIP_OPTS points pip at the local wheelhouse `make build` serves, so the same build works
# with and without PyPI; left empty, pip installs from PyPI.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}

ARG UID=10001
RUN groupadd --gid ${UID} minihpc \
    && useradd --uid ${UID} --gid ${UID} --create-home --shell /bin/bash minihpc \
    && mkdir -p /shared/jobs /shared/data /shared/models /shared/logs /shared/prometheus \
    && chown -R minihpc:minihpc /shared

ENV VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The large layer: it changes only when requirements.txt or constraints.txt change.
COPY requirements.txt constraints.txt /tmp/deps/
ARG PIP_OPTS=
RUN python3 -m venv "$VIRTUAL_ENV" \
    && pip install --no-cache-dir --quiet $PIP_OPTS -r /tmp/deps/requirements.txt -c /tmp/deps/constraints.txt

COPY pyproject.toml README.md /opt/minihpc/
COPY src /opt/minihpc/src
RUN pip install --no-cache-dir --quiet --no-index --no-deps --no-build-isolation /opt/minihpc \
    && rm -rf /opt/minihpc/src /opt/minihpc/build
COPY jobs /opt/minihpc/jobs
# The shipped jobs' shared module (jobs/mnist.py) imports from any submitted copy of them.
ENV PYTHONPATH=/opt/minihpc/jobs

USER minihpc
WORKDIR /shared/jobs
ENTRYPOINT ["python3", "-m", "minihpc.entrypoint"]
CMD ["--help"]
