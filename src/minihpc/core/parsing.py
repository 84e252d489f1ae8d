"""Parsing of what users type: time limits, script header options, node lists (dependencies:
minihpc.core.dependency)."""

from __future__ import annotations

import re

from minihpc.core.errors import UsageError

_TIME_FORMS = "minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS, or a number with s/m/h/d"
_UNLIMITED = {"unlimited", "infinite", "inf", "none"}


def parse_time_limit(text: str) -> float | None:
    """Slurm's time formats to seconds; ``UNLIMITED`` and 0 give None (``man sbatch``: "A time
    limit of zero requests that no time limit be imposed").

    >>> parse_time_limit("90"), parse_time_limit("1:30"), parse_time_limit("1-00")
    (5400.0, 90.0, 86400.0)
    """
    raw = text.strip()
    if raw.lower() in _UNLIMITED:
        return None
    seconds = _parse_time(raw)
    if seconds is None or seconds < 0:
        raise UsageError(f"invalid time limit {text!r}: expected {_TIME_FORMS}")
    return float(seconds) if seconds else None


def _parse_time(raw: str) -> float | None:
    suffix = re.fullmatch(r"(\d+(?:\.\d+)?)([smhd])", raw)
    if suffix:
        return float(suffix.group(1)) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[suffix.group(2)]
    days = 0
    if "-" in raw:
        day_part, raw = raw.split("-", 1)
        if not day_part.isdigit():
            return None
        days = int(day_part)
        parts = raw.split(":")
        if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
            return None
        hours, minutes, secs = (list(map(int, parts)) + [0, 0])[:3]
    else:
        parts = raw.split(":")
        if not 1 <= len(parts) <= 3 or not all(p.isdigit() for p in parts):
            return None
        numbers = list(map(int, parts))
        if len(numbers) == 1:
            hours, minutes, secs = 0, numbers[0], 0
        elif len(numbers) == 2:
            hours, minutes, secs = 0, numbers[0], numbers[1]
        else:
            hours, minutes, secs = numbers
    return days * 86400 + hours * 3600 + minutes * 60 + secs


def parse_node_range(text: str | int) -> tuple[int, int]:
    """Slurm's ``-N MIN[-MAX]`` as (MIN, MAX): ``3`` is (3, 3), ``2-4`` is (2, 4)."""
    raw = str(text).strip()
    low, sep, high = raw.partition("-")
    try:
        first, last = int(low), int(high) if sep else int(low)
    except ValueError:
        raise UsageError(f"invalid --nodes {raw!r}: expected a number of nodes or a range MIN-MAX (2-4)") from None
    if first < 1:
        raise UsageError(f"--nodes must be at least 1, got {raw}")
    if last < first:
        raise UsageError(f"invalid --nodes {raw!r}: the most nodes ({last}) is less than the least ({first})")
    return first, last


def format_duration(seconds: float | None) -> str:
    """Slurm's elapsed-time style: M:SS, H:MM:SS, D-HH:MM:SS; UNLIMITED for None."""
    if seconds is None:
        return "UNLIMITED"
    total = max(0, int(seconds))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def format_elapsed(seconds: float | None) -> str:
    """sacct's Elapsed column: HH:MM:SS, or D-HH:MM:SS past a day (``00:00:06``)."""
    total = max(0, int(seconds or 0))
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    clock = f"{hours:02d}:{minutes:02d}:{secs:02d}"
    return f"{days}-{clock}" if days else clock


HEADER_PREFIXES = ("#MINIHPC", "#SBATCH")


def header_lines(script_text: str) -> list[tuple[str, list[str]]]:
    """(prefix, option words) of each ``#MINIHPC`` or ``#SBATCH`` line at the top of a script.

    Like sbatch, reading stops at the first line that is neither blank nor a comment -- except
    that a Python script's module docstring may come first, where Python wants it.
    """
    found: list[tuple[str, list[str]]] = []
    lines = iter(script_text.splitlines())
    docstring_allowed = True
    for line in lines:
        stripped = line.strip()
        if not stripped:
            continue
        quote = _docstring_quote(stripped) if docstring_allowed else None
        if quote:
            docstring_allowed = False
            _skip_docstring(stripped, quote, lines)
            continue
        if not stripped.startswith("#"):
            break
        for prefix in HEADER_PREFIXES:
            if stripped.startswith(prefix + " ") or stripped.startswith(prefix + "\t"):
                found.append((prefix, stripped[len(prefix):].split(" #", 1)[0].split()))
    return found


def _docstring_quote(line: str) -> str | None:
    """The triple quote that opens a string on this line, or None."""
    body = line.lstrip("rRbBuU")
    return next((q for q in ('"""', "'''") if body.startswith(q)), None)


def _skip_docstring(first: str, quote: str, lines) -> None:
    """Consume the lines of a docstring that opened on ``first``."""
    if quote in first.lstrip("rRbBuU")[len(quote):]:
        return  # it closes on the line it opened
    for rest in lines:
        if quote in rest:
            return


def header_options(script_text: str) -> list[str]:
    """Every option word of the script's header lines, in order."""
    return [word for _prefix, words in header_lines(script_text) for word in words]


