"""Writes for agents: drafts, publishing (freezes the draft into an immutable version), model
profiles and the tool registry."""

import re

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.validators import RegexValidator
from django.db import IntegrityError, transaction

from agents.backends import HTTP_BACKENDS, UnknownBackend, backend_class, registered_names
from agents.models import Agent, AgentVersion, ModelProfile, Tool
from core import egress
from core.api_errors import Conflict


def agent_spec(agent: Agent) -> dict:
    """What a published version freezes: everything a run needs from the agent."""
    return {
        "name": agent.name,
        "instructions": agent.instructions,
        "model_profile": agent.model_profile.spec(),
        "tools": sorted(agent.tools.values_list("name", flat=True)),
        "output_schema": agent.output_schema,
        "max_turns": agent.max_turns,
        "max_tool_calls": agent.max_tool_calls,
        "max_tokens": agent.max_tokens,
        "deadline_seconds": agent.deadline_seconds,
        # Written only when set, so an agent without caps or a budget role publishes the spec it had.
        **({"tool_caps": dict(sorted(agent.tool_caps.items()))} if agent.tool_caps else {}),
        **({"budget_role": agent.budget_role.name} if agent.budget_role_id else {}),
    }


@transaction.atomic
def agent_publish(*, agent: Agent, user=None) -> tuple[AgentVersion, bool]:
    """Publish the draft as a new version; (current version, False) when nothing changed."""
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    spec = agent_spec(agent)
    current = agent.current_version
    if current is not None and current.spec == spec:
        return current, False
    version = AgentVersion.objects.create(
        agent=agent, version=(current.version + 1) if current else 1, spec=spec, published_by=user
    )
    return version, True


# --- drafts, profiles and the tool registry: writes from the API and the admin ---------------

ENV_VAR_NAME = RegexValidator(r"^[A-Z_][A-Z0-9_]*\Z", "Must look like an environment variable name: A-Z, 0-9 and _.")

# Variables that hold the platform's own secrets. A profile or tool source sends the value of the
# variable it names to its server, so naming one of these would hand Warrant's secret key or
# database password to whichever host a governance admin typed in.
PLATFORM_SECRET_PREFIXES = ("DJANGO_", "DATABASE", "CELERY_", "REDIS", "PG", "POSTGRES", "WARRANT_", "AXES_",
                            "DB_", "EMAIL_", "AWS_")
PLATFORM_SECRET_NAMES = ("SECRET_KEY", "HOME", "PATH", "USER", "LOGNAME", "SHELL", "PWD")


def tool_host_allowed(url: str) -> bool:
    """Whether a tool source's host is on WARRANT_TOOL_ALLOWED_HOSTS (empty: any host; its addresses are
    checked when connecting, core/egress.py)."""
    return egress.host_allowed(url, allowed_hosts=settings.WARRANT.get("TOOL_ALLOWED_HOSTS") or ())


def platform_secret(name: str) -> bool:
    """A variable of the platform itself (its database, broker, secret key ...), never sent out."""
    return name.startswith(PLATFORM_SECRET_PREFIXES) or name in PLATFORM_SECRET_NAMES


def secret_env_allowed(name: str) -> bool:
    """Whether WARRANT_SECRET_ENV_ALLOWED names `name` (or a prefix of it, written PREFIX*); empty allows none."""
    for entry in settings.WARRANT.get("SECRET_ENV_ALLOWED") or ():
        if entry == name or (entry.endswith("*") and name.startswith(entry[:-1])):
            return True
    return False


def check_key_env_name(name: str) -> None:
    """A variable a model profile or tool source may send out: a name the platform engineer allowed,
    and never the platform's own."""
    ENV_VAR_NAME(name)
    if platform_secret(name):
        raise ValidationError(f"{name} holds a secret of the platform itself and is never sent to a model or tool "
                              "server; put the key in a variable of its own, e.g. OPENAI_API_KEY.")
    if not secret_env_allowed(name):
        raise ValidationError(f"{name} is not among the variables this deployment lets profiles and tool sources "
                              "send out (WARRANT_SECRET_ENV_ALLOWED); the platform engineer lists the ones meant "
                              "for model and tool servers.")


