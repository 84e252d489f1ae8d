"""The cluster state in Redis, as one object with a method for everything the layers above
read or change. Each concern lives in its own module; this class only joins them:

- :mod:`~minihpc.state.jobs` -- job records, the job sets, housekeeping;
- :mod:`~minihpc.state.pending` -- the stream of changed jobs, the pending queue a reader keeps;
- :mod:`~minihpc.state.lifecycle` -- how a job's state changes (atomic transactions);
- :mod:`~minihpc.state.nodes` -- the node registry, allocations, draining, restarts;
- :mod:`~minihpc.state.telemetry` -- progress reports, counters and histograms;
- :mod:`~minihpc.state.events` -- the master's wake-ups, the incident log, the live channel;
- :mod:`~minihpc.state.tokens` -- who each API token names (hashed);
- :mod:`~minihpc.state.steps` -- a batch job's srun steps: messages to its nodes, task ends;
- :mod:`~minihpc.state.users` -- each user's cluster uid, for jobs run as their owners;
- :mod:`~minihpc.state.environments` -- submitted environments, each kept once.

Every key is declared in :mod:`~minihpc.state.keys`; bytes are decoded only by
:func:`minihpc.state.connect.text`.
"""

from __future__ import annotations

from minihpc.state.environments import Environments
from minihpc.state.events import Events
from minihpc.state.jobs import JobRecords
from minihpc.state.lifecycle import JobLifecycle
from minihpc.state.nodes import NodeRegistry
from minihpc.state.pending import JobChanges
from minihpc.state.steps import Steps
from minihpc.state.telemetry import Telemetry
from minihpc.state.tokens import Tokens
from minihpc.state.users import Users


class Store(JobRecords, JobChanges, JobLifecycle, NodeRegistry, Telemetry, Events, Tokens, Steps, Users,
            Environments):
    def __init__(self, client):
        """``client``: redis-py's (daemons) or :class:`minihpc.state.wire.Client` (commands)."""
        self.r = client
        self._register_scripts()

    @property
    def connection(self):
        """The raw client, for rq's queues and workers only (they share the connection)."""
        return self.r
