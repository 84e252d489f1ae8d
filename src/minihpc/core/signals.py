"""Signals by name, as Slurm's commands take them (``scancel --signal``, ``sbatch --signal``):
pure parsing, no process is touched here."""

from __future__ import annotations

import re
import signal
from dataclasses import dataclass

from minihpc.core.errors import UsageError


def parse_signal(text: str, option: str = "--signal") -> signal.Signals:
    """``USR1``, ``SIGUSR1``, ``usr1`` or ``10`` -> the signal; UsageError for anything else."""
    raw = text.strip()
    try:
        if raw.isdigit():
            return signal.Signals(int(raw))
        name = raw.upper()
        return signal.Signals[name if name.startswith("SIG") else f"SIG{name}"]
    except (KeyError, ValueError):
        raise UsageError(f"invalid signal {text!r} for {option}: expected a name such as USR1 or TERM, "
                         "or a number") from None


@dataclass(frozen=True)
class WarnSignal:
    """``sbatch --signal=[{R|B}:]SIG[@SECS]``: send SIG this many seconds before the time limit,
    to the batch shell only (B:) or to every task of the job's steps (the default)."""

    signal: signal.Signals
    seconds: int = 60
    batch_only: bool = False

    def text(self) -> str:
        return f"{'B:' if self.batch_only else ''}{self.signal.name[3:]}@{self.seconds}"


_WARN = re.compile(r"(?:(?P<flags>[BRbr]+):)?(?P<sig>[A-Za-z0-9]+)(?:@(?P<secs>\d+))?")
MAX_WARN_SECONDS = 65535
"""Slurm's limit on SECS (sbatch(1): 0 to 65535)."""


def parse_warn_signal(text: str) -> WarnSignal:
    """sbatch's ``--signal`` value; SECS defaults to 60 as in Slurm. UsageError when malformed."""
    m = _WARN.fullmatch(text.strip())
    if not m:
        raise UsageError(f"invalid --signal {text!r}: expected [B:]SIG[@SECONDS], such as USR1@60 or B:TERM@30")
    seconds = int(m["secs"]) if m["secs"] is not None else 60
    if seconds > MAX_WARN_SECONDS:
        raise UsageError(f"invalid --signal {text!r}: at most {MAX_WARN_SECONDS} seconds")
    return WarnSignal(parse_signal(m["sig"]), seconds, "B" in (m["flags"] or "").upper())


def warn_at(warn: WarnSignal, started_at: float | None, time_limit: float | None) -> float | None:
    """When ``--signal``'s SIG is due: SECS before the job's end by its time limit (its start
    plus TimeLimit, which ``scontrol update`` may change meanwhile); None without a limit."""
    if started_at is None or time_limit is None:
        return None
    return started_at + time_limit - warn.seconds
