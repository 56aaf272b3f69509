"""An interval session's series drawn as inline SVG, one small chart per figure over the
log's time (generation and prompt throughput, mean acceptance length, the acceptance at
each draft position, KV cache use and prefix cache hits), with no library: a polyline per
line, its axis ranges written beside it. A figure no interval gives is left out."""

from collections.abc import Sequence
from html import escape
from typing import Any

_W, _H, _PAD = 560, 150, 36
_COLOURS = ("#2a7ab0", "#e0a000", "#c0392b", "#27ae60", "#8e44ad", "#7f8c8d", "#d35400",
            "#16a085")
# (title, [(line label, payload key or (key, index)), ...], scale applied to the value)
_CHARTS: tuple[tuple[str, tuple[tuple[str, Any], ...], float], ...] = (
    ("throughput (tokens/s)", (("generation", "generation_tps"), ("prompt", "prompt_tps")),
     1.0),
    ("mean acceptance length (tokens per verify)", (("mean length", "mean_accept_len"),), 1.0),
    ("KV cache use and prefix cache hits (%)", (("KV use", "kv_usage"),
                                                 ("prefix hits", "prefix_hit_rate")), 100.0),
)


def _value(p: dict[str, Any], key: Any) -> float | None:
    if isinstance(key, tuple):
        pos = p.get(key[0])
        return pos[key[1]] if pos is not None and key[1] < len(pos) else None
    x = p.get(key)
    return float(x) if x is not None else None


def _chart(title: str, lines: Sequence[tuple[str, Any]], scale: float,
           times: Sequence[float], payloads: Sequence[dict[str, Any]]) -> str:
    """One chart; empty when no line has a value."""
    series = [(label, [(t, v * scale) for t, p in zip(times, payloads, strict=True)
                       if (v := _value(p, key)) is not None]) for label, key in lines]
    series = [(label, pts) for label, pts in series if pts]
    if not series:
        return ""
    t0, t1 = min(times), max(times)
    top = max(v for _, pts in series for _, v in pts) or 1.0

    def xy(t: float, v: float) -> str:
        x = _PAD + (t - t0) / ((t1 - t0) or 1.0) * (_W - 2 * _PAD)
        y = _H - _PAD / 2 - v / top * (_H - _PAD)
        return f"{x:.1f},{y:.1f}"

    parts = [f"<svg xmlns='http://www.w3.org/2000/svg' width='{_W}' height='{_H}' "
             f"role='img'><title>{escape(title)}</title>",
             f"<text x='{_PAD}' y='12' font-size='12'>{escape(title)}: 0 to {top:.4g}, "
             f"t {t0:.0f}-{t1:.0f} s</text>",
             f"<line x1='{_PAD}' y1='{_H - _PAD / 2}' x2='{_W - _PAD}' y2='{_H - _PAD / 2}' "
             "stroke='#999'/>"]
    for i, (label, pts) in enumerate(series):
        colour = _COLOURS[i % len(_COLOURS)]
        parts.append(f"<polyline fill='none' stroke='{colour}' stroke-width='1.5' "
                     f"points='{' '.join(xy(t, v) for t, v in pts)}'/>")
        parts.append(f"<text x='{_W - _PAD - 110}' y='{24 + 12 * i}' font-size='11' "
                     f"fill='{colour}'>{escape(label)}</text>")
    return "".join(parts) + "</svg>"


def series_svg(times: Sequence[float], payloads: Sequence[dict[str, Any]]) -> list[str]:
    """The charts of a series (each interval's time and payload), as SVG documents."""
    k = max((len(p.get("acc_per_pos") or ()) for p in payloads), default=0)
    positions = (("acceptance at each draft position (%)",
                  tuple((f"position {i + 1}", ("acc_per_pos", i)) for i in range(k)), 100.0),)
    charts = [_chart(title, lines, scale, times, payloads)
              for title, lines, scale in (*_CHARTS[:2], *positions, *_CHARTS[2:])]
    return [c for c in charts if c]
