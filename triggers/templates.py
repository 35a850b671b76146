"""A trigger's input template, rendered in jinja2's sandbox (pure).

The template is written by a governance admin; the values come from the event. The sandbox
refuses attribute access to Python internals, and the event's values are data, never rendered
again as a template. A name the event does not have is an error (StrictUndefined), not an empty
string: a run whose input silently lost its ticket title would be worse than a refused delivery.
Output is plain text (no HTML escaping): it is a run's input, not a page.
"""

from jinja2 import StrictUndefined, TemplateError
from jinja2.sandbox import SandboxedEnvironment

MAX_REPEAT = 10_000


class TemplateProblem(ValueError):
    """The template does not compile, or does not render with this event."""


class _Env(SandboxedEnvironment):
    # `"x" * 10**9` in a template would build a gigabyte before any length check.
    intercepted_binops = frozenset({"*", "**"})

    def call_binop(self, context, operator, left, right):
        sequence = isinstance(left, (str, list)) or isinstance(right, (str, list))
        count = right if isinstance(right, int) else left if isinstance(left, int) else 0
        if (operator == "*" and sequence and abs(count) > MAX_REPEAT) or (operator == "**" and abs(right) > 64):
            raise TemplateProblem(f"the template's {operator} is limited")
        return super().call_binop(context, operator, left, right)


_env = _Env(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=False)


def check(template: str) -> str | None:
    """Why the template does not compile, or None."""
    try:
        _env.from_string(template)
    except TemplateError as exc:
        return f"template: {exc}"
    return None


def render(template: str, *, payload, trigger: str, fire: dict) -> str:
    """The run's input for this event. TemplateProblem when it cannot be rendered."""
    try:
        return _env.from_string(template).render(payload=payload, trigger=trigger, fire=fire).strip()
    except TemplateProblem:
        raise
    except (TemplateError, TypeError, ValueError, ArithmeticError) as exc:
        raise TemplateProblem(f"template: {exc}") from exc
