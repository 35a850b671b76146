"""How the scripted backend reads a request for the calculator of agents/tools/calculator.py, and
how its result reads in an answer.

Read by agents.backends.scripted_text.wording: a tool that takes an `expression` is a step when the
request holds arithmetic (ASKED), and the expression is written from the request (FILLS): "N% of
<a number or a record's field>" ("10% of Acme's ARR", the record found by its kind's resolver), or
a bare expression such as "12 * (3 + 4)". Pure: no ORM, no settings.
"""

import re

from agents.backends.scripted_plan import Fill, skip
from agents.backends.scripted_text import wording, words

_NUMBER = r"\d[\d,]*(?:\.\d+)?"
_ARITHMETIC_RE = re.compile(rf"\(*\s*{_NUMBER}\s*\)*(?:\s*[-+*/]\s*\(*\s*{_NUMBER}\s*\)*)+")


def number_text(value) -> str:
    """240000.0 -> "240000", 0.125 -> "0.12": how numbers read in an answer (the CRM's answers too)."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"{value:.2f}".rstrip("0").rstrip(".") if isinstance(value, float) else str(value)


def parse_number(text: str):
    try:
        value = float(text.strip().lstrip("$€£").replace(",", ""))
    except ValueError:
        return None
    return int(value) if value.is_integer() else value


def percent_request(text: str):
    """("10", "Acme's ARR") for "What is 10% of Acme's ARR?", else None."""
    match = re.search(r"(\d+(?:\.\d+)?)\s*(?:%|percent\b)\s*of\s+([^?!\n]+)", text or "", re.I)
    return (match.group(1), re.split(r"\.(?:\s|$)", match.group(2))[0].strip(" .,;:")) if match else None


def plain_arithmetic(text: str) -> str | None:
    """A bare expression such as "12 * (3 + 4)" in the text, spaced and without thousands commas,
    else None. A date (2026-12-01) is no subtraction."""
    for match in _ARITHMETIC_RE.finditer(text or ""):
        candidate = match.group(0).strip()
        if not re.match(r"^\d{4}-\d{2}-\d{2}$", candidate) and candidate.count("(") == candidate.count(")"):
            return re.sub(r"(?<=\d),(?=\d{3})", "", " ".join(candidate.split()))
    return None


def wants_arithmetic(text: str) -> bool:
    return bool(percent_request(text) or plain_arithmetic(text))


def calculation(plan, scope) -> tuple[Fill, str]:
    """The expression, and what it means when it is a percentage ("10% of Acme Corp's ARR (240000)")."""
    percent = percent_request(scope.text)
    if not percent:
        expression = plain_arithmetic(scope.text)
        return (Fill("ready", [expression]) if expression else skip("the request has nothing to calculate")), ""
    share, subject = percent
    number = parse_number(subject)
    if number is None:  # a record's field: "Acme's ARR"
        field_word = (words(subject) or [""])[-1]
        names = [name for name in scope.entities if name in subject] or list(scope.entities)
        kind = next((kind for kind in plan.kinds if plan.resolvers[kind]), None)
        found = plan.resolve(names[0], kind) if names and kind else skip(f"no record to take {share}% of")
        if found.status != "ready":
            return found, ""
        record = found.values[0]
        number = record.get(field_word, record.get(wording().synonyms.get(field_word)))
        if not isinstance(number, (int, float)) or isinstance(number, bool):
            return skip(f"no {field_word or 'number'} to take {share}% of"), ""
        owner = plan.names.get(record["id"], record["id"])
        subject = f"{owner}'s {subject.split()[-1]} ({number_text(number)})"
    else:
        subject = number_text(number)
    return Fill("ready", [f"{number_text(number)} * {share} / 100"]), f"{share}% of {subject}"


def calculated(call, said) -> str:
    """"10% of Acme Corp's ARR (240000) = 24000.": the expression itself unless it is a percentage we wrote."""
    result = call.data.get("result") if isinstance(call.data, dict) else call.data
    expression = str(call.arguments.get("expression", ""))
    fill, meaning = calculation(said, said.scope)
    return f"{meaning if meaning and fill.values == [expression] else expression} = {number_text(result)}."


ASKED = {"expression": wants_arithmetic}  # property -> does the request ask for a tool that takes it
FILLS = {"expression": lambda plan, tool, scope: calculation(plan, scope)[0]}  # property -> filler(plan, tool, scope)
ANSWERS = {"calculator": calculated}
