# The node base image plus a node's Python packages (requirements.txt: pyproject.toml's node, api
# and vision extras; the test tools of requirements-test.txt stay out), installed by pip: what
# `make build` does when it cannot take them from the project's venv (scripts/images/venv_layer.py),
# that is when the venv's Python is not the image's version or machine. Slower: pip unpacks and
# compiles every package again, and the storage driver copies the 6 GB layer to commit it.
#
# PIP_OPTS points pip at the local wheelhouse `make build` serves, so the same build works with
# and without PyPI; left empty, pip installs from PyPI.
ARG BASE_IMAGE=minihpc/node-base
FROM ${BASE_IMAGE}
USER root
COPY requirements.txt constraints.txt /tmp/deps/
ARG PIP_OPTS=
RUN /opt/venv/bin/python -m ensurepip --upgrade >/dev/null \
    && /opt/venv/bin/python -m pip install --no-cache-dir --disable-pip-version-check --progress-bar off $PIP_OPTS \
        -r /tmp/deps/requirements.txt -c /tmp/deps/constraints.txt \
    && rm -rf /tmp/deps
USER minihpc
