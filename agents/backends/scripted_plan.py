"""Deciding what the scripted backend calls next: which tools, with which arguments.

Filling an argument has three outcomes: Ready (the values, possibly several to fan out over),
Wait (first make these lookup calls, e.g. get_account for a name) or Skip (it cannot be filled,
and why). A step is as ready as its least ready argument.
"""

from dataclasses import dataclass, field
from itertools import product

from agents.backends import scripted_text as text_rules
from agents.backends.scripted_history import LISTER, RESOLVER, Knowledge
from agents.backends.scripted_orders import Order

# Tools whose name starts with one of these change something: they are inferred only when the
# request says the verb, and never fanned out over every account.
SIDE_EFFECT_VERBS = frozenset(
    {"send", "delete", "remove", "create", "update", "write", "post", "cancel", "close", "drop", "wipe"}
)
# Request words that name what a tool is about without using its words.
SYNONYMS = {
    "risk": "health",
    "churn": "health",
    "churning": "health",
    "incident": "ticket",
    "issue": "ticket",
    "seat": "usage",
}


@dataclass(frozen=True)
class Scope:
    """Where a call's arguments come from: the request, or the sentence of an order."""

    text: str  # the words that say what to do
    full_text: str  # where addresses and email wording are read
    entities: tuple[str, ...]
    account_ids: tuple[str, ...]
    emails: tuple[str, ...]
    fan_out: bool  # with no account named, use every account list_accounts returned
    signature: str = ""  # how the send_email guide says to sign, if it says


@dataclass
class Fill:
    status: str  # "ready" | "wait" | "skip"
    values: list = field(default_factory=list)  # ready: argument dicts or single values
    needs: list = field(default_factory=list)  # wait: (tool, arguments) lookups to make first
    reason: str = ""  # skip: why
    description: str = ""  # calculator: what the expression means, for the answer


def scope_of(
    text: str,
    *,
    full_text: str | None = None,
    fan_out: bool = False,
    signature: str = "",
    fallback: Scope | None = None,
) -> Scope:
    entities = tuple(text_rules.entities(text))
    ids = tuple(text_rules.account_ids(text))
    addresses = tuple(text_rules.emails(full_text if full_text is not None else text))
    if fallback and not entities and not ids:
        entities, ids = fallback.entities, fallback.account_ids
    if fallback and not addresses:
        addresses = fallback.emails
    if fallback and not signature:
        signature = fallback.signature
    full = full_text if full_text is not None else text
    return Scope(text, full, entities, ids, addresses, fan_out, signature)


def is_side_effect(tool: str) -> bool:
    return tool.split("_", 1)[0].lower() in SIDE_EFFECT_VERBS


# --- Which tools ----------------------------------------------------------------------------


def inferred_steps(request: str, tool_names: list[str]) -> list[str]:
    """Tools whose name words appear in the request, most specific first among look-alikes."""
    said = text_rules.words(request)
    where: dict[str, int] = {}  # stem -> first position in the request
    for position, word in enumerate(said):
        for form in (text_rules.stem(word), SYNONYMS.get(text_rules.stem(word))):
            if form:
                where.setdefault(form, position)
    matched: dict[str, int] = {}  # tool -> where in the request it was first named
    for name in tool_names:
        if "calculat" in name:
            if text_rules.wants_arithmetic(request):
                matched[name] = 0
            continue
        parts = text_rules.tool_words(name)
        hits = [where[text_rules.stem(part)] for part in parts if text_rules.stem(part) in where]
        if not hits or 2 * len(hits) < len(parts):
            continue
        if is_side_effect(name) and text_rules.stem(parts[0]) not in where:
            continue
        matched[name] = min(hits)

    def stems_of(name):
        return frozenset(text_rules.stem(part) for part in text_rules.tool_words(name))

    def literal(name):  # words said exactly as the tool spells them, its verb included
        return sum(part in said for part in name.lower().split("_"))

    kept = []
    for name in matched:
        mine = stems_of(name)
        if any(stems_of(other) > mine for other in matched):
            continue  # delete_account says more than get_account about "delete the account"
        twins = [other for other in matched if stems_of(other) == mine]
        best = max(twins, key=lambda other: (literal(other), -tool_names.index(other)))
        if best == name:
            kept.append(name)
    return sorted(kept, key=lambda name: (matched[name], tool_names.index(name)))


