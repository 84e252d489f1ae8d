"""Launch tasks as an agent checks them before it runs anything (core.launch_spec)."""


def test_an_agent_refuses_a_launch_task_whose_paths_are_not_the_jobs():
    """Issue 33: the agent runs as root; a launch task (one node's Redis password could queue
    one) must not make it create, open or hand over files elsewhere."""
    import dataclasses

    from minihpc.core.launch_spec import LaunchSpec, path_problem

    cluster = {"log_dir": "/shared/logs", "checkpoint_dir": "/shared/models", "spool_dir": "/shared/jobs"}
    spec = LaunchSpec(job_id=7, attempt=1, name="t", node="n1", node_rank=0, nodes=["n1"], master_addr="n1",
                      tasks_per_node=1, script="/shared/jobs/job-7/t.py", log_path="/shared/logs/job-7/n1.log",
                      checkpoint_dir="/shared/models/job-7")
    assert path_problem(spec, cluster) is None
    bad = {
        "log_path": "/etc/cron.d/x", "checkpoint_dir": "/shared/models/job-8",
        "script": "/shared/jobs/../../etc/shadow", "node": "../n1",
    }
    for field, value in bad.items():
        why = path_problem(dataclasses.replace(spec, **{field: value}), cluster)
        assert why is not None and why.startswith("launch task's "), (field, why)
    assert path_problem(dataclasses.replace(spec, checkpoint_dir="/elsewhere/job-7"), cluster) == \
        "launch task's checkpoint_dir '/elsewhere/job-7' is not the job's ('/shared/models/job-7')"
