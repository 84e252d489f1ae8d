import struct
import sys
import types

import pytest

from minihpc.job import tensorboard
from minihpc.job.tracking import Tracker
from minihpc.validate.runner import publish

RUN = {"steps": [{"step": 0, "loss": 0.5, "throughput_samples_per_sec": 1000.0, "step_time_ms": 4.0},
                 {"step": 1, "loss": 0.25, "throughput_samples_per_sec": 1200.0, "step_time_ms": 3.5}],
       "per_rank": {"0": {"local_grad_norm": [2.0, 1.5]}, "1": {"local_grad_norm": [2.5, 1.0]}},
       "config": {"workers": 2}}


def test_crc32c_known_answer():
    assert tensorboard.crc32c(b"123456789") == 0xE3069283
    assert tensorboard.crc32c(b"") == 0


def only_event_file(directory):
    files = list(directory.glob("events.out.tfevents.*"))
    assert len(files) == 1, files
    return files[0]


def test_a_validation_run_goes_to_tensorboard_step_by_step(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # not installed
    publish(RUN, {"tensorboard": tmp_path / "tb"})
    version, scalars = tensorboard.read_scalars(only_event_file(tmp_path / "tb"))
    assert version == "brain.Event:2"
    got = {(step, tag): value for step, tag, value in scalars}
    assert got[(0, "loss")] == 0.5 and got[(1, "loss")] == 0.25
    assert got[(1, "throughput_samples_per_sec")] == 1200.0
    assert got[(0, "grad_norm/rank_1")] == 2.5 and len(got) == 10


def test_nothing_is_written_without_a_directory_or_wandb(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)
    monkeypatch.chdir(tmp_path)
    tracker = Tracker(None)
    assert not tracker.active
    tracker.log(1, loss=0.1)
    tracker.close()
    assert list(tmp_path.iterdir()) == []


def test_with_wandb_installed_it_logs_offline_into_the_run_directory(tmp_path, monkeypatch):
    calls = []

    class FakeRun:  # the edge: W&B's client, which this machine does not have
        def log(self, values, step):
            calls.append(("log", step, values))

        def finish(self):
            calls.append(("finish",))

    def init(**kwargs):
        calls.append(("init", kwargs))
        return FakeRun()

    monkeypatch.setitem(sys.modules, "wandb", types.SimpleNamespace(init=init))
    tracker = Tracker(tmp_path / "tb", project="mnist", config={"lr": 0.1})
    tracker.log(3, loss=float("nan"), samples_per_second=900, grad_norm=None)
    tracker.close()
    init_kwargs = calls[0][1]
    assert init_kwargs["mode"] == "offline" and init_kwargs["dir"] == str(tmp_path / "tb")
    assert init_kwargs["project"] == "mnist" and init_kwargs["config"] == {"lr": 0.1}
    assert calls[1][:2] == ("log", 3) and set(calls[1][2]) == {"loss", "samples_per_second"}
    assert calls[-1] == ("finish",)
    _, scalars = tensorboard.read_scalars(only_event_file(tmp_path / "tb"))
    assert {tag for _, tag, _ in scalars} == {"loss", "samples_per_second"}


def test_first_record_is_framed_as_tensorflow_expects(tmp_path):
    writer = tensorboard.EventWriter(tmp_path)
    writer.close()
    data = writer.path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    assert struct.unpack("<I", data[8:12])[0] == tensorboard.masked_crc(data[:8])
    body = data[12:12 + length]
    assert dict(tensorboard.fields(body))[3] == b"brain.Event:2"
    assert len(data) == 16 + length


def test_a_corrupt_record_is_refused(tmp_path):
    path = tmp_path / "events"
    data = bytearray(tensorboard.frame(tensorboard.event(1.0, 3, scalars={"loss": 1.0})))
    data[-6] ^= 1
    path.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="checksum"):
        tensorboard.read_records(path)
