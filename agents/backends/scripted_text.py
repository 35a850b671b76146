"""Reading text the way the scripted backend does: prompt sections, words, names, numbers.

Everything here is a pure function of its arguments. The rules are deliberately plain (regular
expressions and word lists) so that a test can predict what the backend will read in a sentence.
"""

import re

ACCOUNT_ID_RE = re.compile(r"\bA-\d{3,}\b")
EMAIL_RE = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
# `name` or `name(arguments)` in a playbook or skill step.
BACKTICK_RE = re.compile(r"`([A-Za-z_][A-Za-z0-9_]*)(?:\([^`]*\))?`")
STEP_HEADINGS = ("Playbook:", "Skill:")
# The other sections the harness writes; anything else is part of the section before it.
HARNESS_HEADINGS = ("Skills available", "Output format", "Tools", "Tool guide")
_CLAUSE_SPLIT_RE = re.compile(r"[.;,:!?\n]")
_NEGATION_RE = re.compile(r"\b(?:never|not|don't|do not|must not|avoid|without)\b", re.I)

_SENTENCE_SPLIT_RE = re.compile(r"(?<=[.!?])\s+|\n+")
_POSSESSIVE_RE = re.compile(r"['’]s?$")
_WORD_RE = re.compile(r"[A-Za-z0-9]+(?:['’][A-Za-z]+)?")

# Capitalised words that are not names: question words, imperatives, fillers, calendar words.
COMMON_WORDS = frozenset(
    """a also an and any are as at be but by can could did do does each every for from give had has
    have hello hey hi how however i i'm if in is it its let me my no not now of ok okay on or our
    please regards show so summarise summarize tell thanks thank the their then there these this
    those to us was we what when where which who why will with would yes you your
    monday tuesday wednesday thursday friday saturday sunday january february march april may june
    july august september october november december ignore note important system""".split()
)
STOPWORDS = COMMON_WORDS | frozenset(
    """all about am been being base did does doing done don't just knowledge kb more most much
    say says should some such than that them they too very""".split()
)
# Words in a tool name that do not say what it is about (verbs like get/list, joiners), left out
# when matching tool names against a request.
GENERIC_VERBS = frozenset({"get", "list", "compute", "search", "fetch", "find", "read", "by", "for", "of"})


# --- The system prompt ----------------------------------------------------------------------


def step_sections(system: str) -> list[str]:
    """The bodies of the '## Playbook: …' and '## Skill: …' sections, in order.

    A skill body has headings of its own ("## Steps", "## Notes"), so a step section runs on until
    the next heading the harness writes, not merely the next "## " line.
    """
    bodies: list[str] = []
    inside = False
    for part in re.split(r"^## ", system or "", flags=re.MULTILINE)[1:]:
        heading, _, body = part.partition("\n")
        heading = heading.strip()
        if heading.startswith(STEP_HEADINGS):
            bodies.append(body)
            inside = True
        elif heading.startswith(HARNESS_HEADINGS):
            inside = False
        elif inside:
            bodies[-1] += f"\n{heading}\n{body}"
    return bodies


def planned_steps(system: str, tool_names) -> list[str]:
    """Backticked tool names from the step sections, first mention first, only tools on offer.

    A mention in a clause that says not to use it ("Never call `send_email`.") is no step.
    """
    steps: list[str] = []
    for body in step_sections(system):
        for match in BACKTICK_RE.finditer(body):
            name = match.group(1)
            clause = _CLAUSE_SPLIT_RE.split(body[: match.start()])[-1]
            if name in tool_names and name not in steps and not _NEGATION_RE.search(clause):
                steps.append(name)
    return steps


# --- Words and sentences --------------------------------------------------------------------


def sentences(text: str) -> list[str]:
    return [part.strip() for part in _SENTENCE_SPLIT_RE.split(text or "") if part.strip()]


def sentence_around(text: str, needle: str) -> str:
    for sentence in sentences(text):
        if needle in sentence:
            return sentence
    return text.strip()


