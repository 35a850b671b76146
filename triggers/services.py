"""Writers of triggers and service accounts: each a named function with its own transaction.

A webhook trigger's secret is returned once, by trigger_create and trigger_rotate_secret, and
kept only sealed (triggers.secrets). A schedule trigger's periodic task is written in the same
transaction as the trigger (triggers.schedules.sync).
"""

import jsonschema
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db import IntegrityError, transaction
from django.utils import timezone

from agents.models import Agent
from core.api_errors import Conflict, DomainError, NotFound
from triggers import schedules, secrets, templates
from triggers.models import ServiceAccount, Trigger

EDITABLE = ("description", "agent", "input_template", "service_account", "concurrency", "cron", "interval_seconds",
            "timezone", "missed", "payload_schema", "max_payload_bytes", "replay_window_seconds")
# A payload larger than the request limit never reaches the view (warrant settings, 256 KiB).
MAX_PAYLOAD_LIMIT = 256 * 1024
MAX_REPLAY_WINDOW = 24 * 3600


class InvalidTrigger(DomainError):
    code = "invalid"


def service_account_create(*, username: str, roles=(), description: str = "", by=None) -> ServiceAccount:
    """A user nobody signs in as (unusable password, not staff), in `roles`, flagged as a service account."""
    groups = list(Group.objects.filter(name__in=list(roles)))
    missing = sorted(set(roles) - {g.name for g in groups})
    if missing:
        raise InvalidTrigger(f"unknown roles: {', '.join(missing)}",
                             details={"roles": [f"no role named {name!r}" for name in missing]})
    User = get_user_model()
    with transaction.atomic():
        if User.objects.filter(**{User.USERNAME_FIELD: username}).exists():
            raise Conflict(f"a user {username!r} exists already", details={"username": username})
        user = User(**{User.USERNAME_FIELD: username}, is_staff=False, is_superuser=False)
        user.set_unusable_password()
        user.save()
        user.groups.set(groups)
        return ServiceAccount.objects.create(user=user, description=description, created_by=by)


def service_account_set_active(account: ServiceAccount, *, active: bool, by=None) -> ServiceAccount:
    """Disable (or enable again) a service account: while disabled its user is inactive, so its
    triggers' fires are refused (recorded, nothing starts) and nothing authenticates as it."""
    with transaction.atomic():
        account = ServiceAccount.objects.select_for_update().select_related("user").get(pk=account.pk)
        user = account.user
        if user.is_active != active:
            user.is_active = active
            user.save(update_fields=["is_active"])
            account.disabled_by, account.disabled_at = (None, None) if active else (by, timezone.now())
            account.save(update_fields=["disabled_by", "disabled_at"])
    return account


def service_account_by_name(username: str) -> ServiceAccount:
    account = ServiceAccount.objects.select_related("user", "created_by").filter(
        **{f"user__{get_user_model().USERNAME_FIELD}": username}).first()
    if account is None:
        raise NotFound(f"there is no service account {username!r}")
    return account


def _service_account(value) -> ServiceAccount:
    if isinstance(value, ServiceAccount):
        return value
    account = ServiceAccount.objects.select_related("user").filter(
        **{f"user__{get_user_model().USERNAME_FIELD}": value}).first()
    if account is None:
        problem = f"{value!r} is not a service account"
        raise InvalidTrigger(problem, details={"service_account": [problem]})
    return account


def _agent(value) -> Agent:
    if isinstance(value, Agent):
        return value
    agent = Agent.objects.filter(slug=value).first()
    if agent is None:
        problem = f"unknown agent {value!r}"
        raise InvalidTrigger(problem, details={"agent": [problem]})
    return agent


def trigger_problem(trigger: Trigger) -> dict | None:
    """{field: [why]} for a trigger that cannot be kept, or None."""
    problems = {}
    if problem := templates.check(trigger.input_template):
        problems["input_template"] = [problem]
    if not trigger.input_template.strip():
        problems["input_template"] = ["the input template is empty"]
    if trigger.kind == Trigger.Kind.SCHEDULE:
        if problem := schedules.schedule_problem(cron=trigger.cron, interval_seconds=trigger.interval_seconds,
                                                 tz=trigger.timezone):
            problems["schedule"] = [problem]
    elif trigger.cron or trigger.interval_seconds is not None:
        problems["schedule"] = ["only a schedule trigger has a cron expression or an interval"]
    if trigger.payload_schema is not None:
        try:
            jsonschema.Draft202012Validator.check_schema(trigger.payload_schema)
        except jsonschema.SchemaError as exc:
            problems["payload_schema"] = [f"not a JSON schema: {exc.message}"]
    if not 1 <= trigger.max_payload_bytes <= MAX_PAYLOAD_LIMIT:
        problems["max_payload_bytes"] = [f"between 1 and {MAX_PAYLOAD_LIMIT}"]
    if not 1 <= trigger.replay_window_seconds <= MAX_REPLAY_WINDOW:
        problems["replay_window_seconds"] = [f"between 1 and {MAX_REPLAY_WINDOW}"]
    return problems or None