def compress_hostlist(names: list[str]) -> str:
    """Slurm's compact node list: worker-node-1,worker-node-2 -> worker-node-[1-2]."""
    groups: dict[str, list[int]] = {}
    order: list[str] = []
    plain: list[str] = []
    for name in names:
        m = re.fullmatch(r"(.*?)(\d+)", name)
        if not m or m.group(2).startswith("0") and m.group(2) != "0":
            plain.append(name)
            order.append(name)
            continue
        prefix = m.group(1)
        if prefix not in groups:
            groups[prefix] = []
            order.append(prefix)
        groups[prefix].append(int(m.group(2)))
    parts = []
    for key in order:
        if key in plain:
            parts.append(key)
            continue
        numbers = sorted(set(groups[key]))
        if len(numbers) == 1:
            parts.append(f"{key}{numbers[0]}")
            continue
        ranges, start, prev = [], numbers[0], numbers[0]
        for n in numbers[1:] + [None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            ranges.append(f"{start}" if start == prev else f"{start}-{prev}")
            if n is not None:
                start = prev = n
        parts.append(f"{key}[{','.join(ranges)}]")
    return ",".join(parts)


HOSTLIST_MAX = 65536
"""Names one host list may expand to (Slurm's hostlist.c caps a range at 64 Ki hosts too): a
typo like ``n[1-100000000]`` is refused instead of filling memory."""

_HOSTLIST_FORMS = "name, prefix[1-3,5]suffix or n[01-10], comma-separated"


def expand_hostlist(text: str) -> list[str]:
    """Slurm's host list to names, in order and with repeats, as ``scontrol show hostnames``:
    ``worker-node-[1-2],master-node`` -> worker-node-1, worker-node-2, master-node.

    A range keeps its lower bound's zero padding (``n[01-03]`` -> n01, n02, n03); several
    bracket groups in one name expand as their product (``r[1-2]n[1-2]`` -> r1n1, r1n2, ...).
    Commas and whitespace outside brackets separate names; empty items are skipped.
    UsageError for an unbalanced or nested bracket, a bad range, or more than HOSTLIST_MAX names.
    """
    names: list[str] = []
    for item in _hostlist_items(text):
        expanded = [""]
        for literal, ranges in _hostlist_parts(item):
            if ranges is None:
                expanded = [e + literal for e in expanded]
                continue
            numbers = _expand_ranges(ranges, text)
            if len(expanded) * len(numbers) + len(names) > HOSTLIST_MAX:
                raise UsageError(f"host list {text!r} names more than {HOSTLIST_MAX} hosts")
            expanded = [e + n for e in expanded for n in numbers]
        names.extend(expanded)
    return names


def _hostlist_items(text: str) -> list[str]:
    """The top-level items: split at commas and whitespace that are not inside brackets."""
    items, current, depth = [], "", 0
    for ch in text:
        if ch == "[":
            depth += 1
            if depth > 1:
                raise UsageError(f"invalid host list {text!r}: nested '['; expected {_HOSTLIST_FORMS}")
        elif ch == "]":
            depth -= 1
            if depth < 0:
                raise UsageError(f"invalid host list {text!r}: ']' without '['; expected {_HOSTLIST_FORMS}")
        if depth == 0 and (ch == "," or ch.isspace()):
            items.append(current)
            current = ""
        else:
            current += ch
    if depth:
        raise UsageError(f"invalid host list {text!r}: '[' without ']'; expected {_HOSTLIST_FORMS}")
    items.append(current)
    return [i for i in items if i]


def _hostlist_parts(item: str) -> list[tuple[str, str | None]]:
    """(literal, None) and ("", bracket contents) pieces of one item, in order."""
    parts = []
    for piece in re.split(r"(\[[^\]]*\])", item):
        if piece.startswith("["):
            parts.append(("", piece[1:-1]))
        elif piece:
            parts.append((piece, None))
    return parts


def _expand_ranges(ranges: str, text: str) -> list[str]:
    """``1,3-5`` -> 1, 3, 4, 5; ``08-10`` -> 08, 09, 10 (the lower bound's width)."""
    out: list[str] = []
    for term in ranges.split(","):
        m = re.fullmatch(r"\s*(\d+)(?:-(\d+))?\s*", term)
        if not m:
            raise UsageError(
                f"invalid host list {text!r}: bad range {term!r} in [{ranges}]; expected {_HOSTLIST_FORMS}")
        lo, hi = m.group(1), m.group(2) or m.group(1)
        if int(hi) < int(lo):
            raise UsageError(f"invalid host list {text!r}: range {term!r} ends before it starts")
        if int(hi) - int(lo) + 1 + len(out) > HOSTLIST_MAX:
            raise UsageError(f"host list {text!r} names more than {HOSTLIST_MAX} hosts")
        out.extend(str(n).zfill(len(lo)) for n in range(int(lo), int(hi) + 1))
    return out


def human_bytes(count: int) -> str:
    """1.5GiB, 12.0MiB, 512B: a size as people read it."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if value < 1024 or unit == "TiB":
            return f"{value:.0f}{unit}" if unit == "B" else f"{value:.1f}{unit}"
        value /= 1024
    return f"{count}B"
