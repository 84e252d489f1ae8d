"""torchrun, reporting what really happened: ``python -m minihpc.node.torchrun TORCHRUN-ARGS``.

It is torchrun itself (``torch.distributed.run``), except that when ranks fail it writes the
first failure's real exit code and signal (torchrun alone exits 1 whatever the rank did) to
the JSON file named by MINIHPC_RESULT_FILE, and exits with that code (128+N for signal N).

Ranks are forked from torchrun's agent (``MINIHPC_START_METHOD=fork``, the default) after it
has imported torch and what DDP pulls in (torch._dynamo), instead of each rank starting a new
interpreter and importing them again: on these 2-core machines that is 2-3 s of every job
start (and of every resume after a failure). Nothing before the fork initializes CUDA (see
_cuda_untouched), so each rank may use its GPUs as a spawned one would. ``MINIHPC_START_METHOD=spawn`` gives torchrun's
own way, ``python -u -m minihpc.node.rank`` per rank.
"""

from __future__ import annotations

import json
import os
import sys
import time
import uuid
from contextlib import contextmanager

from minihpc.core.launch_spec import RANK_MODULE
from minihpc.core.outcome import from_returncode, signal_name
from minihpc.machine import files


def _write(path: str | None, result: dict) -> None:
    if not path:
        return
    files.replace(path, json.dumps(result).encode())


def _run_forked(args) -> None:
    import torch._dynamo  # noqa: F401 - DDP imports it in every rank; once here, before the fork
    from torch.distributed.launcher.api import elastic_launch
    from torch.distributed.run import config_from_args

    from minihpc.node.rank import forked

    args.start_method = "fork"
    if args.standalone:  # what torchrun's own run() does for --standalone
        args.rdzv_backend, args.rdzv_endpoint, args.rdzv_id = "c10d", "localhost:0", str(uuid.uuid4())
    with _cuda_untouched():
        config, _cmd, _cmd_args = config_from_args(args)
    sys.stdout.flush()
    sys.stderr.flush()
    elastic_launch(config=config, entrypoint=forked)(*args.training_script_args)


@contextmanager
def _cuda_untouched():
    """torchrun's LaunchConfig built without touching CUDA. Since torch 2.8 it asks
    ``torch.accelerator.is_available()`` (for its default NUMA binding), which counts devices
    through the CUDA runtime unless PYTORCH_NVML_BASED_CUDA_CHECK=1 -- and that "poisons" every
    later fork of this process: each forked rank that touches CUDA dies with "Cannot
    re-initialize CUDA in forked subprocess". Here the question is answered from NVML alone
    (no GPU driver: no accelerator), which never initializes CUDA; torch's own device_count()
    then asks NVML too."""
    import torch

    accelerator = getattr(torch, "accelerator", None)
    nvml_count = getattr(torch.cuda, "_device_count_nvml", None)
    if accelerator is None or nvml_count is None or torch.version.hip:
        yield
        return
    real = accelerator.is_available
    accelerator.is_available = lambda: nvml_count() > 0
    try:
        yield
    finally:
        accelerator.is_available = real


_PARSER = None


def parser():
    """torchrun's own argument parser (``torch.distributed.run.parse_args`` builds a new one
    each call: a few ms), built once per process -- in the warm launcher, once for every job."""
    global _PARSER
    if _PARSER is None:
        from torch.distributed.run import get_args_parser

        _PARSER = get_args_parser()
    return _PARSER


def main(argv: list[str]) -> int:
    result_file = os.environ.pop("MINIHPC_RESULT_FILE", None)
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import run

    args = parser().parse_args(argv)
    try:
        if os.environ.get("MINIHPC_START_METHOD", "fork") == "fork" and args.module and args.training_script == RANK_MODULE:
            _run_forked(args)
        else:
            run(args)
        result = {"exit_code": 0, "signal": None, "rank": None}
    except ChildFailedError as exc:
        seen = time.time()  # within --monitor-interval of the rank's death
        rank, failure = min(exc.failures.items(), key=lambda kv: (kv[1].timestamp, kv[0]))
        code, sig = from_returncode(failure.exitcode)
        print(exc.format_msg(), file=sys.stderr)
        result = {"exit_code": code, "signal": sig, "rank": rank, "at": seen}
    except SignalException as exc:
        number = int(exc.sigval)
        result = {"exit_code": 128 + number, "signal": signal_name(number), "rank": None}
    _write(result_file, result)
    return result["exit_code"]


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
