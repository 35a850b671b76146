"""Writes for tool sources: register, sync (discover tools), hold a changed tool, re-approve it.

Discovery is untrusted input. A new tool arrives disabled and granted to no role; a known tool
whose description or input schema differs from what was approved is held (never callable)
with the change kept for review, until a governance admin re-approves it.
"""

import difflib
import json
import logging
import re

import jsonschema
from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone

from agents.models import Tool, ToolSource, tool_fingerprint
from agents.services import ENV_VAR_NAME, HTTP_URL, save_new, check_key_env_name, timeout_validator
from agents.tools.allowed import command_allowed, python_path_allowed, tool_egress_rule
from agents.tools import mcp, openapi, pytools
from agents.tools.deadline import ToolTimeout
from agents.trust import tool_source_trust
from core import egress
from core.api_errors import Conflict

logger = logging.getLogger(__name__)

SOURCE_FIELDS = ("description", "command", "env_passthrough", "url", "document", "path", "base_url",
                 "auth_header", "auth_env", "timeout_seconds", "approver_role", "enabled")
# What decides who answers for a source: a trust mark vouched for these, so a change of one untrusts it.
REACH_FIELDS = ("command", "env_passthrough", "url", "document", "path", "base_url", "auth_header", "auth_env")
HEADER_NAME = re.compile(r"^[A-Za-z0-9-]{1,64}$")


# Why a sync failed, as recorded on the source and reported with `ok: false`. A source that cannot
# be reached or offers something unusable is a fact about the source, not a refused request: the
# sync answers with its report (like a model profile's test), and the source's tools are untouched.
SYNC_ERROR_CODES = {
    "source_unavailable": "the source could not be reached or did not answer as its kind should",
    "source_timeout": "the source did not answer within the source's timeout",
    "source_invalid": "the source answered, but what it offers cannot be registered "
                      "(an unusable document or signature, two tools under one name)",
    "source_not_allowed": "the source as stored breaks this deployment's rules (a program or module "
                          "no longer allowed, a field no longer valid)",
    "tool_name_taken": "a tool it offers would take the name of a tool outside this source (the sync answers 409)",
}


class _SyncFailed(Exception):
    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code, self.message = code, message


def tool_source_check(source: ToolSource) -> None:
    """Every field problem at once, keyed by field (what the API and the admin form show)."""
    errors: dict[str, list[str]] = {}
    kind = source.kind
    if kind == ToolSource.Kind.MCP_STDIO:
        if not (isinstance(source.command, list) and source.command and all(isinstance(p, str) and p for p in source.command)):
            errors["command"] = ["An mcp_stdio source needs its command: a list of the program and its arguments."]
        elif not command_allowed(source.command[0]):
            errors["command"] = [f"{source.command[0]!r} is not among the programs this deployment allows "
                                 "(WARRANT_MCP_STDIO_COMMANDS; an empty list allows none)."]
    elif source.command:
        errors["command"] = ["Only an mcp_stdio source has a command."]
    if not all(isinstance(n, str) and ENV_VAR_NAME.regex.match(n) for n in source.env_passthrough or []):
        errors["env_passthrough"] = ["Must be a list of environment variable names."]
    else:
        for name in source.env_passthrough or []:
            try:
                check_key_env_name(name)  # a stdio server never sees the platform's own secrets
            except ValidationError as exc:
                errors.setdefault("env_passthrough", []).extend(exc.messages)
    if kind == ToolSource.Kind.MCP_HTTP and not source.url:
        errors["url"] = ["An mcp_http source needs its endpoint URL."]
    if kind == ToolSource.Kind.OPENAPI and not (source.url or source.path or source.document is not None):
        errors["document"] = ["An openapi source needs its document, a file path or a URL."]
    if kind == ToolSource.Kind.PYTHON and not source.path:
        errors["path"] = ["A python source needs the dotted path of a module or a function."]
    elif kind == ToolSource.Kind.PYTHON and not _python_path_allowed(source.path):
        # Importing a module runs its code: a deployment may keep sources to its own packages.
        errors["path"] = [f"{source.path!r} is outside the modules this deployment allows "
                          "(WARRANT_PYTHON_TOOL_MODULES; an empty list allows none)."]
    for field in ("url", "base_url"):
        if getattr(source, field):
            try:
                HTTP_URL(getattr(source, field))
            except ValidationError as exc:
                errors[field] = exc.messages
            else:
                try:
                    egress.write_check(getattr(source, field), **tool_egress_rule())
                except egress.EgressRefused as exc:
                    errors[field] = [f"This deployment does not let tool sources reach it: {exc}."]
    if source.auth_header and not HEADER_NAME.match(source.auth_header):
        errors["auth_header"] = ["Must be an HTTP header name."]
    if bool(source.auth_header) != bool(source.auth_env):
        errors["auth_env"] = ["Give both the header and the environment variable holding its value, or neither."]
    elif source.auth_env and not ENV_VAR_NAME.regex.match(source.auth_env):
        errors["auth_env"] = ["Must be an environment variable name (the value itself is never stored)."]
    elif source.auth_env:
        try:
            check_key_env_name(source.auth_env)
        except ValidationError as exc:
            errors["auth_env"] = exc.messages
    try:
        timeout_validator(source.timeout_seconds)
    except ValidationError as exc:
        errors["timeout_seconds"] = exc.messages
    if errors:
        raise ValidationError(errors)


