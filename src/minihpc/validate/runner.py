"""One validation run, end to end: check the flags, start the ranks (locally or on the
cluster), merge their records into the run report, run the run-only detectors, write the
report (and TensorBoard / W&B when asked)."""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

from minihpc.core.errors import MinihpcError, UsageError
from minihpc.job.tracking import Tracker
from minihpc.validate import aggregate, detect, inject, launch, workload
from minihpc.validate.records import read_rank_records, write_json

RUN_DEFAULTS = {
    "workers": 2, "steps": 20, "batch_size": 64, "seed": 42, "workload": "synthetic", "hidden": "64,64",
    "samples": workload.SAMPLES, "in_features": workload.IN_FEATURES, "lr": 0.01, "data_dir": None,
    "checksum_every": 5, "inject": None, "fault_rank": 1, "fault_step": 0, "strategy": "ddp",
    "ps_timeout": 5.0, "step_timeout": 10.0, "pg_timeout": 60.0, "cluster": False, "tasks_per_node": 1,
    "output": None, "tensorboard": None, "keep_records": False,
}
"""Every flag of ``validate run`` and its default (a --config file may set any of them)."""

WORKER_FLAGS = ("steps", "batch_size", "seed", "workload", "hidden", "samples", "in_features", "lr", "data_dir",
                "checksum_every", "inject", "fault_rank", "fault_step", "strategy", "pg_timeout")


class RunFailed(MinihpcError):
    """The ranks ended without recording a step."""


def check(cfg: dict) -> None:
    """UsageError for flags that cannot make a run."""
    if cfg["steps"] < 1:
        raise UsageError(f"--steps must be at least 1, got {cfg['steps']}")
    workload.check_batch(cfg["batch_size"], cfg["workers"])
    if cfg["workload"] not in workload.WORKLOADS:
        raise UsageError(f"--workload {cfg['workload']!r} is not one of {', '.join(workload.WORKLOADS)}")
    if cfg["workload"] == "synthetic":
        workload.parse_hidden(cfg["hidden"])
    else:
        workload.mnist_root(cfg["data_dir"])
    if cfg["strategy"] not in ("ddp", "parameter-server"):
        raise UsageError(f"--strategy {cfg['strategy']!r} is not ddp or parameter-server")
    inject.check(cfg["inject"], cfg["fault_rank"], cfg["fault_step"], cfg["workers"], cfg["steps"])
    if cfg["cluster"] and cfg["workers"] % cfg["tasks_per_node"]:
        raise UsageError(f"--workers {cfg['workers']} is not a multiple of --tasks-per-node {cfg['tasks_per_node']}")


def worker_args(cfg: dict, record_dir: Path | None, ps_address: str | None) -> list[str]:
    args = []
    for name in WORKER_FLAGS:
        if cfg.get(name) is not None:
            args += [f"--{name.replace('_', '-')}", str(cfg[name])]
    if record_dir is not None:
        args += ["--record-dir", str(record_dir)]
    if ps_address:
        args += ["--ps-addr", ps_address]
    return args


def _launch(cfg: dict, settings, server) -> tuple[launch.Launched, Path]:
    address = None
    if server is not None:
        port = server.address.rsplit(":", 1)[1]
        address = f"{socket.gethostname() if cfg['cluster'] else '127.0.0.1'}:{port}"
    if cfg["cluster"]:
        nodes = cfg["workers"] // cfg["tasks_per_node"]
        return launch.run_cluster(settings, nodes, cfg["tasks_per_node"], worker_args(cfg, None, address),
                                  cfg["step_timeout"])
    record_dir = Path(tempfile.mkdtemp(prefix="minihpc-validate-"))
    return launch.run_local(cfg["workers"], worker_args(cfg, record_dir, address), record_dir,
                            cfg["step_timeout"]), record_dir