class KeyEnvNameValidator(RegexValidator):
    """check_key_env_name as a field validator whose regex says the same (the API schema's `pattern`),
    with check_key_env_name's messages."""

    regex = (r"^(?!(?:" + "|".join(map(re.escape, PLATFORM_SECRET_PREFIXES)) + r")|(?:"
             + "|".join(PLATFORM_SECRET_NAMES) + r")\Z)"
             + ENV_VAR_NAME.regex.pattern.removeprefix("^"))

    def __call__(self, value):
        check_key_env_name(value)


# An http(s) URL with a host. Laxer than Django's URLValidator on purpose: model servers in a
# private network are often reached by bare host names (http://ollama:11434/v1) it refuses.
# The host is ASCII and bracket-free (an IDN in its punycode form): URL parsers refuse or rewrite
# the rest (urlsplit raises on "http://[" or on characters NFKC turns into '/', '#' or '@').
HTTP_URL_PATTERN = r"^https?://[A-Za-z0-9._~%-]+(?::[0-9]{1,5})?(?:[/?#]\S*)?$"
HTTP_URL = RegexValidator(HTTP_URL_PATTERN, "Must be an http:// or https:// URL with a host name or IPv4 address in "
                                            "ASCII and an optional port, e.g. http://ollama:11434/v1.")

MAX_TIMEOUT_SECONDS = 600.0
MAX_RETRIES = 10

_AGENT_FIELDS = (
    "name", "description", "instructions", "output_schema", "max_turns", "max_tool_calls", "max_tokens",
    "deadline_seconds", "tool_caps",
)
_PROFILE_FIELDS = (
    "backend", "base_url", "model", "api_key_env", "connect_timeout", "read_timeout", "max_retries", "fallbacks",
    "max_tokens", "temperature", "extra_body",
)
REQUIRES_APPROVAL_NEEDS_ROLE = "A tool that requires approval names the role that approves it."
_TOOL_FIELDS = ("enabled", "side_effect", "description", "timeout_seconds", "requires_approval", "approver_role")


def timeout_validator(value: float) -> None:
    # Written as a positive range check so NaN fails it too.
    if not (0 < value <= MAX_TIMEOUT_SECONDS):
        raise ValidationError(f"Must be more than 0 and at most {MAX_TIMEOUT_SECONDS:g} seconds.")


def _by_names(model, names: list[str], *, field: str, errors: dict) -> list:
    found = {obj.name: obj for obj in model.objects.filter(name__in=names)}
    missing = [name for name in names if name not in found]
    if missing:
        errors[field] = [f"Unknown {model._meta.verbose_name}: {', '.join(missing)}."]
    return [found[name] for name in dict.fromkeys(names) if name in found]


def _assign(obj, values: dict, fields) -> None:
    """Set those of `fields` that `values` gives (a partial update leaves the others as they are)."""
    for name in fields:
        if name in values:
            setattr(obj, name, values[name])


def _agent_apply(agent: Agent, values: dict) -> list[Tool] | None:
    """Set the draft's fields; tools and model profile arrive by name. Returns the tools to set."""
    _assign(agent, values, _AGENT_FIELDS)
    errors: dict[str, list[str]] = {}
    if "model_profile" in values:
        profiles = _by_names(ModelProfile, [values["model_profile"]], field="model_profile", errors=errors)
        agent.model_profile = profiles[0] if profiles else None
    tools = _by_names(Tool, list(values["tools"]), field="tools", errors=errors) if "tools" in values else None
    if "budget_role" in values:
        name = values["budget_role"]
        agent.budget_role = Group.objects.filter(name=name).first() if name else None
        if name and agent.budget_role is None:
            errors["budget_role"] = [f"no role named {name!r}"]
    if "tool_caps" in values or "tools" in values:
        names = [t.name for t in tools] if tools is not None else (
            list(agent.tools.values_list("name", flat=True)) if agent.pk else [])
        if problems := tool_caps_problems(agent.tool_caps, names):
            errors["tool_caps"] = problems
    if errors:
        raise ValidationError(errors)
    return tools


def tool_caps_problems(caps, tool_names) -> list[str]:
    """What is wrong with an agent's per-tool caps: a cap is a whole number of calls, at least 1,
    for a tool the agent has (a cap on another would never apply, and says the agent is not what
    its editor thinks)."""
    if not isinstance(caps, dict):
        return ['Must be an object of tool name to calls allowed per run, e.g. {"send_email": 1}.']
    problems = [f"{name}: the cap must be a whole number of calls, at least 1." for name, cap in caps.items()
                if isinstance(cap, bool) or not isinstance(cap, int) or cap < 1]
    if unknown := sorted(set(caps) - set(tool_names)):
        problems.append(f"Caps only tools the agent has; it does not have {', '.join(unknown)}.")
    return problems