def _python_path_allowed(path: str) -> bool:
    return python_path_allowed(path)


def _apply(source: ToolSource, values: dict) -> None:
    for field in SOURCE_FIELDS:
        if field in values:
            setattr(source, field, values[field])


@transaction.atomic
def tool_source_create(*, values: dict, user=None) -> ToolSource:
    source = ToolSource(name=values.get("name", ""), kind=values.get("kind", ""), created_by=user)
    _apply(source, values)
    tool_source_check(source)
    save_new(source, key="name")  # a name already taken is a conflict (409)
    return source


@transaction.atomic
def tool_source_update(*, source: ToolSource, values: dict, user=None) -> ToolSource:
    """Change how a source is reached; its tools are re-checked at the next sync (and at every call).

    A trusted source pointed elsewhere (another program, endpoint, document, module or credential)
    is untrusted in the same transaction, recorded as `user`'s change (the platform's when None):
    two governance admins vouched for what answered before, and one alone must not carry their mark
    over to a server of their choosing. Trusting it again takes two, as the first time. An approver
    role named where there was none (a tightening: changing or clearing one is proposed) is sealed
    as `user`'s (agents.trust_approval.approval_tightened)."""
    from agents.trust_approval import approval_state, approval_tightened  # it imports this module

    source = ToolSource.objects.select_for_update().get(pk=source.pk)
    before = approval_state(source)
    moved = [field for field in REACH_FIELDS if field in values and values[field] != getattr(source, field)]
    _apply(source, values)
    tool_source_check(source)
    source.full_clean()
    source.save()
    approval_tightened(source, before, user=user)
    if moved and source.trusted:
        source = tool_source_trust(source=source, trusted=False, user=user, platform=user is None,
                                   reason=f"untrusted on moving it: {', '.join(moved)} changed")
    return source


def _tool_name(source: ToolSource, remote: str) -> str:
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", f"{source.name}__{remote}")
    return name[:64]


def _discover(source: ToolSource) -> list[dict]:
    """What the source offers now, as dicts of the fields a Tool row takes from it."""
    if source.kind in (ToolSource.Kind.MCP_STDIO, ToolSource.Kind.MCP_HTTP):
        return [{"remote_name": t.name, "description": t.description, "input_schema": t.input_schema,
                 "read_only": t.read_only, "binding": {}, "handler": "", "source": Tool.Source.MCP}
                for t in mcp.discover(source)]
    if source.kind == ToolSource.Kind.OPENAPI:
        document = openapi.load_document(source)
        if not source.base_url:
            source.base_url = openapi.default_base_url(source, document)
        return [{"remote_name": op.name, "description": op.description, "input_schema": op.input_schema,
                 "read_only": op.read_only, "binding": op.binding, "handler": "", "source": Tool.Source.OPENAPI}
                for op in openapi.operations(document)]
    return [{"remote_name": f.name, "description": f.description, "input_schema": f.input_schema,
             "read_only": True, "binding": {"style": "kwargs"}, "handler": f.handler, "source": Tool.Source.PYTHON}
            for f in pytools.functions_at(source.path)]


def _approver_role(source: ToolSource) -> Group | None:
    if source.approver_role_id:
        return source.approver_role
    return Group.objects.filter(name=settings.WARRANT.get("TAINT_APPROVER_ROLE", "")).first()


