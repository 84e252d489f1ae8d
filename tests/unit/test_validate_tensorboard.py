import struct

import pytest

from minihpc.validate import tensorboard


def test_crc32c_known_answer():
    assert tensorboard.crc32c(b"123456789") == 0xE3069283
    assert tensorboard.crc32c(b"") == 0


def test_event_file_round_trip(tmp_path):
    run = {"steps": [{"step": 0, "loss": 0.5, "throughput_samples_per_sec": 1000.0, "step_time_ms": 4.0},
                     {"step": 1, "loss": 0.25, "throughput_samples_per_sec": 1200.0, "step_time_ms": 3.5}],
           "per_rank": {"0": {"local_grad_norm": [2.0, 1.5]}, "1": {"local_grad_norm": [2.5, 1.0]}}}
    path = tensorboard.write_run(tmp_path / "tb", run)
    assert path.name.startswith("events.out.tfevents.")
    version, scalars = tensorboard.read_scalars(path)
    assert version == "brain.Event:2"
    got = {(step, tag): value for step, tag, value in scalars}
    assert got[(0, "loss")] == 0.5 and got[(1, "loss")] == 0.25
    assert got[(1, "throughput_samples_per_sec")] == 1200.0
    assert got[(0, "grad_norm/rank_1")] == 2.5 and len(got) == 10


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