def stem(word: str) -> str:
    """A crude stem, applied alike to tool names and requests: tickets ~ ticket, healthy ~ health."""
    word = _POSSESSIVE_RE.sub("", word.lower())
    if word.endswith("ies") and len(word) > 4:
        word = word[:-3] + "y"
    elif word.endswith("s") and not word.endswith("ss") and len(word) > 3:
        word = word[:-1]
    if word.endswith("y") and len(word) > 4:
        word = word[:-1]
    return word


def words(text: str) -> list[str]:
    """Lower-case words, underscores split, possessives dropped."""
    return [_POSSESSIVE_RE.sub("", w.lower()) for w in _WORD_RE.findall((text or "").replace("_", " "))]


def tool_words(name: str) -> list[str]:
    return [w for w in name.lower().split("_") if w and w not in GENERIC_VERBS]


# --- Entities -------------------------------------------------------------------------------


def _is_name_word(token: str) -> bool:
    bare = _POSSESSIVE_RE.sub("", token)
    if not bare or not bare[0].isupper() or bare.lower() in COMMON_WORDS:
        return False
    if len(bare) > 1 and bare.isupper():  # ARR, NPS, SSO: acronyms, not names
        return False
    return all(ch.isalpha() or ch in "&-" for ch in bare)


def entities(text: str) -> list[str]:
    """Runs of capitalised words that are not a sentence's first word nor common words.

    "How healthy is Acme Corp?" -> ["Acme Corp"]; "What is 10% of Acme's ARR?" -> ["Acme"].
    """
    cleaned = EMAIL_RE.sub(" ", ACCOUNT_ID_RE.sub(" ", text or ""))
    found: list[str] = []
    for sentence in sentences(cleaned):
        run: list[str] = []
        for index, raw in enumerate(sentence.split()):
            token = raw.strip("\"'“”‘’()[]{}")
            breaks_after = bool(re.search(r"[,;:.!?)\]}]$", raw.rstrip("\"'”’")))
            token = token.rstrip(",;:.!?")
            if index > 0 and _is_name_word(token):
                run.append(_POSSESSIVE_RE.sub("", token))
                # A possessive or punctuation ends the name: "Acme's ARR", "Globex, Initech".
                if _POSSESSIVE_RE.search(token) or breaks_after:
                    _close(run, found)
            else:
                _close(run, found)
        _close(run, found)
    return found


def _close(run: list[str], found: list[str]) -> None:
    if run:
        name = " ".join(run)
        if name not in found:
            found.append(name)
        run.clear()


def account_ids(text: str) -> list[str]:
    return list(dict.fromkeys(ACCOUNT_ID_RE.findall(text or "")))


def emails(text: str) -> list[str]:
    return list(dict.fromkeys(match.rstrip(".") for match in EMAIL_RE.findall(text or "")))


# --- Topics and email text ------------------------------------------------------------------

_TOPIC_RES = (
    re.compile(r"\b(?:about|regarding|concerning)\s+(.+)", re.I),
    re.compile(r"\b(?:on|for)\s+(.+)", re.I),
)


def _trim_phrase(phrase: str) -> str:
    phrase = re.split(r"[?!\n]|\.(?:\s|$)", phrase)[0].strip(" .,;:\"'")
    return re.sub(r"^(?:the|our|a|an)\s+", "", phrase, flags=re.I)


def topic(text: str) -> str:
    """What a search is about: the phrase after about/regarding, else the request's content words."""
    first = sentences(text)[0] if sentences(text) else ""
    for pattern in _TOPIC_RES:
        match = pattern.search(first)
        if match and _trim_phrase(match.group(1)):
            return _trim_phrase(match.group(1))
    content = [w for w in words(first) if w not in STOPWORDS and not w.isdigit()]
    return " ".join(content)


