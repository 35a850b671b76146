"""Standing approvals: an approver's yes, given once, for calls not yet made.

A member of a role grants, for a period (at most MAX_PERIOD), that one tool with arguments matching
a stated pattern runs without asking that role again, for one agent or all. The rules:

- Authority. The granter belongs to the role, and the role is the approver role of an enabled
  tool-approval policy (quorum 1) that covers the tool and the agent. At call time the approval
  stands in only for a policy that asks that same role: a secops approval never answers a policy
  that asks legal. A policy whose quorum is above 1 asks for several people, and one standing yes
  is one person: it is never covered (the frozen decision and the live policy are both read).
- Matching fails closed. Every argument of the call is named by the pattern and every argument
  the pattern names is in the call; each value is equal, as canonical JSON (types included), to
  the one stated or to one of an allow-list. One character different is no match.
- Live, not frozen. The run looks the approval up at the call, and counts the use in the same
  conditional update that checks it is neither revoked nor expired: a revocation committed
  before the call stops it.
- Separation of duties. It never applies to a run whose caller is the granter (as the run's row,
  snapshot or first event name them), or whose caller set up the granter's account; a granter
  who has since left the role, or is inactive, no longer stands behind it.
- Never for a tainted run, nor for a call whose arguments carry a secret or a look-alike address
  (runs.tool_batch checks those before it asks), nor in an eval (its sandbox has no lookup).

`uses` counts the calls it answered, each once: a step delivered again after a crash looks the
call up again (and its side effect still runs once, through the outbox), but a row per
(standing approval, run, call) keeps the second lookup from counting.
"""

import json
from datetime import timedelta

import jsonschema
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.db.models import F, Q, QuerySet
from django.utils import timezone

from agents.models import Agent, Tool
from agents.tools import arguments as tool_arguments
from core.access import access_of
from core.api_errors import Conflict, DomainError, Forbidden, NotFound
from core.permissions import reads_everything
from governance.models import Policy, PolicyType
from governance.roles import account_set_up_by
from runs.models import RunEvent, StandingApproval, StandingApprovalUse

MAX_PERIOD = timedelta(days=30)
MAX_ALLOWED_VALUES = 100
RULES = ("equals", "in")


class InvalidStanding(DomainError):
    code = "invalid"


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))


# --- the pattern (pure) ---------------------------------------------------------------------


def pattern_problems(pattern, input_schema: dict | None = None) -> dict[str, str]:
    """What is wrong with a pattern, by argument ('' for the whole): empty when it is sound. With the
    tool's schema, an argument it does not declare, or a required one left out, is refused too:
    either pattern would match no valid call."""
    if not isinstance(pattern, dict):
        return {"": 'an object of arguments, each {"equals": value} or {"in": [values]}'}
    problems = {}
    for name, rule in pattern.items():
        if not isinstance(rule, dict) or len(rule) != 1 or next(iter(rule)) not in RULES:
            problems[name] = 'must be {"equals": value} or {"in": [value, ...]}'
        elif "in" in rule and (not isinstance(rule["in"], list) or not 0 < len(rule["in"]) <= MAX_ALLOWED_VALUES):
            problems[name] = f'"in" takes a list of 1 to {MAX_ALLOWED_VALUES} values'
        elif "in" in rule and len({_canonical(v) for v in rule["in"]}) != len(rule["in"]):
            problems[name] = '"in" lists a value twice'
    schema = input_schema if isinstance(input_schema, dict) else {}
    declared = schema.get("properties")
    if isinstance(declared, dict) and schema.get("additionalProperties") is False:
        for name in pattern:
            if name not in declared:
                problems.setdefault(name, "the tool takes no such argument")
    for name in schema.get("required") or ():
        if name not in pattern:
            problems.setdefault(name, "the tool requires this argument: the pattern must state it")
    for name, rule in pattern.items():
        if name not in problems and isinstance(declared, dict) and (refused := _refused_value(rule, declared.get(name))):
            problems[name] = refused
    return problems


def _refused_value(rule: dict, schema) -> str | None:
    """Why the argument's schema refuses a value the rule allows (a call with it would be refused
    before it could match); None when it accepts them all, or cannot be read alone (a $ref)."""
    if not isinstance(schema, dict) or "$ref" in _canonical(schema):
        return None
    for value in [rule["equals"]] if "equals" in rule else rule["in"]:
        try:
            tool_arguments.validate(value, schema)
        except jsonschema.ValidationError as exc:
            return f"the tool's schema refuses {value!r}: {exc.message}"
        except jsonschema.SchemaError:
            return None
    return None


