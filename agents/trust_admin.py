"""The workbench's side of trust and approval proposals: the trust chain's changes, the proposals with
their confirm, refuse and withdraw actions, and what the tool and tool-source forms call to propose
instead of saving (agents.admin). Every write goes through agents.trust and agents.trust_approval,
as the API's do."""

from django.contrib import admin, messages
from django.core.exceptions import ValidationError

from agents import trust
from agents.models import ToolSource, TrustChange, TrustProposal
from agents.trust_approval import approval_looser, approval_propose
from core.admin import ReadOnlyAdmin
from core.api_errors import DomainError


def each(model_admin, request, queryset, act, done: str) -> None:
    """An admin action on each selected row through a service: its refusal is the row's error message."""
    for obj in queryset:
        try:
            act(obj)
        except DomainError as exc:
            model_admin.message_user(request, exc.message, messages.ERROR)
            continue
        model_admin.message_user(request, f"{obj.name}: {done}")


def mark(model_admin, request, target, trusted: bool) -> None:
    """The admin's trust mark goes through agents.trust as the API's does: untrusted at once,
    trusted proposed, for another governance admin to confirm (Trust proposals)."""
    try:
        if trusted:
            proposal = trust.trust_propose(target=target, user=request.user, reason="proposed in the admin")
            model_admin.message_user(request, f"Marking {target.name} trusted is proposed (proposal {proposal.pk}); "
                                              "it stays untrusted until another governance admin confirms it.",
                                     messages.WARNING)
        else:
            (trust.tool_source_trust(source=target, trusted=False, user=request.user, reason="set in the admin")
             if isinstance(target, ToolSource) else
             trust.tool_trust(tool=target, trusted=False, user=request.user, reason="set in the admin"))
    except DomainError as exc:
        model_admin.message_user(request, exc.message, messages.ERROR)


def propose_loosening(model_admin, request, target, change: dict) -> None:
    """The form's loosening of an approval (agents.trust_approval.loosening_split took it out of the save):
    proposed, for another governance admin to confirm; the rest of the form is saved as it was."""
    try:
        proposal = approval_propose(target=target, user=request.user, change=change, reason="proposed in the admin")
    except DomainError as exc:
        model_admin.message_user(request, exc.message, messages.ERROR)
        return
    except ValidationError as exc:
        model_admin.message_user(request, " ".join(exc.messages), messages.ERROR)
        return
    model_admin.message_user(request, f"{trust.proposal_what(proposal).capitalize()} is proposed (proposal "
                                      f"{proposal.pk}); the approval stays as it was until another governance "
                                      "admin confirms it.", messages.WARNING)


@admin.register(TrustChange)
class TrustChangeAdmin(ReadOnlyAdmin):
    """The sealed trust chain: who marked which tool or source trusted, or not, and who loosened an
    approval or re-approved a change (before and after), and when: written by agents.trust only."""

    list_display = ["seq", "changed_at", "what", "subject", "name", "was_trusted", "trusted", "before", "after",
                    "changed_by", "proposed_by", "reason"]
    list_filter = ["kind", "subject", "trusted"]

    @admin.display(description="kind", ordering="kind")
    def what(self, change: TrustChange) -> str:
        # An approval record is a confirmed loosening, or since 96e1afd a one-step tightening.
        if change.kind == TrustChange.Kind.APPROVAL and isinstance(change.before, dict) \
                and isinstance(change.after, dict) and not approval_looser(change.before, change.after):
            return "Approval tightened (one step)"
        return change.get_kind_display()
    search_fields = ["name", "reason"]


@admin.register(TrustProposal)
class TrustProposalAdmin(ReadOnlyAdmin):
    """Proposals to mark something trusted or to loosen an approval: confirmed, refused or withdrawn
    through agents.trust only."""

    list_display = ["created_at", "kind", "subject", "name", "change", "was", "proposed_by", "state", "expires_at",
                    "decided_by", "reason"]
    list_filter = ["kind", "subject", "outcome"]
    search_fields = ["name", "reason"]
    actions = ["confirm", "refuse", "withdraw"]

    def _decide(self, request, queryset, decide, done: str) -> None:
        each(self, request, queryset, lambda proposal: decide(proposal=proposal, user=request.user), done)

    @admin.action(description="Confirm: mark it trusted, or change its approval (a governance admin who did not "
                              "propose it)")
    def confirm(self, request, queryset):
        self._decide(request, queryset, trust.trust_confirm, "confirmed: marked trusted, or its approval changed")

    @admin.action(description="Refuse (another governance admin)")
    def refuse(self, request, queryset):
        self._decide(request, queryset, trust.trust_refuse, "refused")

    @admin.action(description="Withdraw (its proposer)")
    def withdraw(self, request, queryset):
        self._decide(request, queryset, trust.trust_withdraw, "withdrawn")
