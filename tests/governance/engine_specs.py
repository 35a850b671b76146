"""Policy specs for the engine's tests: a sound policy of each type, changed by keyword."""

import itertools

from governance.engine import PolicySpec

_ids = itertools.count(1)

DEFAULTS = {
    "intent_guard": {"keywords": ("drop",), "response": "I can't help with that."},
    "playbook": {"keywords": ("churn",), "content": "1. List the accounts.\n2. Score them."},
    "tool_guide": {"target_tools": ("send_email",), "content": "Keep it short."},
    "tool_approval": {"target_tools": ("send_email",), "approver_role": "secops"},
    "output_formatter": {"content": "Summary:\n{answer}\n-- end"},
}


def make(type_: str, **overrides) -> PolicySpec:
    """A sound policy of `type_`; overrides change any field."""
    id_ = overrides.pop("id", next(_ids))
    values = {"id": id_, "name": f"{type_}-{id_}", "type": type_, "version": 1, **DEFAULTS.get(type_, {}), **overrides}
    for key in ("agents", "keywords", "target_tools"):
        values[key] = tuple(values.get(key, ()))
    return PolicySpec(**values)


# A regex no engine can compile: a policy holding it is unsound and must fail closed.
BROKEN = r"([unclosed"
