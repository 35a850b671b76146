"""Small server-side SVG charts: bars stacked over days, lines over days, horizontal bars. Pure.

No script and no external file: each chart is an inline <svg> the page's stylesheet colours
through classes (review/static/review/dashboard.css, which takes the admin's own colour
variables, so a chart follows the light and the dark theme). Each chart is an image with a
<title> and a <desc> (role="img", aria-labelledby), each bar or point a link to the list behind
it with its figure in its own <title>; the page also gives the figures as a table.
"""

from dataclasses import dataclass
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe
from django.utils.text import slugify

WIDTH = 640


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    css: str  # a class of dashboard.css: rv-c0 ... rv-c7


@dataclass(frozen=True)
class Bar:
    label: str
    value: float
    href: str | None = None
    note: str = ""  # said after the value, e.g. "in 3 runs"
    parts: tuple[tuple[str, float], ...] = ()  # (css class, value) segments; default one of class rv-c0
    text: str = ""  # the figure in words, instead of the number and unit (e.g. "4 min 12 s")


def nice_max(value: float) -> float:
    """The axis' top: the value rounded up to 1, 2 or 5 times a power of ten (at least 1)."""
    if value <= 1:
        return 1
    power = 1
    while power * 10 <= value:
        power *= 10
    for step in (1, 2, 5, 10):
        if value <= step * power:
            return step * power
    return 10 * power  # pragma: no cover


def _fmt(value: float) -> str:
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:,.1f}"


def _count(value: float, unit: str) -> str:
    """1 run, 2 runs: the unit is given in the plural."""
    return f"{_fmt(value)} {unit[:-1] if value == 1 and unit.endswith('s') else unit}"


def _open(title: str, desc: str, height: int, css: str, width: int = WIDTH) -> tuple[str, str]:
    """The <svg> element's opening, with its title and description; and its id (from the title: a
    page's charts have titles of their own)."""
    ident = f"rv-{slugify(title)}"
    return (f'<svg class="rv-chart {css}" viewBox="0 0 {width} {height}" width="100%" role="img" '
            f'aria-labelledby="{ident}-t {ident}-d" xmlns="http://www.w3.org/2000/svg">'
            f'<title id="{ident}-t">{escape(title)}</title><desc id="{ident}-d">{escape(desc)}</desc>'), ident


def _link(inner: str, href: str | None, tip: str) -> str:
    tip_el = f"<title>{escape(tip)}</title>"
    if not href:
        return f"<g>{tip_el}{inner}</g>"
    return f'<a href="{escape(href)}" aria-label="{escape(tip)}">{tip_el}{inner}</a>'


def _day_label(day: str) -> str:
    return day[5:]  # MM-DD; the period's year is in the page's heading


