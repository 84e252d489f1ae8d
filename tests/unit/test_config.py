import pytest

from minihpc.core.config import Settings, load_settings
from minihpc.core.errors import UsageError


def test_precedence_env_over_file_over_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIHPC_STATE_DIR", str(tmp_path / "nostate"))
    cfg = tmp_path / "c.toml"
    cfg.write_text('[minihpc]\nnode_timeout = 5\nkill_wait = 7\nredis_url = "redis://file:1/0"\n')
    s = load_settings(str(cfg), env={"MINIHPC_KILL_WAIT": "9"})
    assert (s.node_timeout, s.kill_wait, s.redis_url) == (5.0, 9.0, "redis://file:1/0")
    assert s.heartbeat_interval == Settings().heartbeat_interval
    assert s.with_overrides(redis_url="redis://flag:2/0", kill_wait=None).redis_url == "redis://flag:2/0"


def test_local_cluster_url_file_is_used_when_nothing_else_says(tmp_path, monkeypatch):
    monkeypatch.setenv("MINIHPC_STATE_DIR", str(tmp_path))
    (tmp_path / "redis_url").write_text("redis://:pw@127.0.0.1:7000/0\n")
    assert load_settings(env={}).redis_url == "redis://:pw@127.0.0.1:7000/0"
    assert load_settings(env={"MINIHPC_REDIS_URL": "redis://x:1/0"}).redis_url == "redis://x:1/0"


@pytest.mark.parametrize(
    "text,message",
    [("[minihpc]\nbogus = 1\n", "unknown settings: bogus"), ("[minihpc\n", "not valid TOML"),
     ("[minihpc]\nkill_wait = -1\n", "must be positive")],
)
def test_bad_config_files(tmp_path, text, message):
    cfg = tmp_path / "c.toml"
    cfg.write_text(text)
    with pytest.raises(UsageError, match=message):
        load_settings(str(cfg), env={})


def test_shipped_config_file_holds_the_defaults(monkeypatch, tmp_path):
    from pathlib import Path

    monkeypatch.setenv("MINIHPC_STATE_DIR", str(tmp_path))
    shipped = Path(__file__).parents[2] / "config" / "minihpc.toml"
    assert load_settings(str(shipped), env={}) == Settings()


def test_counts_are_whole_numbers_and_zero_requeues_is_allowed():
    import pytest

    from minihpc.core.config import load_settings
    from minihpc.core.errors import UsageError

    s = load_settings(env={"MINIHPC_MAX_REQUEUES": "0", "MINIHPC_RESTART_BUDGET": "2"})
    assert (s.max_requeues, s.restart_budget) == (0, 2)
    with pytest.raises(UsageError, match="max_requeues='1.5' is not a whole number"):
        load_settings(env={"MINIHPC_MAX_REQUEUES": "1.5"})
    with pytest.raises(UsageError, match="restart_budget='0' must be at least 1"):
        load_settings(env={"MINIHPC_RESTART_BUDGET": "0"})
