import pytest

from minihpc.core.errors import UsageError
from minihpc.validate import inject, workload


@pytest.mark.parametrize("world", [1, 2, 3, 4])
def test_local_batches_together_are_the_global_batch(world):
    batch, size = 12, workload.dataset_size(100, 12)
    assert size == 96
    for step in range(10):
        union = sorted(i for r in range(world) for i in workload.local_positions(step, r, world, batch, size))
        assert union == list(range((step * batch) % size, (step * batch) % size + batch))


@pytest.mark.parametrize("world", [2, 4])
def test_distributed_sampler_yields_the_same_positions(world):
    import torch

    data = torch.utils.data.TensorDataset(torch.arange(48.0))
    for rank in range(world):
        got = [b[0].tolist() for b in workload.loader(data, rank, world, 8)]
        want = [[float(i) for i in workload.local_positions(step, rank, world, 8, 48)] for step in range(6)]
        assert got == want


def test_batch_must_split_evenly():
    assert workload.check_batch(64, 4) == 16
    with pytest.raises(UsageError, match="not divisible by 3 workers"):
        workload.check_batch(64, 3)


def test_hidden_layers():
    assert workload.parse_hidden("64,32") == [64, 32]
    assert workload.parse_hidden("128") == [128]  # the parameter-server spec's SimpleNN: one hidden layer
    for bad in ("", "a,b", "0,4"):
        with pytest.raises(UsageError):
            workload.parse_hidden(bad)


def test_synthetic_data_is_a_function_of_the_seed():
    a, b, c = workload.synthetic(42, 32, 4), workload.synthetic(42, 32, 4), workload.synthetic(43, 32, 4)
    assert a.tensors[1].equal(b.tensors[1]) and not a.tensors[1].equal(c.tensors[1])


def test_mnist_without_data_names_prepare_data(tmp_path):
    with pytest.raises(UsageError, match="make prepare-data"):
        workload.mnist_root(str(tmp_path))


def test_bitflip_changes_exactly_one_bit():
    import struct

    before, after = 0.75, inject.flip(0.75, inject.FLIP_BIT)
    diff = struct.unpack("<Q", struct.pack("<d", before))[0] ^ struct.unpack("<Q", struct.pack("<d", after))[0]
    assert bin(diff).count("1") == 1 and inject.flip(after, inject.FLIP_BIT) == before


def test_fault_flags_are_checked():
    assert inject.check("nan", 1, 5, 3, 20) == inject.Fault("nan", 1, 5)
    for args in (("melt", 1, 5, 3, 20), ("nan", 3, 5, 3, 20), ("nan", 1, 20, 3, 20)):
        with pytest.raises(UsageError):
            inject.check(*args)
