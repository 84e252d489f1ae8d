"""Which ended jobs are forgotten (core.retention.to_forget), and the two settings that bound it."""

import pytest

from minihpc.core.config import Settings, load_settings
from minihpc.core.errors import UsageError
from minihpc.core.retention import DAY, to_forget

NOW = 1_000 * DAY


def ended(*ages_in_days: float) -> list[tuple[int, float]]:
    """Jobs 1, 2, ... that ended that many days before NOW (give them oldest first)."""
    return [(i, NOW - age * DAY) for i, age in enumerate(ages_in_days, start=1)]


def test_the_count_bound_forgets_the_oldest_beyond_the_newest_kept():
    assert to_forget(ended(5, 4, 3, 2, 1), NOW, keep_jobs=2, keep_days=0) == [1, 2, 3]


def test_the_age_bound_forgets_what_ended_more_than_the_days_ago():
    assert to_forget(ended(40, 31, 30, 29, 0.5), NOW, keep_jobs=100, keep_days=30) == [1, 2]


def test_both_bounds_together_forget_either_kind():
    assert to_forget(ended(90, 2, 1.5, 1), NOW, keep_jobs=2, keep_days=30) == [1, 2]


def test_zero_days_is_no_age_limit_and_zero_jobs_no_count_limit():
    jobs = ended(9_000, 5_000, 1)
    assert to_forget(jobs, NOW, keep_jobs=10, keep_days=0) == []
    assert to_forget(jobs, NOW, keep_jobs=0, keep_days=0) == []
    assert to_forget(jobs, NOW, keep_jobs=0, keep_days=30) == [1, 2]


def test_a_job_a_pending_job_depends_on_is_kept():
    assert to_forget(ended(50, 40, 3, 2, 1), NOW, keep_jobs=2, keep_days=30, needed={1, 3}) == [2]


def test_nothing_to_do():
    assert to_forget([], NOW, keep_jobs=2, keep_days=30) == []
    assert to_forget(ended(3, 2, 1), NOW, keep_jobs=3, keep_days=30) == []


def test_a_pass_is_bounded_and_may_see_only_the_oldest():
    jobs = ended(*range(100, 0, -1))  # 100 jobs, one a day, the oldest 100 days ago
    everything = to_forget(jobs, NOW, keep_jobs=10, keep_days=0)
    assert everything == list(range(1, 91))
    assert to_forget(jobs, NOW, keep_jobs=10, keep_days=0, limit=5) == [1, 2, 3, 4, 5]
    # The store hands over the oldest limit + len(needed) with the total: the same choice.
    needed = {2, 4}
    assert to_forget(jobs[:7], NOW, keep_jobs=10, keep_days=0, needed=needed, total=100, limit=5) == [1, 3, 5, 6, 7]
    assert to_forget(jobs[:7], NOW, keep_jobs=98, keep_days=0, total=100, limit=5) == [1, 2]


def test_the_settings_default_to_ten_thousand_jobs_and_thirty_days(monkeypatch, tmp_path):
    monkeypatch.setenv("MINIHPC_STATE_DIR", str(tmp_path))
    assert (Settings().keep_ended_jobs, Settings().keep_ended_days) == (10_000, 30.0)
    s = load_settings(env={"MINIHPC_KEEP_ENDED_JOBS": "0", "MINIHPC_KEEP_ENDED_DAYS": "0"})
    assert (s.keep_ended_jobs, s.keep_ended_days) == (0, 0.0)
    assert load_settings(env={"MINIHPC_KEEP_ENDED_DAYS": "0.5"}).keep_ended_days == 0.5


@pytest.mark.parametrize("env,message", [
    ({"MINIHPC_KEEP_ENDED_JOBS": "-1"}, "keep_ended_jobs='-1' must be at least 0"),
    ({"MINIHPC_KEEP_ENDED_JOBS": "2.5"}, "keep_ended_jobs='2.5' is not a whole number"),
    ({"MINIHPC_KEEP_ENDED_DAYS": "-1"}, "keep_ended_days='-1' must be positive or 0"),
    ({"MINIHPC_KEEP_ENDED_DAYS": "soon"}, "keep_ended_days='soon' is not a number"),
])
def test_bad_retention_settings_are_refused(monkeypatch, tmp_path, env, message):
    monkeypatch.setenv("MINIHPC_STATE_DIR", str(tmp_path))
    with pytest.raises(UsageError, match=message):
        load_settings(env=env)


def test_a_users_checkpoints_past_the_cap_go_from_its_oldest_jobs_that_ended_for_good():
    from minihpc.core.retention import checkpoints_to_prune

    folders = [(1, 40, "COMPLETED", 100.0), (2, 40, "FAILED", 50.0), (3, 40, "NODE_FAIL", 10.0),
               (4, 40, "RUNNING", None), (5, 40, "CANCELLED", 200.0)]
    assert checkpoints_to_prune(folders, 200) == []  # 200 bytes fit
    assert checkpoints_to_prune(folders, 0) == []  # no cap
    # The oldest that ended for good first (2, then 1), until the rest fits; a NODE_FAIL job may
    # be requeued, so it is not one of them.
    assert checkpoints_to_prune(folders, 170) == [2]
    assert checkpoints_to_prune(folders, 150) == [2, 1]
    assert checkpoints_to_prune(folders, 100) == [2, 1, 5]
    assert checkpoints_to_prune(folders, 10) == [2, 1, 5]  # never a live one's, whatever is left
    assert checkpoints_to_prune([(9, 50, "COMPLETED", None), (8, 50, "COMPLETED", 5.0)], 60) == [9]  # forgotten: oldest