# --- Arguments ------------------------------------------------------------------------------


def resolve_account(name: str, knowledge: Knowledge, tool_names, plan: list[str]) -> Fill:
    record = knowledge.find(name)
    if record:
        return Fill("ready", [record])
    status, record = knowledge.lookup(name)
    if status == "ok":
        return Fill("ready", [record])
    if status == "failed":
        return Fill("skip", reason=f"no account matches {name!r}")
    if status == "pending":
        return Fill("wait")
    listers = knowledge.made(LISTER)
    if LISTER in plan and (not listers or listers[0].envelope is None):
        return Fill("wait", needs=[(LISTER, {})])
    if RESOLVER in tool_names:
        return Fill("wait", needs=[(RESOLVER, {"query": name})])
    if LISTER in tool_names and not listers:
        return Fill("wait", needs=[(LISTER, {})])
    return Fill("skip", reason=f"no way to look up the account {name!r}")


def _combine(fills: list[Fill]) -> Fill:
    """Ready when every fill is; results of the ready ones are kept, failures dropped."""
    if any(fill.status == "wait" for fill in fills):
        return Fill("wait", needs=[need for fill in fills for need in fill.needs])
    values = [value for fill in fills if fill.status == "ready" for value in fill.values]
    if values:
        return Fill("ready", values)
    return Fill("skip", reason="; ".join(fill.reason for fill in fills) or "no account named")


def account_records(scope: Scope, knowledge: Knowledge, tool_names, plan, *, tool: str) -> Fill:
    if scope.account_ids:
        return Fill("ready", [knowledge.accounts.get(i, {"id": i}) for i in scope.account_ids])
    if scope.entities:
        return _combine([resolve_account(name, knowledge, tool_names, plan) for name in scope.entities])
    if scope.fan_out and not is_side_effect(tool):
        listed = knowledge.listed_ids()
        if listed is not None:
            return Fill("ready", [knowledge.accounts.get(i, {"id": i}) for i in listed])
        listers = knowledge.made(LISTER)
        if listers and listers[0].envelope is not None:
            return Fill("skip", reason="the account list is not available")
        return Fill("wait", needs=[(LISTER, {})])
    return Fill("skip", reason="the request names no account")


def calculation(scope: Scope, knowledge: Knowledge, tool_names, plan) -> Fill:
    """The expression to hand the calculator: "N% of <number or account field>" or bare arithmetic."""
    percent = text_rules.percent_request(scope.text)
    if percent:
        share, subject = percent
        number = text_rules.parse_number(subject)
        if number is not None:
            expression = f"{text_rules.number_text(number)} * {share} / 100"
            return Fill("ready", [expression], description=f"{share}% of {text_rules.number_text(number)}")
        field_word = text_rules.words(subject)[-1] if text_rules.words(subject) else ""
        key = text_rules.ATTRIBUTE_KEYS.get(field_word, field_word)
        names = [name for name in scope.entities if name in subject] or list(scope.entities)
        targets = Scope(scope.text, scope.full_text, tuple(names[:1]), scope.account_ids[:1], (), False)
        found = account_records(targets, knowledge, tool_names, plan, tool="calculator")
        if found.status != "ready":
            return found
        record = found.values[0]
        value = record.get(key)
        if value is None and names:
            status, _ = knowledge.lookup(names[0])
            if status == "none" and RESOLVER in tool_names:
                return Fill("wait", needs=[(RESOLVER, {"query": names[0]})])
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            return Fill("skip", reason=f"no {field_word or 'number'} to take {share}% of")
        owner = knowledge.names.get(record.get("id", ""), names[0] if names else record.get("id", ""))
        expression = f"{text_rules.number_text(value)} * {share} / 100"
        description = f"{share}% of {owner}'s {subject.split()[-1]} ({text_rules.number_text(value)})"
        return Fill("ready", [expression], description=description)
    expression = text_rules.plain_arithmetic(scope.text)
    if expression:
        return Fill("ready", [expression], description=expression)
    return Fill("skip", reason="the request has nothing to calculate")