def _axes(top: float, left: int, bottom: int, plot_h: int, days: list[str], step_w: float,
          width: int = WIDTH) -> list[str]:
    parts = [f'<line class="rv-axis" x1="{left}" y1="{bottom}" x2="{width - 8}" y2="{bottom}"/>']
    for fraction in (0, 0.5, 1):
        y = bottom - plot_h * fraction
        parts.append(f'<line class="rv-grid" x1="{left}" y1="{y:.1f}" x2="{width - 8}" y2="{y:.1f}"/>')
        parts.append(f'<text class="rv-tick" x="{left - 6}" y="{y + 4:.1f}" text-anchor="end">{_fmt(top * fraction)}</text>')
    every = max(1, -(-len(days) * 70 // (width - left)))  # a label every 70 units at least
    for index, day in enumerate(days):
        if index % every == 0:
            x = left + step_w * (index + 0.5)
            parts.append(f'<text class="rv-tick" x="{x:.1f}" y="{bottom + 16}" text-anchor="middle">'
                         f'{escape(_day_label(day))}</text>')
    return parts


def _legend(series: list[Series], y: int) -> list[str]:
    parts, x = [], 44
    for s in series:
        parts.append(f'<rect class="{s.css}" x="{x}" y="{y - 10}" width="12" height="12" rx="2"/>'
                     f'<text class="rv-label" x="{x + 17}" y="{y}">{escape(s.label)}</text>')
        x += 30 + 7 * len(s.label)
    return parts


def stacked_days(title: str, desc: str, days: list[str], series: list[Series], values: dict[str, list[float]],
                 href=None, unit: str = "runs", width: int = WIDTH) -> SafeString:
    """Bars over days, each day's bar stacked by series; values[key][i] is the series' figure on
    days[i]; href(day, key) the list behind a segment (None: no link)."""
    height, left, top_pad, legend_h = 250, 44, 12, 22
    bottom = height - 28 - legend_h
    plot_h = bottom - top_pad
    totals = [sum(values[s.key][i] for s in series) for i in range(len(days))]
    top = nice_max(max(totals, default=0))
    step_w = (width - 8 - left) / max(len(days), 1)
    bar_w = max(2.0, min(36.0, step_w * 0.7))
    head, _ = _open(title, desc, height, "rv-stacked", width)
    parts = [head, *_axes(top, left, bottom, plot_h, days, step_w, width)]
    if not any(totals):
        parts.append(f'<text class="rv-label rv-empty" x="{(width + left) / 2:.0f}" y="{bottom - plot_h / 2:.0f}" '
                     f'text-anchor="middle">no {escape(unit)} in this period</text>')
    for index, day in enumerate(days):
        x, y = left + step_w * (index + 0.5) - bar_w / 2, float(bottom)
        for s in series:
            value = values[s.key][index]
            if not value:
                continue
            h = plot_h * value / top
            y -= h
            rect = f'<rect class="{s.css}" x="{x:.1f}" y="{y:.1f}" width="{bar_w:.1f}" height="{h:.1f}"/>'
            parts.append(_link(rect, href(day, s.key) if href else None, f"{day}: {_count(value, unit)} {s.label}"))
    parts += _legend(series, height - 6)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 (every text above is escaped)


def lines_days(title: str, desc: str, days: list[str], series: list[Series], values: dict[str, list[float]],
               href=None, unit: str = "runs") -> SafeString:
    """A line per series over days, a point per day (linked like a bar)."""
    height, left, top_pad, legend_h = 230, 44, 12, 22
    bottom = height - 28 - legend_h
    plot_h = bottom - top_pad
    top = nice_max(max((v for s in series for v in values[s.key]), default=0))
    step_w = (WIDTH - 8 - left) / max(len(days), 1)
    head, _ = _open(title, desc, height, "rv-lines")
    parts = [head, *_axes(top, left, bottom, plot_h, days, step_w)]
    for s in series:
        points = [(left + step_w * (i + 0.5), bottom - plot_h * v / top) for i, v in enumerate(values[s.key])]
        path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
        parts.append(f'<polyline class="rv-line {s.css}" points="{path}"/>')
        for (x, y), day, value in zip(points, days, values[s.key], strict=True):
            dot = f'<circle class="rv-dot {s.css}" cx="{x:.1f}" cy="{y:.1f}" r="{4 if value else 2.5}"/>'
            parts.append(_link(dot, href(day, s.key) if href and value else None,
                               f"{day}: {_count(value, unit)} {s.label}"))
    parts += _legend(series, height - 6)
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 (every text above is escaped)


def _clip(label: str, width: int = 26) -> str:
    return label if len(label) <= width else label[:width - 1] + "…"


def bars(title: str, desc: str, rows: list[Bar], unit: str = "") -> SafeString:
    """Horizontal bars, one row each, the label left, the figure right of its bar."""
    row_h, label_w, pad = 26, 190, 8
    height = max(1, len(rows)) * row_h + 2 * pad
    top = nice_max(max((r.value for r in rows), default=0))
    said = [row.text or (_count(row.value, unit) if unit else _fmt(row.value)) for row in rows]
    words_w = max((len(w) + len(r.note) + 1 for w, r in zip(said, rows, strict=True)), default=0) * 6.6 + 12
    span = max(120.0, WIDTH - label_w - words_w)  # the longest figure and note still fit right of its bar
    head, _ = _open(title, desc, height, "rv-bars")
    parts = [head]
    if not rows:
        parts.append(f'<text class="rv-label rv-empty" x="{label_w}" y="{pad + 17}">none in this period</text>')
    for index, (row, words) in enumerate(zip(rows, said, strict=True)):
        y = pad + index * row_h
        parts.append(f'<text class="rv-label" x="{label_w - 8}" y="{y + 17}" text-anchor="end">'
                     f'{escape(_clip(row.label))}</text>')
        x, segments = float(label_w), row.parts or (("rv-c0", row.value),)
        shapes = []
        for css, value in segments:
            w = span * value / top
            if w > 0:
                shapes.append(f'<rect class="{css}" x="{x:.1f}" y="{y + 4}" width="{max(w, 1.5):.1f}" height="{row_h - 8}"/>')
                x += w
        words += f" {row.note}" if row.note else ""
        shapes.append(f'<text class="rv-value" x="{x + 6:.1f}" y="{y + 17}">{escape(words)}</text>')
        parts.append(_link("".join(shapes), row.href, f"{row.label}: {words}"))
    parts.append("</svg>")
    return mark_safe("".join(parts))  # noqa: S308 (every text above is escaped)
