"""The board's pictures as server-rendered SVG (pygal): a close's variances, a contract's cumulative position and a
close's timeline. Pure: rows in, SVG bytes out.

No chart loads or carries a script (`js=[]`, and pygal's inline configuration script is removed), so the SVG
is inert; a page shows it through `<img>`. pygal draws with floats, so
amounts become floats for the geometry only: every figure a person reads (tooltips, printed values) is the `Decimal`
written by `countersign.money.formatting.format_money` with its currency, passed to pygal as the value's label.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from typing import Any

import pygal
from pygal.style import Style

from countersign.money.formatting import format_money
from countersign.services.board_evidence import VarianceRow
from countersign.services.board_reads import PositionPoint, TimelineLine

SVG_MEDIA_TYPE = "image/svg+xml"
WIDTH, HEIGHT = 900, 460
MAX_BARS = 60  # accounts or tasks drawn; the tables on the page list them all

STYLE = Style(
    background="#ffffff",
    plot_background="#ffffff",
    foreground="#1f2933",
    foreground_strong="#1f2933",
    foreground_subtle="#7b8794",
    colors=("#2f5d8a", "#c98b2b", "#6b8f71", "#a23b3b", "#6d5a8a"),
    font_family="system-ui, sans-serif",
)


def _config(**options: Any) -> dict[str, Any]:
    return {"js": [], "style": STYLE, "width": WIDTH, "height": HEIGHT, "legend_at_bottom": True, **options}


def _thousands(value: float | None) -> str:
    """The y axis in thousands of the chart's currency (the title names it): 300000 -> '300k'."""
    return "" if value is None else f"{value / 1000:,.0f}k"


def _point(amount: Decimal | None, currency: str, locale: str) -> dict[str, Any] | None:
    if amount is None:
        return None
    return {"value": float(amount), "label": format_money(amount, currency, locale=locale)}


def _without_scripts(root: Any) -> Any:
    """pygal writes its configuration as an inline <script> even with `js=[]`; the picture needs none."""
    for parent in list(root.iter()):
        for child in list(parent):
            if str(child.tag).rsplit("}", 1)[-1] == "script":
                parent.remove(child)
    return root


def _render(chart: Any) -> bytes:
    chart.add_xml_filter(_without_scripts)
    svg: bytes = chart.render()
    return svg


def variance_svg(rows: Sequence[VarianceRow], currency: str, *, locale: str) -> bytes:
    """Each flagged account's actual against its budget and its prior period."""
    shown = list(rows)[:MAX_BARS]
    chart = pygal.Bar(
        **_config(title=f"Variance against budget and prior period ({currency})", x_label_rotation=20),
        value_formatter=_thousands,
        truncate_label=-1,
    )
    chart.x_labels = [f"{row.account} {row.name}" for row in shown]
    chart.add("Actual", [_point(row.actual, currency, locale) for row in shown])
    chart.add("Budget", [_point(row.budget, currency, locale) for row in shown])
    chart.add("Prior period", [_point(row.prior, currency, locale) for row in shown])
    return _render(chart)


def position_svg(points: Sequence[PositionPoint], currency: str, contract: str, *, locale: str) -> bytes:
    """A contract's cumulative position certificate by certificate: what each claims to date, what was certified
    before it, and what it asks for."""
    chart = pygal.Line(
        **_config(title=f"{contract}: cumulative position ({currency})", x_label_rotation=20),
        value_formatter=_thousands,
        truncate_label=-1,
    )
    chart.x_labels = [f"No. {p.number} {p.period}" + (" (held)" if not p.certified else "") for p in points]
    chart.add("Claimed gross to date", [_point(p.claimed_gross_to_date, currency, locale) for p in points])
    chart.add("Claimed net to date", [_point(p.claimed_net_to_date, currency, locale) for p in points])
    chart.add("Certified before it", [_point(p.certified_before, currency, locale) for p in points])
    chart.add("Amount due", [_point(p.amount_due, currency, locale) for p in points])
    return _render(chart)


@dataclass(frozen=True)
class TaskSpan:
    """From a task's first trace event to its last, in seconds after the close's first event."""

    task: str
    start_s: float
    end_s: float
    events: int


def task_spans(timeline: Sequence[TimelineLine]) -> list[TaskSpan]:
    """Each task's span over the close's timeline, in the order the tasks first appear."""
    if not timeline:
        return []
    origin = datetime.fromisoformat(timeline[0].ts)
    spans: dict[str, list[float]] = {}
    counts: dict[str, int] = {}
    for line in timeline:
        if line.task is None:
            continue
        at = (datetime.fromisoformat(line.ts) - origin).total_seconds()
        span = spans.setdefault(line.task, [at, at])
        span[1] = at
        counts[line.task] = counts.get(line.task, 0) + 1
    return [TaskSpan(task, start, end, counts[task]) for task, (start, end) in spans.items()][:MAX_BARS]


def timeline_svg(spans: Sequence[TaskSpan], *, title: str) -> bytes:
    """A Gantt-like bar per task: its first to its last trace event, seconds after the close began."""
    chart = pygal.XY(
        **_config(title=title, show_legend=False, x_title="seconds after the close's first event"),
        stroke_style={"width": 14, "linecap": "butt"},
        dots_size=3,
        value_formatter=lambda _: "",
        x_value_formatter=lambda seconds: f"{seconds:.3f} s",
    )
    count = len(spans)
    chart.y_labels = [{"label": span.task, "value": count - i} for i, span in enumerate(spans)]
    for i, span in enumerate(spans):
        height = count - i
        label = f"{span.task}: {span.events} events over {span.end_s - span.start_s:.3f} s"
        chart.add(
            span.task,
            [
                {"value": (span.start_s, height), "label": label},
                {"value": (max(span.end_s, span.start_s + 0.001), height), "label": label},
            ],
        )
    return _render(chart)