def _value_for(tool: str, prop: str, scope: Scope, knowledge: Knowledge, tool_names, plan) -> Fill:
    key = prop.lower()
    if key in ("account_id", "account"):
        found = account_records(scope, knowledge, tool_names, plan, tool=tool)
        if found.status == "ready":
            found.values = [record["id"] for record in found.values]
        return found
    if key == "query" and "account" in tool:
        names = list(scope.entities) or list(scope.account_ids)
        return Fill("ready", names) if names else Fill("skip", reason="the request names no account")
    if key in ("query", "q", "topic", "search"):
        about = text_rules.topic(scope.text)
        return Fill("ready", [about]) if about else Fill("skip", reason="nothing to search for")
    if key in ("to", "email", "recipient", "address"):
        return (
            Fill("ready", [scope.emails[0]])
            if scope.emails
            else Fill("skip", reason="no email address given")
        )
    if key in ("subject", "body") and scope.emails:
        return Fill(
            "ready", [text_rules.email_arguments(scope.full_text, scope.emails[0], scope.signature)[key]]
        )
    if key == "expression":
        return calculation(scope, knowledge, tool_names, plan)
    if key == "name" and scope.entities:
        return Fill("ready", [scope.entities[0]])
    return Fill("skip", reason=f"nothing to use for {prop}")


def fill_step(tool: str, schema: dict, scope: Scope, knowledge: Knowledge, tool_names, plan) -> Fill:
    """Argument sets for one tool: every combination of the values found (fan-out)."""
    properties = (schema or {}).get("properties") or {}
    required = set((schema or {}).get("required") or [])
    chosen: list[tuple[str, list]] = []
    needs: list = []
    for prop in properties:
        fill = _value_for(tool, prop, scope, knowledge, tool_names, plan)
        if fill.status == "skip":
            if prop in required:
                return Fill("skip", reason=f"{tool}: {fill.reason}")
        elif fill.status == "wait":
            needs.extend(fill.needs)
        else:
            chosen.append((prop, list(dict.fromkeys(fill.values))))
    if needs:
        return Fill("wait", needs=needs)
    if not chosen:
        return Fill("ready", [{}])
    keys = [prop for prop, _ in chosen]
    return Fill(
        "ready", [dict(zip(keys, combo, strict=True)) for combo in product(*(values for _, values in chosen))]
    )


def fill_order(order: Order, request: Scope, knowledge: Knowledge, tools: dict, plan) -> Fill:
    if order.arguments is not None:
        return Fill("ready", [order.arguments])
    if order.tool == "send_email" and order.target:
        return Fill("ready", [text_rules.email_arguments(order.text, order.target, request.signature)])
    if order.tool == "delete_account" and order.target:
        if text_rules.ACCOUNT_ID_RE.fullmatch(order.target):
            return Fill("ready", [{"account_id": order.target}])
        found = resolve_account(order.target, knowledge, list(tools), plan)
        if found.status == "ready":
            found.values = [{"account_id": found.values[0]["id"]}]
        return found
    if order.tool in tools:
        scope = scope_of(order.text, fallback=request)
        return fill_step(
            order.tool, tools[order.tool].get("input_schema") or {}, scope, knowledge, list(tools), plan
        )
    return Fill("ready", [{}])
