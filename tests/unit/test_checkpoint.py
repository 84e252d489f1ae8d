import json

import pytest
import torch

from minihpc.job import checkpoint


def state(step):
    return {"step": step, "weights": torch.full((4,), float(step))}


def test_save_then_load_latest_round_trips(tmp_path):
    for step in (10, 20, 30):
        checkpoint.save(tmp_path, step, state(step))
    found = checkpoint.load_latest(tmp_path)
    assert found.step == 30
    assert torch.equal(found.state["weights"], torch.full((4,), 30.0))
    assert (tmp_path / "LATEST").read_text().strip() == "ckpt-00000030.pt"
    manifest = json.loads((tmp_path / "ckpt-00000030.json").read_text())
    assert manifest["step"] == 30 and len(manifest["sha256"]) == 64


def test_only_the_newest_k_are_kept(tmp_path):
    for step in range(1, 7):
        checkpoint.save(tmp_path, step, state(step), keep=2)
    assert checkpoint.steps(tmp_path) == [5, 6]
    assert not (tmp_path / "ckpt-00000004.json").exists()


def test_a_corrupt_latest_falls_back_to_the_previous_valid_one(tmp_path):
    checkpoint.save(tmp_path, 1, state(1))
    newest = checkpoint.save(tmp_path, 2, state(2))
    data = bytearray(newest.read_bytes())
    data[len(data) // 2] ^= 0xFF
    newest.write_bytes(bytes(data))
    assert not checkpoint.verify(newest)
    assert checkpoint.load_latest(tmp_path).step == 1


def test_a_checkpoint_without_manifest_is_not_trusted(tmp_path):
    checkpoint.save(tmp_path, 1, state(1))
    path = checkpoint.save(tmp_path, 2, state(2))
    path.with_suffix(".json").unlink()
    assert checkpoint.load_latest(tmp_path).step == 1


def test_nothing_to_resume_from(tmp_path):
    assert checkpoint.load_latest(tmp_path) is None
    assert checkpoint.load_latest(tmp_path / "missing") is None


def test_no_temporary_files_are_left_behind(tmp_path):
    checkpoint.save(tmp_path, 5, state(5))
    assert sorted(p.name for p in tmp_path.iterdir()) == [".lock", "LATEST", "ckpt-00000005.json", "ckpt-00000005.pt"]


def test_an_older_attempt_is_fenced_off_once_a_newer_one_claimed_the_directory(tmp_path):
    import pytest

    checkpoint.save(tmp_path, 10, state(10), attempt=1)
    assert checkpoint.load_latest(tmp_path, attempt=2).step == 10  # attempt 2 resumes: claims
    with pytest.raises(checkpoint.Fenced, match="attempt 1 may not write .*attempt 2 has taken over"):
        checkpoint.save(tmp_path, 15, state(15), attempt=1)  # the old attempt came back
    assert checkpoint.steps(tmp_path) == [10] and checkpoint.load_latest(tmp_path).step == 10
    checkpoint.save(tmp_path, 20, state(20), attempt=2)
    assert checkpoint.load_latest(tmp_path).step == 20
    checkpoint.claim(tmp_path, 1)  # claims never move the fence backwards
    assert checkpoint.fence(tmp_path) == 2


def test_the_attempt_comes_from_the_environment(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setenv("MINIHPC_ATTEMPT", "3")
    assert checkpoint.load_latest(tmp_path) is None
    assert checkpoint.fence(tmp_path) == 3
    monkeypatch.setenv("MINIHPC_ATTEMPT", "2")
    with pytest.raises(checkpoint.Fenced):
        checkpoint.save(tmp_path, 1, state(1))


def test_random_states_round_trip_through_a_checkpoint(tmp_path):
    import random

    import numpy
    import torch

    torch.manual_seed(3), random.seed(3), numpy.random.seed(3)
    checkpoint.save(tmp_path, 1, {"rng": checkpoint.rng_state()}, attempt=1)
    expected = (torch.rand(3).tolist(), random.random(), numpy.random.rand())
    torch.manual_seed(99), random.seed(99), numpy.random.seed(99)
    checkpoint.set_rng_state(checkpoint.load_latest(tmp_path, attempt=1).state["rng"])
    assert (torch.rand(3).tolist(), random.random(), numpy.random.rand()) == expected


# --- GPUs: states saved on N GPUs restore on another number of them (issue 34) -----------------

def test_only_the_saved_gpu_states_that_fit_are_restored():
    saved = ["g0", "g1", "g2", "g3"]
    assert checkpoint.cuda_states_to_restore(saved, 2) == ["g0", "g1"]
    assert checkpoint.cuda_states_to_restore(saved[:1], 4) == ["g0"]  # the other GPUs keep their own seeds
    assert checkpoint.cuda_states_to_restore(saved, 0) == []


def test_restoring_four_gpu_states_on_a_two_gpu_run_sets_two(monkeypatch):
    calls = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda s, device: calls.append((s.device.type, device)))
    states = [torch.zeros(16, dtype=torch.uint8) for _ in range(4)]
    checkpoint.set_rng_state({"cuda": states})
    assert calls == [("cpu", 0), ("cpu", 1)]


def test_gpu_states_are_left_alone_without_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cuda, "set_rng_state", lambda *a, **k: pytest.fail("touched CUDA without CUDA"))
    checkpoint.set_rng_state({"cuda": [torch.zeros(16, dtype=torch.uint8)]})


def test_a_generator_state_loaded_onto_another_device_is_brought_back_to_the_cpu(monkeypatch):
    """A checkpoint loaded onto a GPU holds its CPU generator's state there too; torch takes
    generator states from the CPU only."""
    taken = []
    monkeypatch.setattr(torch, "set_rng_state", lambda s: taken.append(s.device.type))

    class Elsewhere:
        def cpu(self):
            return torch.zeros(1, dtype=torch.uint8)

    checkpoint.set_rng_state({"torch": Elsewhere()})
    assert taken == ["cpu"]


def test_load_latest_maps_onto_this_ranks_device_by_default(tmp_path, monkeypatch):
    from minihpc.job import devices

    checkpoint.save(tmp_path, 1, state(1), attempt=1)
    seen = []
    real = torch.load
    monkeypatch.setattr(torch, "load", lambda *a, **k: seen.append(k["map_location"]) or real(*a, **k))
    checkpoint.load_latest(tmp_path, attempt=1)
    monkeypatch.setattr(devices, "load_location", lambda: "meta")
    checkpoint.load_latest(tmp_path, attempt=1)
    checkpoint.load_latest(tmp_path, map_location="cpu", attempt=1)
    assert seen == ["cpu", "meta", "cpu"]