def matches(pattern: dict, arguments) -> bool:
    """Whether the call's arguments are exactly what the pattern allows, argument by argument."""
    if not isinstance(pattern, dict) or not isinstance(arguments, dict) or set(pattern) != set(arguments):
        return False
    for name, value in arguments.items():
        rule = pattern[name]
        if not isinstance(rule, dict) or len(rule) != 1:
            return False
        if "equals" in rule:
            allowed = [rule["equals"]]
        elif isinstance(rule.get("in"), list):
            allowed = rule["in"]
        else:
            return False
        if _canonical(value) not in {_canonical(v) for v in allowed}:
            return False
    return True


# --- who may see and grant ------------------------------------------------------------------


def standing_visible_to(user) -> QuerySet[StandingApproval]:
    """Compliance and superusers see every standing approval; others those of their roles."""
    queryset = StandingApproval.objects.select_related("agent", "role", "granted_by", "revoked_by")
    return queryset if reads_everything(user) else queryset.filter(role__in=user.groups.all())


def _covering_policies(*, tool: str, agent: Agent | None, role: Group) -> QuerySet[Policy]:
    """Enabled tool-approval policies asking `role` about `tool` (and `agent`: a policy for every
    agent covers it; for a grant to every agent, any policy asking about the tool)."""
    found = Policy.objects.filter(type=PolicyType.TOOL_APPROVAL, enabled=True, approver_role=role)
    found = [p for p in found.prefetch_related("agents") if tool in p.target_tools or "*" in p.target_tools]
    if agent is not None:
        found = [p for p in found if not p.agents.all() or agent in p.agents.all()]
    return Policy.objects.filter(pk__in=[p.pk for p in found])


def standing_grant(*, user, tool: str, agent: str | None, arguments: dict, role: str, reason: str, expires_at,
                   via: str, now=None) -> StandingApproval:
    """Grant a standing approval as `user`, within their role's authority (see the module)."""
    now = now or timezone.now()
    tool_row = Tool.objects.filter(name=tool).first()
    if tool_row is None:
        raise InvalidStanding(f"there is no tool named {tool!r}",
                              details={"tool": [f"Object with name={tool} does not exist."]})
    agent_row = None
    if agent:
        agent_row = Agent.objects.filter(slug=agent).first()
        if agent_row is None:
            raise InvalidStanding(f"there is no agent {agent!r}", details={"agent": [f"no agent named {agent!r}"]})
    if problems := pattern_problems(arguments, tool_row.input_schema):
        raise InvalidStanding("the argument pattern is not usable", details={"arguments": problems})
    if not reason or not reason.strip():
        raise InvalidStanding("a standing approval needs a reason", details={"reason": ["Say why."]})
    if expires_at <= now:
        raise InvalidStanding("it would expire before it starts", details={"expires_at": ["Must be in the future."]})
    if expires_at > now + MAX_PERIOD:
        raise InvalidStanding(f"a standing approval lasts {MAX_PERIOD.days} days at most",
                              details={"expires_at": [f"At most {MAX_PERIOD.days} days from now."]})
    role_row = Group.objects.filter(name=role).first()
    if role_row is None or role not in access_of(user).roles:
        # Superusers included: a standing yes is a decision, and decisions are their role's members'.
        raise Forbidden(f"only members of {role!r} may grant standing approvals as {role!r}")
    covering = _covering_policies(tool=tool, agent=agent_row, role=role_row)
    if not covering.exists():
        raise Forbidden(f"no enabled tool-approval policy asks {role!r} about {tool!r}"
                        + (f" for {agent!r}" if agent else "") + ": that is outside the role's authority")
    if not covering.filter(quorum__lte=1).exists():
        raise InvalidStanding(f"every policy asking {role!r} about {tool!r} needs more than one approver; "
                              "one person's standing yes cannot stand in for a quorum")
    return StandingApproval.objects.create(
        tool=tool, agent=agent_row, arguments=arguments, role=role_row, reason=reason, granted_by=user,
        granted_via=via, expires_at=expires_at)


