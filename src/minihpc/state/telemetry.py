"""What running jobs report: progress (step, loss, throughput, phase times), each attempt's
first and furthest step, the series kept for reports, and the cluster's counters and
histograms (:mod:`minihpc.state.stats`)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable

from minihpc.state import keys, stats
from minihpc.state.connect import text, texts

SERIES_KEPT = 5000
"""Progress reports kept per job for plots (about 1.5 MB at most)."""

# Ranks report from every node: an attempt's "last" mark keeps the furthest step any reached.
# KEYS[1] = the job's steps hash; ARGV[1] = "<attempt>:last", ARGV[2] = the mark, ARGV[3] = its step
_RAISE_LAST = """
local current = redis.call('HGET', KEYS[1], ARGV[1])
if (not current) or tonumber(cjson.decode(current)['step']) <= tonumber(ARGV[3]) then
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
"""


class Telemetry:
    r: object

    def _register_scripts(self) -> None:
        self._raise_last = self.r.register_script(_RAISE_LAST)  # EVALSHA, loaded on first use

    def record_progress(self, job_id: int, attempt: int, node: str, report: dict) -> None:
        data = {"attempt": attempt, "node": node, **report}
        mark = json.dumps({"step": report.get("step"), "at": report.get("at")})
        with self.r.pipeline() as pipe:
            pipe.hset(keys.job_progress(job_id), mapping={k: str(v) for k, v in data.items()})
            pipe.hsetnx(keys.job_steps(job_id), f"{attempt}:first", mark)
            self._raise_last(keys=[keys.job_steps(job_id)], args=[f"{attempt}:last", mark, int(report.get("step") or 0)],
                             client=pipe)
            pipe.rpush(keys.job_series(job_id), json.dumps(data))
            pipe.ltrim(keys.job_series(job_id), -SERIES_KEPT, -1)
            pipe.execute()

    def series(self, job_id: int, last: int | None = None) -> list[dict]:
        """Every progress report kept for the job (or its ``last`` newest), oldest first (see
        keys.JOB_SERIES); an entry that is not a JSON object is skipped."""
        out = []
        for raw in self.r.lrange(keys.job_series(job_id), -last if last else 0, -1):
            entry = _json(raw)
            if isinstance(entry, dict):
                out.append(entry)
        return out

    def attempt_steps(self, job_id: int) -> dict[int, dict[str, dict]]:
        """{attempt: {"first": {step, at}, "last": {step, at}}} from the job's progress reports;
        a mark that does not parse is skipped."""
        out: dict[int, dict[str, dict]] = {}
        for field, value in self.r.hgetall(keys.job_steps(job_id)).items():
            attempt, _, which = text(field).partition(":")
            mark = _json(value)
            if not attempt.isdigit() or not isinstance(mark, dict):
                continue
            step, at = _number(mark.get("step")), _number(mark.get("at"))
            if step is not None and at is not None:
                out.setdefault(int(attempt), {})[which] = {"step": step, "at": at}
        return out

    def progress(self, job_ids: Iterable[int]) -> dict[int, dict]:
        """The newest progress report of each job that has one: {id: {attempt, step, at, ...}}.
        A field that is not a number is left out, and a report without a step and a time is
        none: one job's bad data never fails a reader (the master's pass, the exporter)."""
        ids = list(job_ids)
        with self.r.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.hgetall(keys.job_progress(job_id))
            raws = pipe.execute()
        out = {}
        for job_id, raw in zip(ids, raws):
            report = _report(texts(raw)) if raw else None
            if report is not None:
                out[job_id] = report
        return out

    # -- counters and histograms ------------------------------------------------------

    def observe(self, name: str, value: float) -> None:
        with self.r.pipeline() as pipe:
            stats.observe(pipe, name, value)
            pipe.execute()

    def counters(self) -> dict[str, dict[str, int]]:
        """{counter: {label value: count}} (see stats.COUNTERS)."""
        return stats.read_counters(self.r)

    def histogram(self, name: str) -> tuple[list[tuple[str, float]], float]:
        """Cumulative buckets and the sum of histogram ``name``, as Prometheus wants them."""
        return stats.read_histogram(self.r, name)

    def redis_memory(self) -> tuple[int, int]:
        """(bytes Redis uses, its maxmemory) from ``INFO memory``; maxmemory 0: no limit."""
        info = self.r.info("memory")
        return int(info["used_memory"]), int(info.get("maxmemory", 0))


def _json(raw):
    try:
        return json.loads(raw)
    except (TypeError, ValueError, RecursionError):
        return None


def _number(value) -> float | None:
    """``value`` as a finite float, or None."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if math.isfinite(number) else None


def _report(fields: dict[str, str]) -> dict | None:
    """A progress hash as numbers (``node`` stays text), or None without a step and a time."""
    report: dict = {}
    for key, value in fields.items():
        if key == "node":
            report[key] = value
        elif (number := _number(value)) is not None:
            report[key] = number
    return report if "step" in report and "at" in report else None
