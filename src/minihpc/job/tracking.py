"""Experiment tracking for job scripts and validation runs: scalars per step to TensorBoard
event files (written here, no TensorBoard needed) and, when ``wandb`` is installed, to W&B in
offline mode -- nothing leaves the machine while the job runs; ``wandb sync DIR`` uploads later.

    tracker = Tracker(tensorboard_dir=args.tensorboard, project="mnist", config=vars(args))
    tracker.log(step, loss=0.31, samples_per_second=880.0, grad_norm=1.7)
    tracker.close()
"""

from __future__ import annotations

import os

from minihpc.job.tensorboard import EventWriter


def _wandb():
    try:
        import wandb
    except ImportError:
        return None
    return wandb


class Tracker:
    """Where a run's scalars go: TensorBoard event files in ``tensorboard_dir`` (when given) and
    W&B offline (when ``wandb`` imports and ``use_wandb``), its files under ``wandb_dir``
    (default: ``tensorboard_dir``, else the working directory). Non-finite values are logged as
    they are: a NaN loss is a fact the dashboards must show."""

    def __init__(self, tensorboard_dir: str | os.PathLike | None = None, *, project: str = "minihpc",
                 config: dict | None = None, name: str | None = None, use_wandb: bool = True,
                 wandb_dir: str | os.PathLike | None = None):
        self.writer = EventWriter(tensorboard_dir) if tensorboard_dir else None
        self.wandb_run = None
        wandb = _wandb() if use_wandb else None
        if wandb is not None:
            directory = wandb_dir or tensorboard_dir or os.getcwd()
            os.makedirs(directory, exist_ok=True)
            self.wandb_run = wandb.init(mode="offline", project=project, name=name, config=config or {},
                                        dir=str(directory), reinit=True)

    @property
    def active(self) -> bool:
        return self.writer is not None or self.wandb_run is not None

    def log(self, step: int, wall_time: float | None = None, **scalars: float | None) -> None:
        values = {tag: float(v) for tag, v in scalars.items() if v is not None}
        if not values:
            return
        if self.writer is not None:
            self.writer.scalars(int(step), values, wall_time)
        if self.wandb_run is not None:
            self.wandb_run.log(values, step=int(step))

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None
        if self.wandb_run is not None:
            self.wandb_run.finish()
            self.wandb_run = None
