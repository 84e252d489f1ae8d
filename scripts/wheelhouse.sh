#!/usr/bin/env bash
# Fill the wheelhouse once per machine: every pinned wheel of requirements.txt,
# requirements-test.txt, requirements-docs.txt, requirements-ansible.txt, requirements-build.txt and
# constraints.txt,
# downloaded from PyPI the first time and reused after that by the venv (scripts/venv.sh), by
# `make ansible-setup`, by the image build when it cannot use the venv (scripts/build-images.sh)
# and by tests/integration/test_packaging.py, so a second build works without PyPI. Prints the
# wheelhouse's path on stdout; what it downloads (each file's size and rate) on stderr. Override
# the folder with MINIHPC_WHEELHOUSE; PYTHON is the pip that downloads.
#   wheelhouse.sh --stamp   prints the stamp of the pins it would hold, and changes nothing
#   wheelhouse.sh --path    prints its folder, filled or not, and changes nothing
#
# MINIHPC_TORCH_INDEX: a PyTorch wheel index to take torch, torchvision and their dependencies
# from, where one is reachable, e.g. https://download.pytorch.org/whl/cpu for the CPU-only build
# (no 2.45 GB of CUDA libraries that CPU nodes never load). Unset, everything comes from PyPI.

set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON=${PYTHON:-python3}
TORCH_INDEX=${MINIHPC_TORCH_INDEX:-}
# A wheelhouse per torch index: both hold a torch 2.x, and pip would take either.
WHEELHOUSE=${MINIHPC_WHEELHOUSE:-$HOME/.cache/minihpc/wheelhouse${TORCH_INDEX:+-$(echo "$TORCH_INDEX" | sha256sum | cut -c1-8)}}
REQUIREMENTS=(-r requirements.txt -r requirements-test.txt -r requirements-docs.txt -r requirements-ansible.txt
              -r requirements-build.txt -c constraints.txt)

stamp() { { cat requirements.txt requirements-test.txt requirements-docs.txt requirements-ansible.txt requirements-build.txt \
                constraints.txt
            echo "$TORCH_INDEX"; } \
    | sha256sum | cut -c1-16; }
[ "${1:-}" = --stamp ] && { stamp; exit 0; }
[ "${1:-}" = --path ] && { echo "$WHEELHOUSE"; exit 0; }
STAMP=$(stamp)
STAMP_FILE=.minihpc-stamp

# In a log: each download of 10 MB or more with its size and rate (pip's progress bar, drawn
# once it is done), and nothing of the rest (the resolution, metadata and small files).
big_downloads='
/^  Downloading .*\.metadata/ { next }
/^  Downloading / { size = $(NF-1); sub(/^\(/, "", size); unit = $NF
                    big = (unit ~ /^GB/) || (unit ~ /^MB/ && size + 0 >= 10); if (big) print; fflush(); next }
/\342\224\201/ { if (big) print; big = 0; fflush(); next }
/^(Collecting|Saved|Successfully downloaded|Requirement already|Looking in|  Obtaining|  File was already)/ { next }
{ print; fflush() }'

mkdir -p "$WHEELHOUSE"
if [ "$(cat "$WHEELHOUSE/$STAMP_FILE" 2>/dev/null)" != "$STAMP" ]; then
    echo "==> filling the wheelhouse $WHEELHOUSE from PyPI${TORCH_INDEX:+ and $TORCH_INDEX} (once per machine; torch is large)" >&2
    start=$(date +%s)
    index=()
    if [ -n "$TORCH_INDEX" ]; then
        # pip would only warn about an index it cannot reach, and take PyPI's CUDA build instead.
        if ! err=$(curl -fsS -o /dev/null --max-time 20 "${TORCH_INDEX%/}/torch/" 2>&1); then
            err=$(sed 's/^curl: ([0-9]*) //' <<< "$err")
            echo "wheelhouse: MINIHPC_TORCH_INDEX $TORCH_INDEX is not reachable ($err); unset it to take torch from PyPI" >&2
            exit 1
        fi
        # torch's index serves torch and torchvision (e.g. 2.15.0+cpu, which pip prefers to
        # PyPI's 2.15.0 and which constraints.txt's ==2.15.0 allows); PyPI serves the rest.
        index=(--extra-index-url "$TORCH_INDEX")
    fi
    # On a terminal pip draws live progress bars; in a log each file's size and rate, one line each.
    download=("$PYTHON" -m pip download --disable-pip-version-check --progress-bar on --dest "$WHEELHOUSE"
              "${index[@]}" "${REQUIREMENTS[@]}")
    rc=0
    if [ -t 2 ]; then
        "${download[@]}" >&2 || rc=$?
    else
        "${download[@]}" 2>&1 | awk "$big_downloads" >&2 || rc=$?
    fi
    [ "$rc" = 0 ] || { echo "wheelhouse: pip download failed (exit code $rc, above)" >&2; exit 1; }
    echo "$STAMP" > "$WHEELHOUSE/$STAMP_FILE"
    echo "==> wheelhouse ready in $(( $(date +%s) - start ))s: $(find "$WHEELHOUSE" -name '*.whl' | wc -l) wheels," \
         "$(du -sh "$WHEELHOUSE" | cut -f1)" >&2
fi
echo "$WHEELHOUSE"
