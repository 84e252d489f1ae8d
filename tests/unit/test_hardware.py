"""Hardware discovery (issue 17): what a node registers (machine.hardware), the speed probe and
how its output is read (machine.speed_probe, node.speed), which fields of a benchmark's progress
report reach the node's record (core.measurements), and how ``nodes --long`` and the node
exporter show them."""

import ctypes
import json
import logging
import math
import sys
import time

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from minihpc.cli.display import LONG_HEADERS, long_rows, render
from minihpc.core import measurements
from minihpc.core.config import Settings, load_settings
from minihpc.core.errors import UsageError
from minihpc.core.launch_spec import LaunchSpec
from minihpc.core.measurements import ProbeError, node_updates, probe_gflops
from minihpc.core.models import NodeStatus
from minihpc.core.telemetry import check_record
from minihpc.machine import hardware, resources, speed_probe
from minihpc.metrics.node import NodeCollector
from minihpc.node import reports, speed

X86 = """processor\t: 0
vendor_id\t: GenuineIntel
cpu family\t: 6
model name\t: Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz
cpu MHz\t\t: 2400.000

processor\t: 1
model name\t: something else entirely
"""

ARM64 = """processor\t: 0
BogoMIPS\t: 243.75
Features\t: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x3
CPU part\t: 0xd0c
CPU revision\t: 1
"""


# -- the CPU model --------------------------------------------------------------------------


@pytest.mark.parametrize("text,model", [
    (X86, "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz"),  # the first CPU's, whitespace collapsed
    (ARM64, "ARM Neoverse-N1"),
    (ARM64.replace("0xd0c", "0xd99"), "ARM part 0xd99"),
    (ARM64.replace("0x41", "0x99"), "CPU implementer 0x99 part 0xd0c"),
    ("processor\t: 0\nHardware\t: BCM2835\nCPU part\t: 0xd03\n", "BCM2835"),
    ("processor\t: 0\ncpu\t\t: POWER9, altivec supported\n", "POWER9, altivec supported"),
    ("processor\t: 0\nmodel name\t:\nHardware\t: Allwinner sun50i\n", "Allwinner sun50i"),
    ("", None),
    ("garbage without colons\n\x00\x01", None),
])
def test_the_cpu_model_is_read_from_cpuinfo_on_every_architecture(text, model):
    assert hardware.model_from_cpuinfo(text) == model


def test_the_cpu_model_never_fails(tmp_path, monkeypatch):
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(X86)
    assert hardware.cpu_model(cpuinfo) == "Intel(R) Xeon(R) CPU E5-2680 v4 @ 2.40GHz"
    monkeypatch.setattr(hardware.platform, "processor", lambda: "  x86_64 ")
    assert hardware.cpu_model(tmp_path / "absent") == "x86_64"
    monkeypatch.setattr(hardware.platform, "processor", lambda: "")
    assert hardware.cpu_model(tmp_path / "absent") == hardware.UNKNOWN
    assert hardware.cpu_model() != ""  # this machine's, whatever it is


# -- CPUs and memory --------------------------------------------------------------------------


@pytest.mark.parametrize("affinity,quota,cpus", [
    (8, None, 8),  # no quota: what the affinity allows
    (8, 0.25, 1),  # a quarter CPU still runs a rank: it rounds up
    (8, 1.5, 2),
    (8, 2.0000001, 2),  # a ratio's rounding is not a third CPU
    (2, 4.0, 2),  # a quota above the CPUs one may run on gives no more
    (0, None, 1),  # at least one, whatever the readers say
    (4, 0.0, 4),
])
def test_usable_cpus_are_the_affinity_capped_by_the_quota(affinity, quota, cpus):
    assert hardware.cpus_usable(affinity, quota) == cpus


def test_usable_cpus_read_affinity_and_the_cgroup(monkeypatch):
    monkeypatch.setattr(hardware.os, "sched_getaffinity", lambda pid: {0, 1, 2, 3})
    monkeypatch.setattr(hardware.resources, "cpu_quota", lambda: 0.25)
    assert (hardware.usable_cpus(), hardware.cpu_limit()) == (1, 0.25)
    monkeypatch.setattr(hardware.resources, "cpu_quota", lambda: None)
    assert (hardware.usable_cpus(), hardware.cpu_limit()) == (4, None)


