#!/usr/bin/env bash
# Fill the wheelhouse once per machine: every pinned wheel of requirements.txt,
# requirements-ansible.txt and constraints.txt,
# downloaded from PyPI the first time and reused after that by the venv (scripts/venv.sh) and by
# the image build (scripts/build-images.sh), so a second build works without PyPI.
# Prints the wheelhouse's path. Override it with MINIHPC_WHEELHOUSE.

set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
WHEELHOUSE=${MINIHPC_WHEELHOUSE:-$HOME/.cache/minihpc/wheelhouse}
STAMP=$(cat requirements.txt requirements-ansible.txt constraints.txt | sha256sum | cut -c1-16)
STAMP_FILE=.minihpc-stamp

mkdir -p "$WHEELHOUSE"
if [ "$(cat "$WHEELHOUSE/$STAMP_FILE" 2>/dev/null)" != "$STAMP" ]; then
    echo "==> filling the wheelhouse $WHEELHOUSE (once per machine; torch is large)" >&2
    "$PYTHON" -m pip download --quiet --disable-pip-version-check --dest "$WHEELHOUSE" \
        -r requirements.txt -r requirements-ansible.txt -c constraints.txt >&2
    echo "$STAMP" > "$WHEELHOUSE/$STAMP_FILE"
fi
echo "$WHEELHOUSE"