def execute(cfg: dict, settings=None) -> dict:
    """Run once; the run report (written to cfg["output"] when set)."""
    cfg = {**RUN_DEFAULTS, **cfg}
    check(cfg)
    server = None
    if cfg["strategy"] == "parameter-server":
        from minihpc.validate.ps import Server

        server = Server(cfg["workers"], cfg["ps_timeout"], host="0.0.0.0" if cfg["cluster"] else "127.0.0.1").start()
    try:
        launched, record_dir = _launch(cfg, settings, server)
    finally:
        if server is not None:
            server.close()
    records = read_rank_records(record_dir)
    run = aggregate.merge(records, cfg["workers"], {k: v for k, v in cfg.items() if k != "keep_records"})
    run["launch"] = {"returncode": launched.returncode, "timed_out": launched.timed_out,
                     "heartbeats": {str(r): b for r, b in (launched.stalled or {}).items()},
                     "job_id": launched.job_id, "job_state": launched.job_state,
                     "record_dir": str(record_dir) if cfg["keep_records"] or cfg["cluster"] else None}
    if server is not None:
        run["parameter_server"] = server.summary()
    run["detections"] = detect.detect_run(run)
    if not run["steps"] and not launched.timed_out:
        tail = launch.log_tail(record_dir)
        job = f" (job {launched.job_id} {launched.job_state}; see minihpc logs {launched.job_id})" if launched.job_id else ""
        raise RunFailed(f"the validation ranks exited {launched.returncode} without a step{job}"
                        f"{(': ' + tail.splitlines()[-1] + f' (log: {record_dir}/torchrun.log)') if tail else ''}")
    if not (cfg["keep_records"] or cfg["cluster"]):
        shutil.rmtree(record_dir, ignore_errors=True)
    publish(run, cfg)
    return run


def publish(run: dict, cfg: dict) -> None:
    """The report file, and the run's per-step scalars to TensorBoard (``--tensorboard``) and, when
    wandb is installed, W&B offline."""
    if cfg.get("output"):
        write_json(cfg["output"], run)
    tracker = Tracker(cfg.get("tensorboard"), project="minihpc-validate", config=run["config"])
    if tracker.active:
        for step, values in step_scalars(run):
            tracker.log(step, **values)
    tracker.close()


def step_scalars(run: dict) -> list[tuple[int, dict[str, float]]]:
    """Loss, throughput and step time per step; each rank's local gradient norm."""
    out = []
    for i, s in enumerate(run["steps"]):
        values = {"loss": s["loss"], "throughput_samples_per_sec": s["throughput_samples_per_sec"],
                  "step_time_ms": s["step_time_ms"]}
        for rank, series in run["per_rank"].items():
            if i < len(series["local_grad_norm"]):
                values[f"grad_norm/rank_{rank}"] = series["local_grad_norm"][i]
        out.append((s["step"], values))
    return out


def format_summary(run: dict, path: str | None) -> str:
    a = run
    lines = [f"{a['num_workers']} worker(s), {a['strategy']}, {a['workload']}: {a['num_steps']} of "
             f"{a['config']['steps']} steps in {a['total_time_sec']:.2f} s",
             f"final loss {a['final_loss']:.6g}, average loss {a['average_loss']:.6g}" if a["final_loss"] is not None
             else "no step completed",
             f"throughput {a['average_throughput_samples_per_sec']:.0f} samples/s, step time p50 "
             f"{a['step_time_p50_ms'] or 0:.1f} ms, p95 {a['step_time_p95_ms'] or 0:.1f} ms"]
    if "parameter_server" in run:
        ps = run["parameter_server"]
        lines.append(f"parameter server: {ps['skipped_total']} worker-step(s) skipped by the {ps['timeout_sec']:g} s "
                     f"timeout in {ps['steps_with_skips']} step(s)")
    for d in run["detections"]:
        lines.append(f"DETECTED {d['detector']}: {d['why']}")
    if path:
        lines.append(f"written to {path}")
    return "\n".join(lines)