def tool_source_sync(*, source: ToolSource) -> dict:
    """Discover the source's tools and reconcile the registry. Slow I/O first, then one transaction.

    The report says `ok` and what was created, changed, held or left out; a failed sync reports
    its error, records it on the source and changes none of its tools. The one refusal is a
    discovered tool whose name is taken outside the source (Conflict, recorded as well).
    """
    source = ToolSource.objects.select_related("approver_role").get(pk=source.pk)  # as stored now, not as the caller last saw it
    try:
        found = _discover_checked(source)
    except _SyncFailed as failure:
        return _sync_outcome(source, error=failure)
    rejected = [{"name": entry["remote_name"], "reason": problem} for entry in found
                if (problem := _entry_problem(entry))]
    found = [entry for entry in found if not _entry_problem(entry)]
    local_names = [_tool_name(source, entry["remote_name"]) for entry in found]
    if len(set(local_names)) != len(local_names):
        clash = sorted({name for name in local_names if local_names.count(name) > 1})
        return _sync_outcome(source, error=_SyncFailed(
            "source_invalid", f"{source.name} offers tools whose names become one tool name: {', '.join(clash)}"))
    report = {"created": [], "changed": [], "unchanged": [], "removed": []}
    try:
        # All or nothing: a failure part-way (a name taken, a database error) leaves no tool changed.
        with transaction.atomic():
            discovered_base_url = source.base_url
            source = ToolSource.objects.select_for_update().get(pk=source.pk)
            source.base_url = source.base_url or discovered_base_url
            existing = {t.remote_name: t for t in Tool.objects.select_for_update().filter(tool_source=source)}
            for entry in found:
                tool = existing.pop(entry["remote_name"], None)
                if tool is None:
                    tool = _create(source, entry)
                    report["created"].append(tool.name)
                elif _reconcile(tool, entry):
                    report["changed"].append(tool.name)
                else:
                    report["unchanged"].append(tool.name)
            for tool in existing.values():
                if not (tool.held and (tool.pending_change or {}).get("removed")):
                    _hold(tool, {"removed": True, "detected_at": timezone.now().isoformat()})
                report["removed"].append(tool.name)
            source.last_synced_at = timezone.now()
            source.last_sync_ok, source.last_sync_error_code, source.last_sync_error = True, "", ""
            source.save(update_fields=["base_url", "last_synced_at", "last_sync_ok", "last_sync_error_code",
                                       "last_sync_error", "updated_at"])
    except Conflict as exc:
        _sync_outcome(source, error=_SyncFailed("tool_name_taken", exc.message))
        raise
    return _report(ok=True, synced_at=source.last_synced_at, error=None,
                   tools={key: sorted(names) for key, names in report.items()}, rejected=rejected)


def _discover_checked(source: ToolSource) -> list[dict]:
    """What the source offers now; _SyncFailed when it cannot say, or must not be asked."""
    try:
        # Checked again: the deployment's allowed programs and modules may have narrowed since it was saved.
        tool_source_check(source)
    except ValidationError as exc:
        problems = "; ".join(f"{field}: {' '.join(messages)}" for field, messages in exc.message_dict.items())
        raise _SyncFailed("source_not_allowed", f"{source.name} cannot be synced as stored: {problems}") from None
    try:
        found = _discover(source)
    except mcp.SourceUnavailable as exc:
        raise _SyncFailed("source_unavailable", f"cannot sync {source.name}: {exc}") from None
    except (openapi.DocumentError, pytools.SignatureError) as exc:
        raise _SyncFailed("source_invalid", f"cannot sync {source.name}: {exc}") from None
    except ToolTimeout:
        raise _SyncFailed("source_timeout", f"cannot sync {source.name}: it did not answer within "
                                            f"{source.timeout_seconds:g} seconds") from None
    names = [entry["remote_name"] for entry in found]
    if len(set(names)) != len(names):
        raise _SyncFailed("source_invalid", f"{source.name} offers two tools under one name")
    return found


def _sync_outcome(source: ToolSource, *, error: _SyncFailed) -> dict:
    """Record a failed sync on the source (its tools stay as they were) and report it."""
    now = timezone.now()
    ToolSource.objects.filter(pk=source.pk).update(
        last_synced_at=now, last_sync_ok=False, last_sync_error_code=error.code, last_sync_error=error.message[:2000])
    logger.warning("tool source %s: sync failed (%s): %s", source.name, error.code, error.message)
    return _report(ok=False, synced_at=now, error={"code": error.code, "message": error.message},
                   tools={key: [] for key in ("created", "changed", "unchanged", "removed")}, rejected=[])


def _report(*, ok: bool, synced_at, error: dict | None, tools: dict, rejected: list) -> dict:
    return {"ok": ok, "synced_at": synced_at, "error": error, **tools, "rejected": rejected}


MAX_DESCRIPTION_CHARS = 8_000
MAX_SCHEMA_CHARS = 32_000


