"""PyTorch profiler traces of chosen steps: ``--profile STEPS`` or ``MINIHPC_PROFILE=STEPS``.

    from minihpc import profiling
    profiler = profiling.Profiler.configured(args.profile, rank=rank)   # None: $MINIHPC_PROFILE
    for step in range(first, last + 1):
        profiler.begin(step)
        train_step()
        if (path := profiler.end(step)):
            print(f"rank {rank}: profile written to {path}")
    profiler.close()                                                     # a window cut short

STEPS is ``N`` (N steps after a warm-up of :data:`WARMUP` steps, counted from the first step
this process trains, so a resumed run is profiled too) or ``A:B`` (steps A to B inclusive, as
the job numbers them). Each rank writes one Chrome trace, ``profile-rank<R>-steps<A>-<B>.json``
(open it in chrome://tracing or Perfetto), into a directory a job may write: by default
``$MINIHPC_CHECKPOINT_DIR/profile``, else a folder in the temporary directory. A rank that uses
CUDA records its kernels too (``ProfilerActivity.CUDA``). When no profiling was asked for no
profiler object is made: :meth:`begin` and :meth:`end` return at once.
"""

from __future__ import annotations

import argparse
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

ENV = "MINIHPC_PROFILE"
WARMUP = 3
"""Steps left alone before an ``N`` window: the first steps pay for allocation and DDP's setup."""
_STEPS = re.compile(r"^\s*(\d+)\s*(?::\s*(\d+)\s*)?$")


@dataclass(frozen=True)
class Window:
    """Steps ``first`` to ``last`` inclusive; ``relative``: counted from the first step seen
    (step 1 being that one), not from the start of training."""

    first: int
    last: int
    relative: bool = False

    def anchored(self, first_step: int) -> Window:
        """The window in the job's step numbers, once the first step trained is known."""
        if not self.relative:
            return self
        return Window(self.first + first_step - 1, self.last + first_step - 1)


def parse_steps(text: str) -> Window:
    """``"N"`` -> N steps after the warm-up; ``"A:B"`` -> steps A..B. ValueError otherwise."""
    match = _STEPS.match(str(text))
    if not match:
        raise ValueError(f"profile steps {text!r}: give N (that many steps after a {WARMUP}-step warm-up) "
                         f"or A:B (steps A to B), e.g. 5 or 20:24")
    a, b = int(match[1]), match[2]
    if b is None:
        if a < 1:
            raise ValueError(f"profile steps {text!r}: profile at least 1 step")
        return Window(WARMUP + 1, WARMUP + a, relative=True)
    if not 1 <= a <= int(b):
        raise ValueError(f"profile steps {text!r}: need 1 <= A <= B (steps are numbered from 1)")
    return Window(a, int(b))


def steps_argument(text: str) -> str:
    """An argparse ``type`` that checks STEPS with :func:`parse_steps` (a bad value is one usage
    line) and keeps the text, so the parsed arguments stay plain values a checkpoint can hold."""
    try:
        parse_steps(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def default_directory() -> Path:
    own = os.environ.get("MINIHPC_CHECKPOINT_DIR")
    return Path(own) / "profile" if own else Path(tempfile.gettempdir()) / "minihpc-profile"


def trace_name(rank: int, first: int, last: int) -> str:
    return f"profile-rank{rank}-steps{first}-{last}.json"


class Profiler:
    """torch.profiler around the steps of one :class:`Window`; inactive without one."""

    def __init__(self, window: Window | None, directory: str | os.PathLike | None = None, rank: int | None = None):
        self.window = window
        self.directory = Path(directory) if directory is not None else default_directory()
        self.rank = int(os.environ.get("RANK", "0")) if rank is None else rank
        self.active = None  # the torch profiler, between the window's first step and its end
        self.label = None  # the current step's range in the trace
        self.first_profiled: int | None = None
        self.last_seen: int | None = None

    @classmethod
    def configured(cls, steps: str | None = None, directory: str | os.PathLike | None = None,
                   rank: int | None = None) -> Profiler:
        """A profiler for STEPS, or for $MINIHPC_PROFILE when none are given (ValueError if bad)."""
        steps = steps or os.environ.get(ENV)
        return cls(parse_steps(steps) if steps else None, directory, rank)

    def begin(self, step: int) -> None:
        """Before training ``step``: start profiling at the window's first step."""
        if self.window is None:
            return
        if self.window.relative:
            self.window = self.window.anchored(step)
        if self.active is None and self.first_profiled is None and self.window.first <= step <= self.window.last:
            from torch import profiler

            activities = [profiler.ProfilerActivity.CPU]
            if _cuda():
                activities.append(profiler.ProfilerActivity.CUDA)
            self.active = profiler.profile(activities=activities)
            self.active.start()
            self.first_profiled = step
        if self.active is not None:
            from torch import profiler

            self.label = profiler.record_function(f"step {step}")
            self.label.__enter__()

    def end(self, step: int) -> Path | None:
        """After training ``step``: at the window's last step, write the trace; its path."""
        self.last_seen = step
        if self.label is not None:
            self.label.__exit__(None, None, None)
            self.label = None
        if self.active is None or step < self.window.last:
            return None
        return self._write(step)

    def close(self) -> Path | None:
        """Write a window that training ended inside of (its path), else nothing."""
        if self.active is None or self.last_seen is None:
            return None
        return self._write(self.last_seen)

    def _write(self, last: int) -> Path:
        self.active.stop()
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.directory / trace_name(self.rank, self.first_profiled, last)
        self.active.export_chrome_trace(str(path))
        self.active = None
        return path


def _cuda() -> bool:
    """Whether to record CUDA activity too: when this rank uses CUDA (a CPU rank on a GPU
    machine would only pay for CUPTI's start)."""
    from minihpc.job import devices

    return devices.uses_cuda()
