"""Decide which skills a request calls for, from their tags.

Pure: takes skill specs (dicts with at least name and tags) and the request text. A tag matches
as a whole word or phrase, case-insensitively: "health" does not match "healthcare". Tags list
their inflections explicitly ("churn", "churning") rather than relying on stemming, so a match
is always explainable by pointing at the tag.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=1024)
def _tag_pattern(tag: str) -> re.Pattern[str]:
    # Words of a phrase may be separated by any run of whitespace in the text.
    words = tag.split()
    body = r"\s+".join(re.escape(word) for word in words)
    return re.compile(rf"(?<!\w){body}(?!\w)", re.IGNORECASE)


def matched_tags(tags: list[str] | tuple[str, ...], text: str) -> list[str]:
    """The tags, in their given order, that occur in text as whole words or phrases."""
    found: list[str] = []
    for tag in tags or ():
        if not isinstance(tag, str) or not tag.strip() or tag in found:
            continue
        if _tag_pattern(tag).search(text):
            found.append(tag)
    return found


def match_skills(skills: list[dict], text: str) -> list[dict]:
    """Skills with at least one tag in text, most matched tags first, then by name.

    Each result is a copy of the skill dict with "matched": the tags that matched.
    """
    if not text:
        return []
    results = []
    for skill in skills:
        found = matched_tags(skill.get("tags") or (), text)
        if found:
            results.append({**skill, "matched": found})
    results.sort(key=lambda s: (-len(s["matched"]), s.get("name", "")))
    return results
