"""A node's status as the master reads it a thousand times a pass (state.nodes): built from
its record without the frozen dataclass's constructor, it must be the status the constructor
would give, every field included."""

import dataclasses

from minihpc.core.models import NodeStatus
from minihpc.state.nodes import _fixed, _node_status

RECORD = {"addr": "10.0.0.7", "cpus": "8", "memory_bytes": "1024", "gpus": "2", "gpu_devices": "1,3",
          "registered_at": "100.5", "metrics": "10.0.0.7:9100", "cpu_model": "EPYC", "cpu_limit": "3.5",
          "gpu_model": "H200", "gflops": "12.5", "allreduce_gbps": "40", "simulated": "1"}


def test_a_status_built_from_its_record_is_the_one_its_constructor_gives():
    expected = NodeStatus("n7", "10.0.0.7", alive=True, job=12, drain_reason="maintenance", cpus=8,
                          memory_bytes=1024, last_heartbeat=200.25, registered_at=100.5, metrics="10.0.0.7:9100",
                          gpus=2, gpu_devices=[1, 3], cpu_model="EPYC", cpu_limit=3.5, gpu_model="H200",
                          gflops=12.5, allreduce_gbps=40.0, simulated=True)
    fixed = _fixed("n7", RECORD)
    for built in (_node_status("n7", RECORD, 1, b"12", b"maintenance", "200.25"),
                  _node_status("n7", RECORD, 1, b"12", b"maintenance", "200.25", fixed=fixed)):
        assert built == expected
        assert {f.name: getattr(built, f.name) for f in dataclasses.fields(NodeStatus)} == dataclasses.asdict(expected)
    idle = _node_status("n7", {}, None, None, None, None, fixed=_fixed("n7", {}))
    assert idle == NodeStatus("n7", "n7", alive=False)
    assert idle.state.value == "down"


def test_statuses_built_from_one_kept_record_share_nothing_mutable():
    fixed = _fixed("n7", RECORD)
    first = _node_status("n7", RECORD, 1, None, None, "1", fixed=fixed)
    second = _node_status("n7", RECORD, 1, None, None, "2", fixed=fixed)
    first.gpu_devices.append(9)
    assert second.gpu_devices == [1, 3] and fixed["gpu_devices"] == [1, 3]
