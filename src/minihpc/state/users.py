"""Each user's cluster uid (core.tenants): given once, the first time one of the user's jobs
starts, and the same on every node for good."""

from __future__ import annotations

from minihpc.core import tenants
from minihpc.state import keys
from minihpc.state.connect import text


class Users:
    r: object

    def user_uid(self, user: str) -> int:
        """The user's uid, given now if it has none. Two masters asking at once agree: the
        first HSETNX wins and both read it back (the other's sequence number goes unused)."""
        found = text(self.r.hget(keys.USER_UIDS, user))
        if found is None:
            self.r.hsetnx(keys.USER_UIDS, user, tenants.allocated(int(self.r.incr(keys.USER_UID_SEQ))))
            found = text(self.r.hget(keys.USER_UIDS, user))
        return int(found)

    def user_uids(self) -> dict[str, int]:
        """Every user given a uid, for operators (``minihpc users``-like reads)."""
        return {text(k): int(text(v)) for k, v in self.r.hgetall(keys.USER_UIDS).items()}

    def live_jobs(self, user: str, enough: int) -> int:
        """How many of ``user``'s jobs are pending or running, counted exactly once the set of
        its jobs holds ``enough`` or more: then the ended and forgotten ones are taken out of it
        (their state read in one round trip). Below that the set's size is the answer's upper
        bound, which is all a cap needs."""
        count = int(self.r.scard(keys.user_jobs(user)))
        if count < enough:
            return count
        ids = [int(text(i)) for i in self.r.smembers(keys.user_jobs(user))]
        states = self.job_states(ids)  # state.jobs: one round trip
        gone = [job_id for job_id in ids if states[job_id] is None or states[job_id].terminal]
        if gone:
            self.r.srem(keys.user_jobs(user), *gone)
        return len(ids) - len(gone)