@pytest.mark.parametrize("files,quota", [
    ({"cpu.max": "25000 100000"}, 0.25),  # cgroup v2: docker run --cpus 0.25
    ({"cpu.max": "max 100000"}, None),
    ({"cpu/cpu.cfs_quota_us": "150000", "cpu/cpu.cfs_period_us": "100000"}, 1.5),  # v1
    ({"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}, None),  # v1's unlimited
    ({}, None),
])
def test_a_fake_cgroup_quota_becomes_whole_cpus(tmp_path, files, quota):
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    assert resources.cpu_quota(tmp_path) == quota
    assert hardware.cpus_usable(16, resources.cpu_quota(tmp_path)) == (16 if quota is None else math.ceil(quota))


def test_memory_is_the_machine_s_capped_by_the_cgroup_limit(tmp_path, monkeypatch):
    assert hardware.memory_usable(32 << 30, None) == 32 << 30
    assert hardware.memory_usable(32 << 30, 6 << 30) == 6 << 30
    assert hardware.memory_usable(4 << 30, 6 << 30) == 4 << 30  # a limit above the machine's
    (tmp_path / "memory.current").write_text("1000\n")
    (tmp_path / "memory.max").write_text(f"{6 << 30}\n")
    assert hardware.memory_usable(32 << 30, resources.cgroup_memory(tmp_path)[1]) == 6 << 30
    (tmp_path / "memory.max").write_text("max\n")
    assert hardware.memory_usable(32 << 30, resources.cgroup_memory(tmp_path)[1]) == 32 << 30
    monkeypatch.setattr(hardware.resources, "cgroup_memory", lambda: (1, 1 << 20))
    assert hardware.memory_bytes() == 1 << 20


# -- GPUs --------------------------------------------------------------------------------------


class FakeNVML:
    def __init__(self, gpus):
        self.found = gpus

    def gpus(self):
        return self.found


def test_gpus_come_from_nvml_else_from_the_device_files(tmp_path):
    nvml = FakeNVML([{"index": 0, "name": "NVIDIA H100 80GB HBM3", "memory_total": 80 << 30, "utilization": 0.0},
                     {"index": 1, "name": None, "memory_total": None}])
    assert hardware.gpus(nvml, tmp_path) == [{"name": "NVIDIA H100 80GB HBM3", "memory_total": 80 << 30},
                                             {"name": "unknown", "memory_total": None}]
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert hardware.gpus(FakeNVML([]), tmp_path) == [{"name": "unknown", "memory_total": None}] * 2
    assert hardware.gpus(FakeNVML([]), tmp_path / "absent") == []


def test_the_gpu_model_names_each_kind_once_and_only_on_a_node_that_offers_gpus():
    h100 = {"name": "NVIDIA H100", "memory_total": 1}
    t4 = {"name": "Tesla T4", "memory_total": 1}
    assert hardware.gpu_model([h100, h100], 2) == "NVIDIA H100"
    assert hardware.gpu_model([h100, t4, h100], 3) == "NVIDIA H100,Tesla T4"
    assert hardware.gpu_model([h100], 0) == ""  # MINIHPC_NODE_GPUS=0: it offers none
    assert hardware.gpu_model([], 2) == ""  # MINIHPC_NODE_GPUS=2 on a machine NVML sees no GPU on


def test_nvml_reads_a_device_name():
    class Lib:
        def nvmlDeviceGetName(self, handle, buffer, length):
            assert length.value == resources.NVML.NAME_BUFFER
            buffer.value = b"NVIDIA A100-SXM4-40GB"
            return 0

    nvml = resources.NVML.__new__(resources.NVML)
    nvml.lib = Lib()
    assert nvml._name(ctypes.c_void_p()) == "NVIDIA A100-SXM4-40GB"
    nvml.lib.nvmlDeviceGetName = lambda handle, buffer, length: 999  # NVML_ERROR_UNKNOWN
    assert nvml._name(ctypes.c_void_p()) is None


# -- the speed probe -----------------------------------------------------------------------------


def test_gflops_count_two_n_cubed_per_multiply():
    assert speed_probe.gflops(256, 1000, 1.0) == pytest.approx(2 * 256**3 * 1000 / 1e9)
    assert speed_probe.gflops(256, 1000, 0.5) == pytest.approx(2 * speed_probe.gflops(256, 1000, 1.0))


def test_the_probe_measures_for_the_wall_time_asked():
    result = speed_probe.measure(threads=1, size=64, seconds=0.2)
    assert result["threads"] == 1 and 0.2 <= result["seconds"] < 1.0
    assert result["gflops"] > 0 and math.isfinite(result["gflops"])


@pytest.mark.parametrize("output,gflops", [
    ('{"gflops": 41.5, "threads": 2, "seconds": 1.0}\n', 41.5),
    ('a warning torch printed\n{"gflops": 7, "threads": 1, "seconds": 1.0}\n\n', 7.0),
])
def test_the_probe_output_s_last_line_holds_the_figure(output, gflops):
    assert probe_gflops(output) == gflops


@pytest.mark.parametrize("output,message", [
    ("", "printed nothing"),
    ("Segmentation fault\n", "not JSON"),
    ('{"gflops": 0}', "not a number > 0"),
    ('{"gflops": -3.0}', "not a number > 0"),
    ('{"gflops": "fast"}', "not a number > 0"),
    ('{"gflops": true}', "not a number > 0"),
    ('{"gflops": NaN}', "not a number > 0"),
    ("[41.5]", "not a number > 0"),
])
def test_probe_output_without_a_figure_is_an_error(output, message):
    with pytest.raises(ProbeError, match=message):
        probe_gflops(output)


def test_run_probe_reads_the_figure_and_says_why_there_is_none():
    assert speed.run_probe(10, [sys.executable, "-c", "print('{\"gflops\": 12.5}')"]) == 12.5
    with pytest.raises(ProbeError, match="exited 3: no torch here"):
        speed.run_probe(10, [sys.executable, "-c", "import sys; print('no torch here', file=sys.stderr); sys.exit(3)"])
    with pytest.raises(ProbeError, match="took more than 0.5s"):
        speed.run_probe(0.5, [sys.executable, "-c", "import time; time.sleep(30)"])
    with pytest.raises(ProbeError, match="did not start"):
        speed.run_probe(10, ["/nonexistent/python"])


class FakeStore:
    def __init__(self):
        self.speeds, self.measures, self.progress = [], [], []

    def record_speed(self, name, gflops, at, hardware=""):
        self.speeds.append((name, gflops, at, hardware))

    def record_measures(self, name, fields):
        self.measures.append((name, fields))

    def record_progress(self, job_id, attempt, node, report):
        self.progress.append((job_id, attempt, node, report))


def test_the_probe_runs_in_the_background_and_a_failure_is_one_warning(caplog):
    store = FakeStore()
    before = time.time()
    speed.probe_in_background(store, "n1", "EPYC|2|-", 10, [sys.executable, "-c", "print('{\"gflops\": 3.0}')"]).join(30)
    [(name, gflops, at, hardware)] = store.speeds
    assert (name, gflops, hardware) == ("n1", 3.0, "EPYC|2|-") and before <= at <= time.time()
    with caplog.at_level(logging.INFO, logger="minihpc.node.speed"):
        speed.probe_in_background(store, "n1", "EPYC|2|-", 10, [sys.executable, "-c", "raise SystemExit(2)"]).join(30)
    assert len(store.speeds) == 1, "a failed probe records nothing"
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1 and "node n1: speed probe failed: the probe exited 2" in warnings[0].getMessage()


def test_a_restarted_agent_probes_again_only_on_other_hardware():
    machine = measurements.signature("AMD EPYC 7B13", 1, 0.25)
    assert machine == "AMD EPYC 7B13|1|0.25" and measurements.signature("x", 2, None) == "x|2|-"
    assert measurements.needs_probe({}, machine)  # never measured
    measured = {"gflops": "24.5", "gflops_for": machine}
    assert not measurements.needs_probe(measured, machine)  # the same CPUs and limit: keep the figure
    assert measurements.needs_probe(measured, measurements.signature("AMD EPYC 7B13", 1, 0.5))  # a new limit
    assert measurements.needs_probe({"gflops": "30", "gflops_job": "7"}, machine)  # a benchmark's, not the probe's
    assert measurements.needs_probe({"gflops": "nan", "gflops_for": machine}, machine)


def test_the_probe_is_on_unless_turned_off():
    assert Settings().speed_probe is True and load_settings(env={}).speed_probe is True
    for off in ("0", "false", "no", "OFF"):
        assert load_settings(env={"MINIHPC_SPEED_PROBE": off}).speed_probe is False
    assert load_settings(env={"MINIHPC_SPEED_PROBE": "1"}).speed_probe is True
    with pytest.raises(UsageError, match="speed_probe='maybe' is not on or off"):
        load_settings(env={"MINIHPC_SPEED_PROBE": "maybe"})


# -- what a benchmark's report sets on the node ----------------------------------------------------


def test_a_benchmark_report_sets_the_node_s_bandwidth_and_speed():
    report = {"step": 0, "at": 1000.0, "gflops": 55.5, "allreduce_busbw_gbps": 1.25}
    assert node_updates(report, 7) == {
        "allreduce_gbps": 1.25, "allreduce_measured_at": 1000.0, "allreduce_job": 7,
        "gflops": 55.5, "gflops_measured_at": 1000.0, "gflops_job": 7}
    report["gflops"] = 0.0  # a speed of 0 is no measurement; the bandwidth still counts
    assert node_updates(report, 7) == {"allreduce_gbps": 1.25, "allreduce_measured_at": 1000.0, "allreduce_job": 7}


@pytest.mark.parametrize("report", [
    {"step": 10, "at": 1000.0, "loss": 0.3, "gflops": 120.0},  # a training job's own gflops: not the node's
    {"step": 0, "at": 1000.0, "allreduce_busbw_gbps": 0.0},  # one node: no bus to measure
    {"step": 0, "at": 1000.0, "allreduce_busbw_gbps": -1.0},
    {"step": 0, "at": 1000.0, "allreduce_busbw_gbps": True},
    {"step": 0, "allreduce_busbw_gbps": 2.0},
])
def test_other_reports_leave_the_node_alone(report):
    assert node_updates(report, 7) == {}


def test_only_a_checked_finite_bandwidth_reaches_the_node():
    now = time.time()
    checked = check_record(f'{{"step": 0, "at": {now}, "allreduce_busbw_gbps": Infinity, "gflops": 9}}', now)
    assert checked.record is not None and "allreduce_busbw_gbps" not in checked.record
    assert node_updates(checked.record, 3) == {}
    checked = check_record(json.dumps({"step": 0, "at": now, "allreduce_busbw_gbps": 2.5}), now)
    assert node_updates(checked.record, 3)["allreduce_gbps"] == 2.5


def test_the_agent_forwards_a_benchmark_report_to_the_node(tmp_path):
    spec = LaunchSpec(job_id=5, attempt=1, name="bench", node="worker-node-1", node_rank=1,
                      nodes=["master-node", "worker-node-1"], master_addr="127.0.0.1", tasks_per_node=1, script="b.py")
    store, path = FakeStore(), tmp_path / "p.progress"
    forwarder = reports.Progress(store, spec, str(path))
    path.write_text(json.dumps({"step": 0, "at": time.time(), "gflops": 40.0, "allreduce_busbw_gbps": 1.5}))
    forwarder.forward()
    assert len(store.progress) == 1
    [(node, fields)] = [m for m in store.measures if m[1]]
    assert node == "worker-node-1"
    assert (fields["allreduce_gbps"], fields["allreduce_job"], fields["gflops"]) == (1.5, 5, 40.0)
    path.write_text(json.dumps({"step": 1, "at": time.time(), "loss": 0.5}))
    forwarder.forward()
    assert len(store.progress) == 2 and not [m for m in store.measures[1:] if m[1]]


def test_record_fields_read_back_as_numbers_or_nothing():
    assert measurements.number("2.5") == 2.5
    assert [measurements.number(v) for v in (None, "", "nan", "inf", "fast")] == [None] * 5


# -- what shows them ---------------------------------------------------------------------------------


def test_nodes_long_shows_a_dash_for_what_is_not_known():
    known = NodeStatus("worker-node-1", "a", True, cpus=2, memory_bytes=6 << 30, gpus=2, cpu_model="AMD EPYC 7B13",
                       cpu_limit=0.25, gpu_model="NVIDIA H100", gflops=41.26, allreduce_gbps=1.234)
    bare = NodeStatus("worker-node-2", "b", False, cpus=4, memory_bytes=1 << 30)
    lines = render(LONG_HEADERS, long_rows([known, bare])).splitlines()
    assert lines[0].split() == ["NODE", "STATE", "CPUS", "CPU-LIMIT", "MEMORY", "GPUS", "GFLOPS", "ALLREDUCE-GB/S",
                                "CPU-MODEL", "GPU-MODEL"]
    assert lines[1].split() == ["worker-node-1", "idle", "2", "0.25", "6.0GiB", "2", "41.3", "1.23", "AMD", "EPYC",
                                "7B13", "NVIDIA", "H100"]
    assert lines[2].split() == ["worker-node-2", "down", "4", "-", "1.0GiB", "0", "-", "-", "-", "-"]


def _scrape(record) -> str:
    registry = CollectorRegistry()
    registry.register(NodeCollector("n1", lambda: None, record=lambda: record, container=False))
    return generate_latest(registry).decode()


def test_the_exporter_shows_the_hardware_and_each_figure_only_when_known():
    body = _scrape(NodeStatus("n1", "a", True, cpu_model="AMD EPYC", gpu_model="", cpu_limit=0.5, gflops=40.0,
                              allreduce_gbps=1.5))
    assert 'minihpc_node_info{cpu_model="AMD EPYC",gpu_model="",node="n1"} 1.0' in body
    assert 'minihpc_node_cpu_limit_cpus{node="n1"} 0.5' in body
    assert 'minihpc_node_compute_flops{node="n1"} 4e+10' in body  # base units: 40 GFLOP/s
    assert 'minihpc_node_allreduce_busbw_bytes_per_second{node="n1"} 1.5e+09' in body  # 1.5 GB/s
    body = _scrape(NodeStatus("n1", "a", True, cpu_model="AMD EPYC"))
    assert "minihpc_node_info{" in body
    for name in ("cpu_limit_cpus", "compute_flops", "allreduce_busbw_bytes_per_second"):
        assert f"minihpc_node_{name}" not in body
    body = _scrape(None)  # Redis away: the rest of the scrape still comes
    assert "minihpc_node_info" not in body and 'minihpc_node_allocated{node="n1"} 0.0' in body


def test_the_exporter_says_which_job_holds_which_gpu_without_a_job_label_on_every_series():
    record = NodeStatus("n1", "a", True, gpus=3, gpu_devices=[4, 5, 6])
    registry = CollectorRegistry()
    registry.register(NodeCollector("n1", lambda: 7, record=lambda: record, container=False,
                                    held_gpus=lambda: (7, [4, 5])))
    body = generate_latest(registry).decode()
    assert 'minihpc_gpu_allocated{gpu="4",node="n1"} 1.0' in body
    assert 'minihpc_gpu_allocated{gpu="6",node="n1"} 0.0' in body
    assert 'minihpc_gpu_job_info{gpu="5",job_id="7",node="n1"} 1.0' in body
    assert 'gpu="6",job_id' not in body
    idle = _scrape(record)
    assert 'minihpc_gpu_allocated{gpu="4",node="n1"} 0.0' in idle and "minihpc_gpu_job_info{" not in idle
    assert "minihpc_gpu_allocated{" not in _scrape(NodeStatus("n1", "a", True))  # no GPU: no series
