"""What a rank sees of the machine's GPUs: CUDA_VISIBLE_DEVICES, the Slurm GPU variables and what
torch finds, written to OUT.

    no_gpu.py OUT
"""

import json
import os
import sys

import torch

with open(sys.argv[1], "w") as fh:
    json.dump({"visible": os.environ.get("CUDA_VISIBLE_DEVICES"), "job_gpus": os.environ.get("SLURM_JOB_GPUS"),
               "gpus_on_node": os.environ.get("SLURM_GPUS_ON_NODE"), "available": torch.cuda.is_available(),
               "device_count": torch.cuda.device_count(), "node": os.environ.get("MINIHPC_NODE")}, fh)