def _entry_problem(entry: dict) -> str:
    """Why a discovered tool cannot be registered at all (it is left out and reported)."""
    if not re.fullmatch(r"[A-Za-z0-9_.\-]{1,128}", entry["remote_name"]):
        return "its name is not 1-128 letters, digits, '_', '-' or '.'"
    if len(entry["description"]) > MAX_DESCRIPTION_CHARS:
        return f"its description is longer than {MAX_DESCRIPTION_CHARS} characters"
    schema = entry["input_schema"]
    if not isinstance(schema, dict) or schema.get("type", "object") != "object":
        return "its input schema does not describe an object of arguments"
    if len(json.dumps(schema)) > MAX_SCHEMA_CHARS:
        return f"its input schema is larger than {MAX_SCHEMA_CHARS} characters"
    try:
        jsonschema.validators.validator_for(schema).check_schema(schema)
    except jsonschema.SchemaError as exc:
        return f"its input schema is not valid JSON Schema: {exc.message}"
    return ""


def _create(source: ToolSource, entry: dict) -> Tool:
    name = _tool_name(source, entry["remote_name"])
    if Tool.objects.filter(name=name).exists():
        raise Conflict(f"a tool named {name!r} already exists outside this source", details={"name": name})
    side_effect = not entry["read_only"]
    # Only an OpenAPI write needs approval by default: its method says it writes. An MCP tool's
    # hints are the server's own claim, so it is side-effecting unless it says it reads only, and
    # its approvals come from policies like any other tool's.
    needs_approval = side_effect and source.kind == ToolSource.Kind.OPENAPI
    return Tool.objects.create(
        name=name, description=entry["description"], input_schema=entry["input_schema"],
        side_effect=side_effect, enabled=False, source=entry["source"], handler=entry["handler"],
        timeout_seconds=source.timeout_seconds, tool_source=source, remote_name=entry["remote_name"],
        binding=entry["binding"], requires_approval=needs_approval,
        approver_role=_approver_role(source) if needs_approval else None,
        approved_sha256=tool_fingerprint(entry["description"], entry["input_schema"]),
    )


def _reconcile(tool: Tool, entry: dict) -> bool:
    """True when the tool is held (newly or still) because the source describes it differently."""
    fingerprint = tool_fingerprint(entry["description"], entry["input_schema"])
    if fingerprint == tool.approved_sha256:
        if tool.held or tool.binding != entry["binding"] or tool.handler != entry["handler"]:
            tool.held, tool.pending_change = False, None
            tool.binding, tool.handler = entry["binding"], entry["handler"]
            tool.save()
        return False
    if not (tool.held and (tool.pending_change or {}).get("sha256") == fingerprint):
        _hold(tool, {"description": entry["description"], "input_schema": entry["input_schema"],
                     "binding": entry["binding"], "handler": entry["handler"],
                     "sha256": fingerprint, "detected_at": timezone.now().isoformat()})
    return True


def _hold(tool: Tool, change: dict) -> None:
    tool.held = True
    tool.pending_change = change
    tool.save(update_fields=["held", "pending_change", "updated_at"])
    logger.warning("tool %s held: it changed at its source", tool.name)


def tool_hold(*, tool: Tool, current) -> None:
    """Called by the dispatcher when a call finds the tool changed on the server."""
    with transaction.atomic():
        tool = Tool.objects.select_for_update().get(pk=tool.pk)
        if current is None:
            _hold(tool, {"removed": True, "detected_at": timezone.now().isoformat()})
            return
        _reconcile(tool, {"description": current.description, "input_schema": current.input_schema,
                          "binding": tool.binding, "handler": tool.handler})


@transaction.atomic
def tool_change_approve(*, tool: Tool, user=None) -> Tool:
    """Accept what the source reports now: the new description and schema become the approved ones."""
    tool = Tool.objects.select_for_update().get(pk=tool.pk)
    change = tool.pending_change
    if not tool.held or not change:
        raise Conflict(f"{tool.name} has no change waiting for approval")
    if change.get("removed"):
        raise Conflict(f"{tool.name} no longer exists at its source; disable it or sync again")
    tool.description = change["description"]
    tool.input_schema = change["input_schema"]
    tool.binding = change.get("binding", tool.binding)
    tool.handler = change.get("handler", tool.handler)
    tool.approved_sha256 = change["sha256"]
    tool.held, tool.pending_change = False, None
    tool.save()
    logger.info("tool %s: change approved by %s", tool.name, getattr(user, "username", "system"))
    return tool


def tool_change_diff(tool: Tool) -> str:
    """A unified diff from the approved description and schema to what the source reports now."""
    change = tool.pending_change
    if not change:
        return ""
    if change.get("removed"):
        return f"- {tool.remote_name} (no longer offered by its source)\n"

    def lines(description, schema):
        return [f"description: {line}" for line in description.splitlines()] + \
               json.dumps(schema, indent=2, sort_keys=True).splitlines()

    return "\n".join(difflib.unified_diff(
        lines(tool.description, tool.input_schema), lines(change["description"], change["input_schema"]),
        fromfile="approved", tofile="reported now", lineterm="",
    ))