def _check(trigger: Trigger) -> None:
    if problems := trigger_problem(trigger):
        raise InvalidTrigger("; ".join(f"{k}: {v[0]}" for k, v in problems.items()), details=problems)


def trigger_create(*, name: str, kind: str, agent, input_template: str, service_account, by=None,
                   enabled: bool = True, **options) -> tuple[Trigger, str]:
    """(the trigger, its webhook secret: shown now and never again; "" for a schedule)."""
    if kind not in Trigger.Kind.values:
        raise InvalidTrigger(f"kind is one of {', '.join(Trigger.Kind.values)}", details={"kind": [kind]})
    unknown = set(options) - set(EDITABLE)
    if unknown:
        raise InvalidTrigger(f"unknown fields: {', '.join(sorted(unknown))}")
    trigger = Trigger(name=name, kind=kind, agent=_agent(agent), input_template=input_template,
                      service_account=_service_account(service_account), enabled=enabled, created_by=by, **options)
    _check(trigger)
    secret = secrets.new_secret() if kind == Trigger.Kind.WEBHOOK else ""
    if secret:
        trigger.secret_encrypted, trigger.secret_rotated_at = secrets.seal(secret), timezone.now()
    try:
        with transaction.atomic():
            trigger.save(force_insert=True)
            schedules.sync(trigger)
    except IntegrityError:
        raise Conflict(f"a trigger {name!r} exists already", details={"name": name}) from None
    return trigger, secret


def trigger_update(trigger: Trigger, *, by=None, **changes) -> Trigger:
    unknown = set(changes) - set(EDITABLE)
    if unknown:
        raise InvalidTrigger(f"these fields cannot be changed: {', '.join(sorted(unknown))}")
    with transaction.atomic():
        trigger = Trigger.objects.select_for_update().get(pk=trigger.pk)
        for key, value in changes.items():
            value = _agent(value) if key == "agent" else _service_account(value) if key == "service_account" else value
            setattr(trigger, key, value)
        trigger.updated_by = by or trigger.updated_by
        _check(trigger)
        trigger.save()
        schedules.sync(trigger)
    return trigger


def trigger_pause(trigger: Trigger, *, by) -> Trigger:
    """No fire starts a run while paused (each is recorded skipped); its schedule stops in beat."""
    with transaction.atomic():
        trigger = Trigger.objects.select_for_update().get(pk=trigger.pk)
        trigger.enabled, trigger.paused_by, trigger.paused_at = False, by, timezone.now()
        trigger.save(update_fields=["enabled", "paused_by", "paused_at", "updated_at"])
        schedules.sync(trigger)
    return trigger


def trigger_resume(trigger: Trigger, *, by) -> Trigger:
    with transaction.atomic():
        trigger = Trigger.objects.select_for_update().get(pk=trigger.pk)
        trigger.enabled, trigger.paused_by, trigger.paused_at = True, None, None
        trigger.save(update_fields=["enabled", "paused_by", "paused_at", "updated_at"])
        schedules.sync(trigger)
    return trigger


def trigger_rotate_secret(trigger: Trigger, *, by=None) -> str:
    """A new secret, at once the only one that verifies (senders must be given it): shown once."""
    if trigger.kind != Trigger.Kind.WEBHOOK:
        raise Conflict("only a webhook trigger has a secret", details={"kind": trigger.kind})
    secret = secrets.new_secret()
    with transaction.atomic():
        locked = Trigger.objects.select_for_update().get(pk=trigger.pk)
        locked.secret_encrypted, locked.secret_rotated_at = secrets.seal(secret), timezone.now()
        locked.save(update_fields=["secret_encrypted", "secret_rotated_at", "updated_at"])
    return secret


def trigger_by_name(name: str) -> Trigger:
    trigger = Trigger.objects.select_related("agent", "service_account__user").filter(name=name).first()
    if trigger is None:
        raise NotFound(f"there is no trigger {name!r}")
    return trigger
