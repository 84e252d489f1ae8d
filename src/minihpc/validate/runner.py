"""One validation run, end to end: check the flags, start the ranks (locally or on the
cluster), merge their records into the run report, run the run-only detectors, write the
report (and TensorBoard / W&B when asked).

``epochs`` (``--epochs``, the parameter-server config's ``num_epochs``), when set, decides the
steps: whole passes over the training data (:func:`settle`)."""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

from minihpc.core.errors import MinihpcError, UsageError
from minihpc.job import devices
from minihpc.job.tracking import Tracker
from minihpc.validate import aggregate, detect, inject, launch, outputs, workload
from minihpc.validate.records import read_rank_records

RUN_DEFAULTS = {
    "workers": 2, "steps": 20, "epochs": None, "batch_size": 64, "seed": 42, "workload": "synthetic",
    "model": None, "hidden": "64,64", "samples": workload.SAMPLES, "in_features": None, "out_features": None,
    "lr": 0.01, "data_dir": None, "checksum_every": 5, "eval_steps": 0, "track_gradients": True, "inject": None,
    "fault_rank": 1, "fault_step": 0, "strategy": "ddp", "ps_timeout": 5.0, "ps_host": None, "ps_connect": None,
    "ps_port": 0, "step_timeout": 10.0, "pg_timeout": 60.0, "cluster": False, "tasks_per_node": 1,
    "output": None, "tensorboard": None, "keep_records": False, "backend": "auto",
}
"""Every flag of ``validate run`` and its default (a --config file may set any of them, and
``out_features``: model.out, checked against the workload). ``in_features`` None: the
workload's own (16 synthetic, 784 MNIST); ``model`` None: the MLP (MNIST: its CNN);
``ps_host`` / ``ps_connect`` None: 127.0.0.1, or with --cluster 0.0.0.0 / this host's name.
``backend`` auto: each rank decides (minihpc.validate.worker.placement): NCCL on its own GPU
where it has one, else the spec's gloo on the CPU; a --cluster job asks for GPUs only when
``nccl`` is named."""

WORKER_FLAGS = ("steps", "batch_size", "seed", "workload", "model", "hidden", "samples", "in_features", "lr",
                "data_dir", "checksum_every", "eval_steps", "inject", "fault_rank", "fault_step", "strategy",
                "pg_timeout", "backend")


class RunFailed(MinihpcError):
    """The ranks ended without recording a step."""


def _at_least(cfg: dict, minimums: dict) -> None:
    for name, low in minimums.items():
        if cfg[name] is not None and cfg[name] < low:
            raise UsageError(f"--{name.replace('_', '-')} must be at least {low}, got {cfg[name]}")


def check(cfg: dict) -> None:
    """UsageError for flags that cannot make a run."""
    _at_least(cfg, {"steps": 1, "epochs": 1, "eval_steps": 0, "checksum_every": 0, "ps_port": 0,
                    "tasks_per_node": 1, "samples": 1})
    for name in ("step_timeout", "ps_timeout", "pg_timeout"):
        if not cfg[name] > 0:
            raise UsageError(f"--{name.replace('_', '-')} must be a positive number of seconds, got {cfg[name]}")
    if cfg["ps_port"] > 65535:
        raise UsageError(f"--ps-port {cfg['ps_port']} is not a TCP port (0-65535; 0: any free one)")
    workload.check_batch(cfg["batch_size"], cfg["workers"])
    if cfg["workload"] not in workload.WORKLOADS:
        raise UsageError(f"--workload {cfg['workload']!r} is not one of {', '.join(workload.WORKLOADS)}")
    kind = workload.model_kind(cfg["model"], cfg["workload"])
    workload.check_shape(cfg["workload"], cfg["in_features"], cfg["out_features"])
    if kind == "mlp":
        workload.parse_hidden(cfg["hidden"])
    if cfg["workload"] == "mnist":
        workload.mnist_root(cfg["data_dir"])
    if cfg["strategy"] not in ("ddp", "parameter-server"):
        raise UsageError(f"--strategy {cfg['strategy']!r} is not ddp or parameter-server")
    check_backend(cfg["backend"], cfg["strategy"])
    inject.check(cfg["inject"], cfg["fault_rank"], cfg["fault_step"], cfg["workers"], cfg["steps"])
    if cfg["cluster"] and cfg["workers"] % cfg["tasks_per_node"]:
        raise UsageError(f"--workers {cfg['workers']} is not a multiple of --tasks-per-node {cfg['tasks_per_node']}")


def check_backend(backend: str, strategy: str) -> None:
    """UsageError for a --backend that is no backend, or NCCL without DDP's process group."""
    if backend not in devices.BACKENDS:
        raise UsageError(f"--backend {backend!r} is not one of {', '.join(devices.BACKENDS)}")
    if backend == "nccl" and strategy != "ddp":
        raise UsageError("--backend nccl is for --strategy ddp: the parameter server has no process group")


def check_local_gpus(backend: str, workers: int, gpus: int) -> None:
    """UsageError when a local run was asked for NCCL and this machine cannot give each of its
    ``workers`` ranks a GPU (``gpus``: what torch sees here)."""
    if backend != "nccl":
        return
    try:
        devices.choose_backend("nccl", "cuda" if gpus else "cpu", gpus, workers)
    except ValueError as exc:
        raise UsageError(f"{exc} (torch sees {gpus} GPU(s) here; --workers {workers})") from None


