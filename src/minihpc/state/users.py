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
