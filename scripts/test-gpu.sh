#!/usr/bin/env bash
# `make test-gpu`: tests/gpu on a local cluster of this machine's GPUs (each test skips with its
# reason without CUDA). A GPU machine often has its own Python with torch and NCCL and no
# network to fill minihpc's wheelhouse: the Python is the project's .venv when there is one,
# else GPU_PYTHON (default python3) when it imports torch, minihpc and pytest (pip install
# dist/minihpc-*.whl[node,api,test] there), else one line saying what is missing. redis-server
# must be on PATH (Debian's package, or its binary carried with its libraries beside it).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
if [ -x "$VENV/bin/python" ]; then
    py=$VENV/bin/python
else
    py=${GPU_PYTHON:-python3}
    if ! missing=$("$py" -c 'import importlib.util as u, sys
print(" ".join(m for m in ("torch", "minihpc", "pytest", "httpx") if u.find_spec(m) is None))' 2>&1) || [ -n "$missing" ]; then
        echo "make test-gpu: $py lacks ${missing:-a working interpreter}; make venv, or pip install 'minihpc[node,api,test]' into it (GPU_PYTHON=...)" >&2
        exit 2
    fi
fi
if ! command -v redis-server >/dev/null; then
    bash scripts/host-deps.sh local
fi
echo "==> tests/gpu with $py ($("$py" -c 'import torch; print(f"torch {torch.__version__}, CUDA {torch.cuda.is_available()}, {torch.cuda.device_count()} GPU(s)")'))"
exec "$py" -m pytest tests/gpu -p no:cacheprovider -v -rs