def save_new(obj, *, key: str, exclude: list[str] | None = None) -> None:
    """Insert a row named by `key`; a name already taken is a conflict (409), not bad input."""
    value = getattr(obj, key)
    taken = Conflict(f"a {obj._meta.verbose_name} with {key} {value!r} already exists", details={key: value})
    if type(obj).objects.filter(**{key: value}).exists():
        raise taken
    obj.full_clean(exclude=exclude)
    try:
        with transaction.atomic():
            obj.save()
    except IntegrityError:
        raise taken from None  # lost a race with a concurrent create of the same name


@transaction.atomic
def agent_create(*, values: dict) -> Agent:
    """A new draft; nothing runs it until it is published."""
    agent = Agent(slug=values.get("slug", ""))
    tools = _agent_apply(agent, values)
    save_new(agent, key="slug", exclude=["tools"])
    if tools:
        agent.tools.set(tools)
    return agent


@transaction.atomic
def agent_update(*, agent: Agent, values: dict) -> Agent:
    """Edit the draft; published versions, and the runs that point at them, stay as they were."""
    # Locked like agent_publish does, so a publish never freezes half an edit.
    agent = Agent.objects.select_for_update().get(pk=agent.pk)
    tools = _agent_apply(agent, values)
    agent.full_clean(exclude=["tools"])
    agent.save()
    if tools is not None:
        agent.tools.set(tools)
    return agent


def _fallback_problems(name: str, fallbacks: list, graph: dict[str, list]) -> list[str]:
    if not isinstance(fallbacks, list) or not all(isinstance(f, str) for f in fallbacks):
        return ["Must be a list of model profile names."]
    problems = []
    if len(set(fallbacks)) != len(fallbacks):
        problems.append("Lists a profile more than once.")
    if name in fallbacks:
        problems.append("A profile may not fall back to itself.")
    missing = [f for f in fallbacks if f != name and f not in graph]
    if missing:
        problems.append(f"Unknown model profile: {', '.join(missing)}.")
    if problems:
        return problems
    # Walk what the fallbacks fall back to; reaching this profile again is a cycle.
    stack, seen = list(fallbacks), set()
    while stack:
        current = stack.pop()
        if current == name:
            return [f"Fallbacks form a cycle back to {name!r}."]
        if current not in seen:
            seen.add(current)
            stack.extend(graph.get(current) or [])
    return []


def _backend_problem(name: str) -> str:
    if name not in registered_names():
        # Decided on the name alone: a refused name imports nothing.
        return (f"Not a registered model backend: one of {', '.join(registered_names())} (a deployment registers "
                "others by name, in WARRANT_MODEL_BACKENDS or as warrant.backends entry points; a dotted path "
                "is never taken).")
    try:
        backend = backend_class(name)
    except (ImportError, ValueError, TypeError, AttributeError, UnknownBackend) as exc:
        return f"The backend registered as {name!r} cannot be loaded: {exc}"
    return "" if isinstance(backend, type) else f"The backend registered as {name!r} is not a class."


def model_profile_check(profile: ModelProfile) -> None:
    """Raise ValidationError (by field) unless the profile is usable: the API and the admin both call it."""
    errors: dict[str, list[str]] = {}
    checks = [("api_key_env", check_key_env_name), ("base_url", HTTP_URL),
              ("connect_timeout", timeout_validator), ("read_timeout", timeout_validator)]
    for field, check in checks:
        value = getattr(profile, field)
        if value in ("", None) and field in ("api_key_env", "base_url"):
            continue
        try:
            check(value)
        except ValidationError as exc:
            errors[field] = exc.messages
    if profile.base_url and "base_url" not in errors:
        try:
            egress.write_check(profile.base_url, allowed_hosts=settings.WARRANT.get("MODEL_ALLOWED_HOSTS") or (),
                               setting="WARRANT_MODEL_ALLOWED_HOSTS")
        except egress.EgressRefused as exc:
            errors["base_url"] = [f"This deployment does not let model profiles reach it: {exc}."]
    backend_problem = _backend_problem(profile.backend)
    if backend_problem:
        errors["backend"] = [backend_problem]
    elif profile.backend in HTTP_BACKENDS and not profile.base_url:
        errors["base_url"] = [f"The {profile.backend} backend needs the server's base URL (without /v1)."]
    if not (0 <= (profile.max_retries or 0) <= MAX_RETRIES):
        errors["max_retries"] = [f"Must be between 0 and {MAX_RETRIES}."]
    # Every profile row is locked so two concurrent edits cannot close a cycle between them.
    graph = {p.name: p.fallbacks for p in ModelProfile.objects.select_for_update().exclude(pk=profile.pk)}
    problems = _fallback_problems(profile.name, profile.fallbacks, graph)
    if problems:
        errors["fallbacks"] = problems
    if errors:
        raise ValidationError(errors)