def standing_revoke(*, standing_id, user, reason: str = "", now=None) -> StandingApproval:
    """Revoke it: the granter, a member of its role, or a superuser. Takes effect at the next call."""
    with transaction.atomic():
        standing = standing_visible_to(user).select_for_update(of=("self",)).filter(pk=standing_id).first()
        if standing is None:
            raise NotFound("no such standing approval")
        may = user.is_superuser or standing.granted_by_id == user.pk or standing.role.name in access_of(user).roles
        if not may:
            raise Forbidden(f"only its granter, members of {standing.role.name!r} or a superuser may revoke it")
        if standing.revoked_at is not None:
            raise Conflict("this standing approval was already revoked", details={"revoked_at": str(standing.revoked_at)})
        standing.revoked_at, standing.revoked_by, standing.revoke_reason = now or timezone.now(), user, reason
        standing.save(update_fields=["revoked_at", "revoked_by", "revoke_reason"])
    return standing


def standing_state(standing: StandingApproval, now=None) -> str:
    """active, expired or revoked."""
    if standing.revoked_at is not None:
        return "revoked"
    return "expired" if standing.expires_at <= (now or timezone.now()) else "active"


# --- use at call time -----------------------------------------------------------------------


def _callers(run) -> set[str]:
    names = {(run.snapshot or {}).get("caller", {}).get("username")}
    # Ordered by seq alone: the model's default order starts with the run, which joins runs_run to
    # sort by the run's own ordering.
    data = (RunEvent.objects.filter(run_id=run.pk, kind="run_created").order_by("seq")
            .values_list("data", flat=True).first())
    if isinstance(data, dict) and isinstance(data.get("caller"), dict):
        names.add(data["caller"].get("username"))
    return {name for name in names if isinstance(name, str) and name}


def standing_use(*, run, call: dict, approver_role: str, policy: dict | None, now=None) -> StandingApproval | None:
    """A live standing approval that answers this call for `approver_role`, its use counted; or None.
    `policy`: the frozen decision of the tool-approval policy that asked (None: no policy asked,
    and a standing approval answers only a policy)."""
    if not policy or not isinstance(policy.get("policy_id"), int):
        return None
    if not Policy.objects.filter(pk=policy["policy_id"], quorum__lte=1).exists():
        return None  # a quorum now, or the policy is gone: ask people
    now = now or timezone.now()
    callers = _callers(run)
    candidates = (StandingApproval.objects.select_related("granted_by")
                  .filter(tool=call["name"], role__name=approver_role, revoked_at__isnull=True, expires_at__gt=now)
                  .filter(Q(agent__isnull=True) | Q(agent_id=run.agent_id))
                  .exclude(granted_by_id=run.caller_id).exclude(granted_by__username__in=callers)
                  .order_by(F("agent_id").asc(nulls_last=True), "created_at", "id"))
    for standing in candidates:
        granter = standing.granted_by
        if not matches(standing.arguments, call["arguments"]):
            continue
        if not granter.is_active or not granter.groups.filter(pk=standing.role_id).exists():
            continue
        if account_set_up_by(user=granter, by_user_id=run.caller_id):
            continue
        if _count_use(standing, run=run, call_id=call["id"], now=now):
            return standing
    return None


def _count_use(standing: StandingApproval, *, run, call_id: str, now) -> bool:
    """Whether `standing` is still live, counting this call as one of its uses the first time only.

    The liveness check and the count are one conditional UPDATE, so a revocation that committed
    first wins. The use row is what makes the count once per call: a step delivered again after
    its worker died looks the same call up again, finds the row the first delivery left, and the
    increment goes back with the refused insert, while the answer (still live) stays yes."""
    live = StandingApproval.objects.filter(pk=standing.pk, revoked_at__isnull=True, expires_at__gt=now)
    try:
        with transaction.atomic():
            if not live.update(uses=F("uses") + 1):
                return False
            StandingApprovalUse.objects.create(standing=standing, run_id=run.pk, call_id=call_id)
    except IntegrityError:
        pass  # counted by an earlier delivery of this step; the UPDATE matched, so it is live
    return True


def receipt_entries(ids) -> list[dict]:
    """The standing approvals a run used, as its receipt lists them (in the order of `ids`)."""
    rows = {str(s.pk): s for s in StandingApproval.objects.filter(pk__in=ids).select_related("role", "granted_by",
                                                                                              "agent")}
    return [{"id": i, "tool": rows[i].tool, "agent": rows[i].agent.slug if rows[i].agent else None,
             "role": rows[i].role.name, "granted_by": rows[i].granted_by.get_username(),
             "granted_via": rows[i].granted_via, "expires_at": rows[i].expires_at.isoformat().replace("+00:00", "Z")}
            for i in ids if i in rows]
