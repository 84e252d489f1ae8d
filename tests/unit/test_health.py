import pytest

from minihpc.core.restart_policy import Action, RestartPolicy, backoff, decide

POLICY = RestartPolicy(backoff_initial=1.0, backoff_max=8.0, budget=4, window=100.0)


def test_first_restart_is_immediate():
    assert decide([], down_since=50.0, now=50.0, policy=POLICY) is Action.RESTART


def test_backoff_doubles_and_is_capped():
    assert [backoff(n, POLICY) for n in range(6)] == [0.0, 1.0, 2.0, 4.0, 8.0, 8.0]


def test_a_node_down_again_right_after_a_restart_waits_for_the_backoff():
    history = [10.0, 11.0]  # two restarts: the third waits 2 s after the node went down
    assert decide(history, down_since=11.5, now=13.4, policy=POLICY) is Action.WAIT
    assert decide(history, down_since=11.5, now=13.5, policy=POLICY) is Action.RESTART


def test_out_of_budget_drains_and_old_restarts_age_out():
    history = [10.0, 11.0, 13.0, 17.0]
    assert decide(history, down_since=30.0, now=30.0, policy=POLICY) is Action.DRAIN
    # A hundred seconds on, three have left the window: one restart counts, so a 1 s backoff.
    assert decide(history, down_since=115.0, now=115.5, policy=POLICY) is Action.WAIT
    assert decide(history, down_since=115.0, now=116.0, policy=POLICY) is Action.RESTART


def test_a_node_restarted_during_this_outage_gets_time_to_boot():
    policy = RestartPolicy(backoff_initial=1.0, budget=5, window=600.0, boot_grace=20.0)
    assert decide([50.0], down_since=49.0, now=60.0, policy=policy) is Action.WAIT
    assert decide([50.0], down_since=49.0, now=70.0, policy=policy) is Action.RESTART  # never came back
    # It came back and failed again later: the usual backoff, counted from the new failure.
    assert decide([50.0], down_since=80.0, now=80.5, policy=policy) is Action.WAIT
    assert decide([50.0], down_since=80.0, now=81.0, policy=policy) is Action.RESTART


def test_the_master_wakes_when_the_first_live_heartbeat_lapses():
    from minihpc.core.restart_policy import next_lapse

    assert next_lapse([100.0, 99.2, None], now=101.0, timeout=2.5) == pytest.approx(0.7)
    assert next_lapse([90.0], now=101.0, timeout=2.5) == 0.0  # already overdue: now
    assert next_lapse([None], now=101.0, timeout=2.5) is None