@transaction.atomic
def model_profile_create(*, values: dict) -> ModelProfile:
    profile = ModelProfile(name=values.get("name", ""))
    _assign(profile, values, _PROFILE_FIELDS)
    model_profile_check(profile)
    save_new(profile, key="name")
    return profile


@transaction.atomic
def model_profile_update(*, profile: ModelProfile, values: dict) -> ModelProfile:
    """Change how a model is reached. The name is fixed: fallbacks and agent specs refer to it."""
    profile = ModelProfile.objects.select_for_update().get(pk=profile.pk)
    _assign(profile, values, _PROFILE_FIELDS)
    model_profile_check(profile)
    profile.full_clean()
    profile.save()
    return profile


class SideEffectDeclared(Conflict):
    """A person asked to declare a side-effecting tool read-only."""

    code = "side_effect_declared"


class DescribedBySource(Conflict):
    """A person asked to rewrite a discovered tool's description, which its source gives."""

    code = "described_by_source"


def tool_fixed_fields(tool: Tool) -> list[str]:
    """Which of the tool's fields no person may change, whatever the way in (the API's PATCH, the admin's form).

    A declared side effect: the tainted-run rule, the secret and look-alike checks, skill contracts, the
    outbox and the eval sandbox hang on it, so lifting it frees more than a trust mark does (which takes
    two governance admins); read-only is the word of the tool's code or its source, not a person's.
    A discovered tool's description: half of its approved fingerprint; rewritten here, the model would
    read words no one approved, a later sync would find nothing changed, and a re-approval's diff would
    be against the rewrite. It changes at the source only (the tool is then held until re-approved)."""
    return (["side_effect"] if tool.side_effect else []) + (["description"] if tool.tool_source_id else [])


def tool_fixed_check(tool: Tool, values: dict) -> None:
    """Refuse `values` that would change one of tool_fixed_fields(tool), `tool` as it is stored now."""
    fixed = tool_fixed_fields(tool)
    if "side_effect" in fixed and values.get("side_effect", True) is False:
        raise SideEffectDeclared(
            f"{tool.name} is declared side-effecting and no one may declare it read-only here: that would lift "
            "the approval every tainted run's call of it needs; its registration or its source decides it",
            details={"side_effect": tool.name})
    if "description" in fixed and values.get("description", tool.description) != tool.description:
        raise DescribedBySource(
            f"{tool.name}'s description is what its source {tool.tool_source.name} says, as approved; it changes "
            "only at the source (the tool is then held until re-approved)", details={"description": tool.name})


@transaction.atomic
def tool_update(*, tool: Tool, values: dict, user=None) -> Tool:
    """Switch a tool on or off, or retune it. Runs already started keep the tools they froze.
    What tool_fixed_fields names is refused (409), checked on the row as locked here. An approval it
    tightens is sealed into the trust chain as `user`'s (the platform's when None) in this
    transaction (agents.trust_approval.approval_tightened); a loosening comes here only from a
    confirmed proposal, which seals it itself."""
    from agents.trust_approval import approval_state, approval_tightened  # it imports this module

    tool = Tool.objects.select_related("tool_source").select_for_update(of=("self",)).get(pk=tool.pk)
    before = approval_state(tool)
    tool_fixed_check(tool, values)
    _assign(tool, values, _TOOL_FIELDS)
    if "timeout_seconds" in values:
        try:
            timeout_validator(tool.timeout_seconds)
        except ValidationError as exc:
            raise ValidationError({"timeout_seconds": exc.messages}) from None
    if tool.requires_approval and tool.approver_role_id is None:
        # Every run that calls it would fail closed (governance.gate): refuse it here.
        raise ValidationError({"approver_role": [REQUIRES_APPROVAL_NEEDS_ROLE]})
    tool.full_clean()
    tool.save()
    approval_tightened(tool, before, user=user)
    return tool