def signature(tool_description: str) -> str:
    """The sign-off a tool guide asks for ("sign as 'Customer Success'"), else ""."""
    match = re.search(
        r"\bsign(?:ed)?(?: off)? as ['\"‘“]([^'\"’”\n]{1,60})['\"’”]", tool_description or "", re.I
    )
    return match.group(1).strip() if match else ""


def email_arguments(text: str, address: str, sign_as: str = "") -> dict:
    """A short, polite email to `address` about whatever the ordering sentence names."""
    sentence = sentence_around(text, address)
    rest = sentence.split(address, 1)[-1]
    match = re.search(r"\b(?:about|regarding|concerning|re:?)\s+(.+)", rest, re.I)
    about = re.split(r"[?!\n]|\.(?:\s|$)", match.group(1))[0].strip(" .,;:\"'") if match else ""
    subject = re.sub(r"^(?:the|our|a|an)\s+", "", about, flags=re.I)
    subject = subject[:1].upper() + subject[1:] if subject else "Following up"
    local = re.split(r"[._+-]", address.split("@")[0])[0]
    greeting = f"Hi {local.capitalize()}," if local.isalpha() else "Hello,"
    opening = f"I am writing about {about}." if about else "I am following up on your account."
    body = (
        f"{greeting}\n\n{opening} Please let me know if you have any questions or would like "
        "to talk it through.\n\nKind regards" + (f",\n{sign_as}" if sign_as else "")
    )
    return {"to": address, "subject": subject, "body": body}


# --- Arithmetic -----------------------------------------------------------------------------

_NUMBER = r"\d[\d,]*(?:\.\d+)?"
PERCENT_OF_RE = re.compile(r"(\d+(?:\.\d+)?)\s*(?:%|percent\b)\s*of\s+([^?!\n]+)", re.I)
_WORD_OPERATORS = (
    (r"\bmultiplied by\b", "*"),
    (r"\btimes\b", "*"),
    (r"\bdivided by\b", "/"),
    (r"\bplus\b", "+"),
    (r"\bminus\b", "-"),
)
_ARITHMETIC_RE = re.compile(rf"\(*\s*{_NUMBER}\s*\)*(?:\s*[-+*/×÷x]\s*\(*\s*{_NUMBER}\s*\)*)+")
_DATE_RE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
# What a word in "X's ARR" means in an account record.
ATTRIBUTE_KEYS = {"arr": "arr", "revenue": "arr", "nps": "nps", "seats": "seats", "seat": "seats"}


def number_text(value) -> str:
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, float):
        return f"{value:.2f}".rstrip("0").rstrip(".")
    return str(value)


def parse_number(text: str):
    cleaned = text.strip().lstrip("$€£").replace(",", "")
    try:
        value = float(cleaned)
    except ValueError:
        return None
    return int(value) if value.is_integer() else value


def percent_request(text: str):
    """("10", "Acme's ARR") for "What is 10% of Acme's ARR?", else None."""
    match = PERCENT_OF_RE.search(text or "")
    if not match:
        return None
    return match.group(1), re.split(r"\.(?:\s|$)", match.group(2))[0].strip(" .,;:")


def plain_arithmetic(text: str) -> str | None:
    """A bare expression such as "12 * (3 + 4)" written in the text, normalised, else None."""
    spoken = text or ""
    for pattern, symbol in _WORD_OPERATORS:
        spoken = re.sub(pattern, symbol, spoken, flags=re.I)
    for match in _ARITHMETIC_RE.finditer(spoken):
        candidate = match.group(0).strip()
        if _DATE_RE.match(candidate) or candidate.count("(") != candidate.count(")"):
            continue
        candidate = re.sub(r"(?<=\d)\s*[x×]\s*(?=\d)", " * ", candidate).replace("÷", "/")
        return re.sub(r"(?<=\d),(?=\d{3})", "", " ".join(candidate.split()))
    return None


def wants_arithmetic(text: str) -> bool:
    lowered = words(text)
    return bool(
        percent_request(text)
        or plain_arithmetic(text)
        or {"calculate", "calculator", "calculation"} & set(lowered)
    )
