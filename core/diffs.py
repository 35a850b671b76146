"""Readable differences between two versions of a record. Pure: dicts and strings in, rows out."""

import difflib
import json


def _text(value) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def text_diff(before: str, after: str) -> list[tuple[str, str]]:
    """(mark, line) pairs, mark one of "added", "removed", "same", "…" (unchanged lines skipped)."""
    rows = []
    for group in difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines()).get_grouped_opcodes(2):
        if rows:
            rows.append(("…", ""))
        for tag, i1, i2, j1, j2 in group:
            if tag == "equal":
                rows += [("same", line) for line in before.splitlines()[i1:i2]]
                continue
            rows += [("removed", line) for line in before.splitlines()[i1:i2]]
            rows += [("added", line) for line in after.splitlines()[j1:j2]]
    return rows


def values_diff(old: dict | None, new: dict | None) -> list[dict]:
    """One row per field that differs: {field, before, after, lines}; `lines` for multi-line text."""
    old, new = old or {}, new or {}
    rows = []
    for field in sorted(set(old) | set(new)):
        before, after = old.get(field), new.get(field)
        if before == after:
            continue
        b, a = _text(before), _text(after)
        multiline = "\n" in b or "\n" in a or len(b) > 80 or len(a) > 80
        rows.append({"field": field, "before": b, "after": a, "lines": text_diff(b, a) if multiline else None})
    return rows
