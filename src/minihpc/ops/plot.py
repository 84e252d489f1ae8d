"""Small PNG charts for `minihpc report`, drawn with Pillow (which torchvision brings), so a
report needs no plotting library: line charts, stacked bars, and a timeline."""

from __future__ import annotations

from pathlib import Path

from PIL import Image, ImageDraw, ImageFont

W, H = 900, 420
LEFT, RIGHT, TOP, BOTTOM = 80, 180, 40, 50
COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f"]


def _canvas(title: str) -> tuple[Image.Image, ImageDraw.ImageDraw, ImageFont.ImageFont]:
    image = Image.new("RGB", (W, H), "white")
    draw = ImageDraw.Draw(image)
    font = ImageFont.load_default()
    draw.text((LEFT, 12), title, fill="black", font=font)
    return image, draw, font


def _scale(lo: float, hi: float, a: float, b: float):
    span = (hi - lo) or 1.0
    return lambda v: a + (v - lo) / span * (b - a)


def _axes(draw, font, x0, x1, y0, y1, xlabel: str, ylabel: str, yticks: bool = True, xticks: bool = True) -> None:
    draw.rectangle([LEFT, TOP, W - RIGHT, H - BOTTOM], outline="black")
    for i in range(5):
        fy = y0 + (y1 - y0) * i / 4
        py = H - BOTTOM - (H - BOTTOM - TOP) * i / 4
        if yticks:
            draw.line([LEFT - 4, py, LEFT, py], fill="black")
            draw.text((6, py - 6), f"{fy:.4g}", fill="black", font=font)
        fx = x0 + (x1 - x0) * i / 4
        px = LEFT + (W - RIGHT - LEFT) * i / 4
        if not xticks:
            continue
        draw.line([px, H - BOTTOM, px, H - BOTTOM + 4], fill="black")
        draw.text((px - 12, H - BOTTOM + 8), f"{fx:.4g}", fill="black", font=font)
    draw.text(((LEFT + W - RIGHT) / 2 - 20, H - 22), xlabel, fill="black", font=font)
    draw.text((6, TOP - 18), ylabel, fill="black", font=font)


def _legend(draw, font, labels: list[str]) -> None:
    for i, label in enumerate(labels):
        y = TOP + 16 * i
        draw.rectangle([W - RIGHT + 10, y + 2, W - RIGHT + 20, y + 12], fill=COLORS[i % len(COLORS)])
        draw.text((W - RIGHT + 26, y), label, fill="black", font=font)


def line_chart(path: Path, title: str, series: dict[str, list[tuple[float, float]]], xlabel: str, ylabel: str) -> Path:
    image, draw, font = _canvas(title)
    points = [p for pts in series.values() for p in pts]
    if not points:
        draw.text((LEFT, H / 2), "no data reported", fill="black", font=font)
        image.save(path)
        return path
    xs, ys = [p[0] for p in points], [p[1] for p in points]
    x0, x1, y0, y1 = min(xs), max(xs), min(0.0, min(ys)), max(ys)
    sx, sy = _scale(x0, x1, LEFT, W - RIGHT), _scale(y0, y1, H - BOTTOM, TOP)
    _axes(draw, font, x0, x1, y0, y1, xlabel, ylabel)
    for i, pts in enumerate(series.values()):
        coords = [(sx(x), sy(y)) for x, y in sorted(pts)]
        if len(coords) > 1:
            draw.line(coords, fill=COLORS[i % len(COLORS)], width=2)
        for x, y in coords[:1] + coords[-1:]:
            draw.ellipse([x - 2, y - 2, x + 2, y + 2], fill=COLORS[i % len(COLORS)])
    _legend(draw, font, list(series))
    image.save(path)
    return path


def stacked_bars(path: Path, title: str, bars: dict[str, dict[str, float]], ylabel: str) -> Path:
    """One bar per key of ``bars`` (e.g. a rank), stacked by its parts (e.g. phases)."""
    image, draw, font = _canvas(title)
    parts = list(dict.fromkeys(p for v in bars.values() for p in v))
    top = max((sum(v.values()) for v in bars.values()), default=0.0) or 1.0
    _axes(draw, font, 0, 0, 0, top, "", ylabel, xticks=False)
    sy = _scale(0, top, H - BOTTOM, TOP)
    width = (W - RIGHT - LEFT) / max(1, len(bars))
    for i, (label, values) in enumerate(bars.items()):
        x = LEFT + width * i + width * 0.15
        base = 0.0
        for j, part in enumerate(parts):
            value = values.get(part, 0.0)
            draw.rectangle([x, sy(base + value), x + width * 0.7, sy(base)], fill=COLORS[j % len(COLORS)])
            base += value
        draw.text((x, H - BOTTOM + 22), label, fill="black", font=font)
    _legend(draw, font, parts)
    image.save(path)
    return path


def timeline(path: Path, title: str, spans: list[tuple[str, float, float]], marks: list[tuple[float, str]]) -> Path:
    """Horizontal spans (label, start, end) on one time axis, with labelled instants."""
    image, draw, font = _canvas(title)
    times = [t for _, a, b in spans for t in (a, b)] + [t for t, _ in marks]
    if not times:
        draw.text((LEFT, H / 2), "nothing recorded", fill="black", font=font)
        image.save(path)
        return path
    t0, t1 = min(times), max(times)
    sx = _scale(0, (t1 - t0) or 1.0, LEFT, W - RIGHT)
    _axes(draw, font, 0, (t1 - t0) or 1.0, 0, 0, "seconds since the first reported step", "", yticks=False)
    rows = max(1, len(spans))
    height = (H - BOTTOM - TOP - 20) / rows
    for i, (label, a, b) in enumerate(spans):
        y = TOP + 10 + height * i
        draw.rectangle([sx(a - t0), y + height * 0.2, max(sx(b - t0), sx(a - t0) + 2), y + height * 0.8],
                       fill=COLORS[i % len(COLORS)])
        draw.text((sx(a - t0) + 4, y + height * 0.2 + 2), label, fill="white", font=font)
    for j, (t, label) in enumerate(marks):
        x = sx(t - t0)
        draw.line([x, TOP, x, H - BOTTOM], fill="#d62728", width=1)
        draw.text((W - RIGHT + 10, TOP + 16 * j), f"{t - t0:6.1f}s {label}", fill="#d62728", font=font)
    image.save(path)
    return path
