from minihpc.core.launch_spec import LaunchSpec, job_env, torchrun_args


def spec(**kw):
    base = dict(
        job_id=12, attempt=2, name="train", node="worker-node-1", node_rank=1,
        nodes=["master-node", "worker-node-1", "worker-node-2"], master_addr="10.0.0.2",
        tasks_per_node=2, script="/spool/job-12/train.py", args=["--epochs", "1"],
        source_dir="/home/u/jobs", checkpoint_dir="/ckpt/job-12",
    )
    base.update(kw)
    return LaunchSpec(**base)


def test_static_rendezvous_arguments():
    args = torchrun_args(spec(), 29555)
    assert args[:5] == [
        "--nnodes=3", "--node-rank=1", "--nproc-per-node=2",
        "--master-addr=10.0.0.2", "--master-port=29555",
    ]
    assert args[-4:] == ["minihpc.node.rank", "/spool/job-12/train.py", "--epochs", "1"]


def test_job_environment_has_minihpc_and_slurm_names():
    env = job_env(spec(), 29555, {"PATH": "/bin", "PYTHONPATH": "/x"})
    assert env["MINIHPC_JOB_ID"] == env["SLURM_JOB_ID"] == "12"
    assert env["MINIHPC_NODELIST"] == "master-node,worker-node-1,worker-node-2"
    assert env["SLURM_JOB_NODELIST"] == "master-node,worker-node-[1-2]"
    assert env["SLURM_NTASKS"] == "6"
    assert env["SLURM_JOB_NUM_NODES"] == "3"
    assert env["MINIHPC_CHECKPOINT_DIR"] == "/ckpt/job-12"
    assert env["PYTHONPATH"] == "/home/u/jobs:/x"
    assert env["PATH"] == "/bin"


def test_a_job_gets_no_credentials_of_the_daemons():
    """Jobs are untrusted: the agent's Redis URL (with the password) and API token stay with it."""
    base = {"PATH": "/bin", "MINIHPC_REDIS_URL": "redis://:secret@redis:6379/0", "MINIHPC_TOKEN": "mhpc_x",
            "REDISCLI_AUTH": "secret", "HOME": "/home/minihpc"}
    env = job_env(spec(), 29555, base)
    assert "secret" not in repr(env) and "mhpc_x" not in repr(env)
    assert env["HOME"] == "/home/minihpc"
    assert "PYTHONSAFEPATH" not in job_env(spec(), 29555, dict(base, PYTHONSAFEPATH="1")), \
        "a job's script imports the modules beside it; only the daemons run with a safe path"


def test_payload_round_trip():
    s = spec()
    assert LaunchSpec.from_payload(s.to_payload()) == s