def local_gpus() -> int:
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def settle(cfg: dict) -> dict:
    """The run's full configuration: defaults filled in, ``steps`` from ``epochs`` when that is
    set; UsageError (see :func:`check`) if it cannot make a run."""
    cfg = {**RUN_DEFAULTS, **cfg}
    _at_least(cfg, {"epochs": 1})
    if cfg["epochs"] is not None:
        workload.check_batch(cfg["batch_size"], cfg["workers"])
        per_epoch = workload.steps_per_epoch(cfg["workload"], cfg["samples"], cfg["batch_size"], cfg["workers"])
        cfg["steps"] = cfg["epochs"] * per_epoch
    check(cfg)
    return cfg


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
        address = f"{cfg['ps_connect'] or (socket.gethostname() if cfg['cluster'] else '127.0.0.1')}:{port}"
    if cfg["cluster"]:
        nodes = cfg["workers"] // cfg["tasks_per_node"]
        gpus = cfg["tasks_per_node"] if cfg["backend"] == "nccl" else 0  # a GPU per rank, on every node
        return launch.run_cluster(settings, nodes, cfg["tasks_per_node"], worker_args(cfg, None, address),
                                  cfg["step_timeout"], gpus=gpus)
    check_local_gpus(cfg["backend"], cfg["workers"], local_gpus() if cfg["backend"] == "nccl" else 0)
    record_dir = Path(tempfile.mkdtemp(prefix="minihpc-validate-"))
    return launch.run_local(cfg["workers"], worker_args(cfg, record_dir, address), record_dir,
                            cfg["step_timeout"]), record_dir


def execute(cfg: dict, settings=None) -> dict:
    """Run once; the run report (written to cfg["output"] when set)."""
    cfg = settle(cfg)
    server = None
    if cfg["strategy"] == "parameter-server":
        from minihpc.validate.ps import Server

        host = cfg["ps_host"] or ("0.0.0.0" if cfg["cluster"] else "127.0.0.1")
        try:
            server = Server(cfg["workers"], cfg["ps_timeout"], host=host, port=cfg["ps_port"]).start()
        except OSError as exc:
            raise UsageError(f"the parameter server cannot listen on {host}:{cfg['ps_port']} "
                             f"(--ps-host / --ps-port: {exc.strerror or exc})") from None
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
    """The run's per-step scalars to TensorBoard (``--tensorboard``) and, when wandb is
    installed, W&B offline; then the report file (saved elsewhere, and said so, if it cannot
    be written where asked)."""
    tracker = Tracker(cfg.get("tensorboard"), project="minihpc-validate", config=run["config"])
    if tracker.active:
        for step, values in step_scalars(run, cfg.get("track_gradients", True)):
            tracker.log(step, **values)
    tracker.close()
    if cfg.get("output"):
        outputs.write_report(cfg["output"], run)


def step_scalars(run: dict, track_gradients: bool = True) -> list[tuple[int, dict[str, float]]]:
    """Loss, throughput and step time per step; each rank's local gradient norm (unless
    ``track_gradients`` is off); the held-out loss where ``--eval-steps`` took one."""
    evals = {e["step"]: e["test_loss"] for e in run.get("eval", [])}
    out = []
    for i, s in enumerate(run["steps"]):
        values = {"loss": s["loss"], "throughput_samples_per_sec": s["throughput_samples_per_sec"],
                  "step_time_ms": s["step_time_ms"]}
        if s["step"] in evals:
            values["eval_loss"] = evals[s["step"]]
        for rank, series in run["per_rank"].items():
            if track_gradients and i < len(series["local_grad_norm"]):
                values[f"grad_norm/rank_{rank}"] = series["local_grad_norm"][i]
        out.append((s["step"], values))
    return out


def format_summary(run: dict, path: str | None) -> str:
    """The spec's lines (``✓ Run complete!``, total time, final loss, average throughput, where
    the metrics went), then ours."""
    a = run
    done = a["num_steps"] == a["config"]["steps"]
    lines = ["✓ Run complete!" if done else f"✗ Run incomplete: {a['num_steps']} of {a['config']['steps']} steps",
             f"  Total time: {a['total_time_sec']:.2f}s"]
    if a["final_loss"] is not None:
        lines.append(f"  Final loss: {a['final_loss']:.6f}")
    lines += [f"  Avg throughput: {a['average_throughput_samples_per_sec']:.1f} samples/sec"]
    if path:
        lines.append(f"  Metrics saved to: {path}")
    lines += ["",
              f"{a['num_workers']} worker(s), {a['strategy']}{' over ' + a['backend'] if a.get('backend') else ''}, "
              f"{a['workload']}: {a['num_steps']} of "
              f"{a['config']['steps']} steps in {a['total_time_sec']:.2f} s",
              f"final loss {a['final_loss']:.6g}, average loss {a['average_loss']:.6g}" if a["final_loss"] is not None
              else "no step completed",
              f"throughput {a['average_throughput_samples_per_sec']:.0f} samples/s, step time p50 "
              f"{a['step_time_p50_ms'] or 0:.1f} ms, p95 {a['step_time_p95_ms'] or 0:.1f} ms"]
    if a.get("eval"):
        lines.append(f"held-out loss {a['eval'][-1]['test_loss']:.6g} at step {a['eval'][-1]['step']} "
                     f"({len(a['eval'])} evaluation(s))")
    if "parameter_server" in run:
        ps = run["parameter_server"]
        lines.append(f"parameter server: {ps['skipped_total']} worker-step(s) skipped by the {ps['timeout_sec']:g} s "
                     f"timeout in {ps['steps_with_skips']} step(s)")
    for d in run["detections"]:
        lines.append(f"DETECTED {d['detector']}: {d['why']}")
    return "\n".join(lines)
