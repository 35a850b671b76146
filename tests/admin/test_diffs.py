"""The diff shown in policy and skill histories. Pure: no database."""

from core.diffs import text_diff, values_diff


def test_only_changed_fields_are_listed_and_short_values_read_as_was_and_now():
    rows = values_diff({"priority": 50, "keywords": ["churn"], "name": "p"}, {"priority": 40, "keywords": ["churn"], "name": "p"})
    assert rows == [{"field": "priority", "before": "50", "after": "40", "lines": None}]


def test_multi_line_text_is_diffed_by_line_with_words_for_what_changed():
    before = "1. list\n2. score\n3. rank lowest first\n4. report"
    after = "1. list\n2. score\n3. rank worst first\n4. report"
    lines = values_diff({"content": before}, {"content": after})[0]["lines"]
    assert ("removed", "3. rank lowest first") in lines and ("added", "3. rank worst first") in lines
    assert ("same", "2. score") in lines


def test_a_created_record_diffs_against_nothing_and_a_deleted_one_against_nothing_after():
    assert values_diff(None, {"name": "p"}) == [{"field": "name", "before": "", "after": "p", "lines": None}]
    assert values_diff({"name": "p"}, None)[0]["after"] == ""


def test_far_apart_changes_are_shown_as_separate_hunks():
    before = "\n".join(f"line {i}" for i in range(20))
    after = before.replace("line 1\n", "line one\n").replace("line 18", "line eighteen")
    marks = [mark for mark, _ in text_diff(before, after)]
    assert "…" in marks and marks.count("added") == 2
