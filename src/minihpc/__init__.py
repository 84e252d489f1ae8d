"""minihpc: a mini HPC cluster for rehearsing distributed PyTorch training.

The package is built in layers, each a subpackage that imports only the layers below it
(tests/unit/test_layers.py enforces it; docs/architecture.md lists them).

Job scripts import the job SDK as ``from minihpc import checkpoint, progress, preempt, tracking``
(and ``balance``, ``elastic``, ``profiling``): those names are loaded from :mod:`minihpc.job` on first use.
Nothing here connects to Redis or registers anything at import time; every process builds its
own connections from an explicit :class:`minihpc.core.config.Settings`.
"""

import importlib

__version__ = "0.1.0"

JOB_SDK = ("balance", "checkpoint", "elastic", "profiling", "progress", "preempt", "tracking")
"""What job scripts import from ``minihpc`` itself (modules of :mod:`minihpc.job`)."""


def __getattr__(name: str):
    if name in JOB_SDK:
        return importlib.import_module(f"minihpc.job.{name}")
    raise AttributeError(f"module 'minihpc' has no attribute {name!r}")
