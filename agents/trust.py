"""Trust marks: whose words a run may read without being tainted.

A tool result is outsiders' text unless a governance admin said otherwise: a ticket's title, a
mail, a wiki page or anything an MCP server or an OpenAPI service answers can carry orders the
screen does not know. So every tool's output is untrusted by default, and reading it taints the
run (runs.harness). A discovered tool follows its source's mark (ToolSource.trusted); a built-in
tool has its own (Tool.trusted_output).

Only a governance admin may set a mark, and each change writes a TrustChange (who, when, from
what to what, why) in the same transaction, the way a policy change writes a PolicyVersion. The
row is sealed into the trust chain as it is written (signed, hash-chained, witnessed:
review.trust_chain), so a change removed or rewritten afterwards, by a DBA or anyone else, is
caught by the review chain's verification and by the offline verifier.

One person decides: a governance admin alone may mark a source trusted, and from then on what its
tools say no longer taints a run, so side effects after reading it no longer each need an approval.
"""

import logging

from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from agents.models import Tool, ToolSource, TrustChange
from core.api_errors import Conflict, Forbidden
from core.permissions import is_governance_admin

logger = logging.getLogger(__name__)
# Seals a change into the trust chain and inserts it: review.trust_chain.seal_trust_change, put here
# by review.apps (agents imports no app above it).
SEAL: list = []


def _check(user) -> None:
    if not is_governance_admin(user):
        raise Forbidden("only governance admins may change what Warrant trusts")


def _record(*, subject: str, name: str, trusted: bool, was: bool, user, reason: str) -> None:
    if not SEAL:  # an unsealed change is the gap the chain closes: refuse it rather than write one
        raise ImproperlyConfigured("no trust chain is registered (review.apps): trust marks cannot be changed")
    SEAL[0](TrustChange(subject=subject, name=name, trusted=trusted, was_trusted=was,
                        changed_by=user if getattr(user, "pk", None) else None, reason=reason))
    logger.info("trust mark of %s %s: %s -> %s by %s", subject, name, was, trusted,
                   getattr(user, "username", None) or "the platform")


@transaction.atomic
def tool_source_trust(*, source: ToolSource, trusted: bool, user, reason: str = "") -> ToolSource:
    """Mark what a source's tools say (descriptions and results) as trusted, or not."""
    _check(user)
    source = ToolSource.objects.select_for_update().get(pk=source.pk)
    if source.trusted != trusted:
        _record(subject=TrustChange.Subject.TOOL_SOURCE, name=source.name, trusted=trusted, was=source.trusted,
                user=user, reason=reason)
        source.trusted = trusted
        source.save(update_fields=["trusted", "updated_at"])
    return source


@transaction.atomic
def tool_trust(*, tool: Tool, trusted: bool, user, reason: str = "", platform: bool = False) -> Tool:
    """Mark a built-in tool's results as trusted, or not. `platform`: the demo loader's own act
    (no user; still recorded)."""
    if not platform:
        _check(user)
    tool = Tool.objects.select_for_update().get(pk=tool.pk)
    if tool.tool_source_id:
        raise Conflict(f"{tool.name} comes from the source {tool.tool_source.name}: mark the source instead",
                       details={"tool_source": tool.tool_source.name})
    if tool.trusted_output != trusted:
        _record(subject=TrustChange.Subject.TOOL, name=tool.name, trusted=trusted, was=tool.trusted_output,
                user=user, reason=reason)
        tool.trusted_output = trusted
        tool.save(update_fields=["trusted_output", "updated_at"])
    return tool
