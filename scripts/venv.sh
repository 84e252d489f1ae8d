#!/usr/bin/env bash
# Create or refresh .venv from a wheelhouse filled once per machine (scripts/wheelhouse.sh).
#
# A system Python without pip is enough: a throwaway venv's pip fills the wheelhouse then. uv
# (requirements-build.txt) installs every wheel into the venv, in parallel, then the bytecode of a
# node's packages is compiled (scripts/images/venv_layer.py --compile: what the image takes; the
# test tools and Ansible compile when imported); pip does it where uv cannot be installed. The venv is rebuilt only when the
# requirements, constraints, pyproject or MINIHPC_TORCH_INDEX change.
#   venv.sh --current   exits 0 when $VENV is up to date, 1 otherwise, and changes nothing
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
VENV=${VENV:-.venv}
stamp_of() { { cat pyproject.toml; bash scripts/wheelhouse.sh --stamp; } | sha256sum | cut -c1-16; }
STAMP=$(stamp_of)
current() { [ "$(cat "$VENV/.minihpc-stamp" 2>/dev/null)" = "$STAMP" ]; }
[ "${1:-}" = --current ] && { current; exit; }
current && exit 0

if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "minihpc needs Python 3.11 or newer; $PYTHON is $("$PYTHON" -V 2>&1)" >&2
    exit 1
fi

start=$(date +%s)
# The wheelhouse first, so a download that fails leaves the old venv as it was. Its pip is the
# system Python's, or a throwaway venv's (ensurepip) where the system Python has none.
pip_python=$PYTHON
if ! "$PYTHON" -m pip --version >/dev/null 2>&1; then
    boot=$(mktemp -d)
    trap 'rm -rf "$boot"' EXIT
    "$PYTHON" -m venv "$boot"
    pip_python=$boot/bin/python
fi
WHEELHOUSE=$(PYTHON="$pip_python" bash scripts/wheelhouse.sh)
echo "==> creating $VENV"
rm -rf "$VENV"
"$PYTHON" -m venv "$VENV"
# A node's packages (requirements.txt), the test suite's, the docs site's (make docs) and Ansible's:
# the image takes only the first.
REQUIREMENTS=(-r requirements.txt -r requirements-test.txt -r requirements-docs.txt -r requirements-ansible.txt
              -c constraints.txt)

echo "==> installing the wheelhouse's packages into $VENV"
if "$VENV/bin/pip" install --quiet --disable-pip-version-check --no-index --find-links "$WHEELHOUSE" \
        -r requirements-build.txt 2>/dev/null; then
    # uv's lines: resolved, unpacked, installed and compiled, each with its count and time.
    "$VENV/bin/uv" pip install --python "$VENV/bin/python" --no-index --find-links "$WHEELHOUSE" \
        "${REQUIREMENTS[@]}" 2>&1 | grep --line-buffered -v '^ [+-] ' | sed -u 's/^/    /'
    # Bytecode for a node's packages only (the image's): the rest compiles when first imported.
    "$VENV/bin/python" scripts/images/venv_layer.py --compile requirements.txt
    "$VENV/bin/uv" pip install --quiet --python "$VENV/bin/python" --no-index --no-deps --no-build-isolation -e .
else
    echo "    (uv cannot be installed here: pip installs them, one at a time)"
    "$VENV/bin/pip" install --disable-pip-version-check --progress-bar off --no-index --find-links "$WHEELHOUSE" \
        "${REQUIREMENTS[@]}" | grep --line-buffered -E '^(Installing|Successfully)' | sed -u 's/^/    /'
    "$VENV/bin/pip" install --quiet --no-index --no-deps --no-build-isolation -e .
fi
echo "$STAMP" > "$VENV/.minihpc-stamp"
echo "==> $VENV ready in $(( $(date +%s) - start ))s: $("$VENV/bin/python" -c 'import torch, rq, redis; print(f"torch {torch.__version__}, rq {rq.__version__}, redis-py {redis.__version__}")')"
