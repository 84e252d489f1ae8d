import json

import torch

from minihpc import checkpoint


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
    assert sorted(p.name for p in tmp_path.iterdir()) == ["LATEST", "ckpt-00000005.json", "ckpt-00000005.pt"]
