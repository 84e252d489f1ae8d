#!/usr/bin/env bash
# Create or refresh .venv from a wheelhouse built once per machine.
#
# The wheelhouse (scripts/wheelhouse.sh) is filled from PyPI once per machine and shared with
# the image build, so a second run works offline. The venv is rebuilt only when the requirements, constraints or pyproject change.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
stamp_of() { cat requirements.txt requirements-ansible.txt constraints.txt pyproject.toml | sha256sum | cut -c1-16; }
STAMP=$(stamp_of)

if [ -f "$VENV/.minihpc-stamp" ] && [ "$(cat "$VENV/.minihpc-stamp")" = "$STAMP" ]; then
    exit 0
fi

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "minihpc needs Python 3.11 or newer; $PYTHON is $("$PYTHON" -V 2>&1)" >&2
    exit 1
fi

WHEELHOUSE=$(PYTHON="$PYTHON" bash scripts/wheelhouse.sh)

echo "==> creating $VENV from the wheelhouse"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/pip" install --quiet --no-index --find-links "$WHEELHOUSE" -r requirements.txt -r requirements-ansible.txt -c constraints.txt
"$VENV/bin/pip" install --quiet --no-index --no-deps --no-build-isolation -e .
echo "$STAMP" > "$VENV/.minihpc-stamp"
echo "==> $VENV ready: $("$VENV/bin/python" -c 'import torch, rq, redis; print(f"torch {torch.__version__}, rq {rq.__version__}, redis-py {redis.__version__}")')"
