"""The SVG charts (review/charts.py, pure): scaled, labelled, escaped, linked."""

import re

import pytest

from review.charts import Bar, Series, bars, lines_days, nice_max, stacked_days


def test_the_axis_top_is_a_round_number_at_or_above_the_largest_figure():
    assert [nice_max(v) for v in (0, 1, 3, 7, 10, 11, 45, 101, 999)] == [1, 1, 5, 10, 10, 20, 50, 200, 1000]


def test_labels_from_the_data_are_escaped_and_each_bar_links_with_its_figure_said():
    svg = bars("Policies", "desc <b>", [Bar('<script>alert("x")</script>', 3, "/admin/runs/run/?a=1&b=2", note="(blocked 3)"),
                                         Bar("quiet", 1)], unit="times")
    assert "<script>" not in svg and "&lt;script&gt;" in svg and "desc &lt;b&gt;" in svg
    assert '<a href="/admin/runs/run/?a=1&amp;b=2"' in svg
    assert "3 times (blocked 3)" in svg and ">1 time</text>" in svg  # the figure beside its bar, singular when 1
    assert svg.startswith('<svg class="rv-chart rv-bars"') and 'role="img"' in svg and svg.endswith("</svg>")


def test_a_day_chart_stacks_each_day_and_skips_empty_segments():
    days = ["2026-11-01", "2026-11-02"]
    series = [Series("succeeded", "succeeded", "rv-ok"), Series("failed", "failed", "rv-bad")]
    svg = stacked_days("Runs", "two days", days, series, {"succeeded": [3, 0], "failed": [1, 0]},
                       href=lambda day, key: f"/list/?day={day}&status={key}")
    rects = re.findall(r'<rect class="(rv-ok|rv-bad)" x="[\d.]+" y="([\d.]+)" width="[\d.]+" height="([\d.]+)"/>', svg)
    assert [r[0] for r in rects] == ["rv-ok", "rv-bad"]  # the second day has nothing to draw
    assert float(rects[0][2]) == pytest.approx(3 * float(rects[1][2]))  # heights in proportion
    assert "<title>2026-11-01: 3 runs succeeded</title>" in svg and "<title>2026-11-01: 1 run failed</title>" in svg
    assert "/list/?day=2026-11-01&amp;status=failed" in svg
    lines = lines_days("Risk", "d", days, series[:1], {"succeeded": [0, 2]}, href=lambda day, key: "/x/")
    assert lines.count("<circle") == 2 and lines.count('<a href="/x/"') == 1  # a zero is drawn, not linked


def test_an_empty_period_says_so_rather_than_drawing_an_empty_frame():
    svg = stacked_days("Runs", "none", ["2026-01-01"], [Series("succeeded", "succeeded", "rv-ok")], {"succeeded": [0]})
    assert "no runs in this period" in svg and "<a " not in svg
