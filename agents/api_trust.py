"""Trust proposals: a mark of trust one governance admin proposed (PATCH of a tool source's `trusted`
or a built-in tool's `trusted_output`, answered 202), or a loosening of a tool's or a source's
approval (PATCH of `requires_approval` or `approver_role`, answered 202, kind "approval"), waiting
for another to confirm or refuse it, or for its proposer to withdraw it. Governance admins only
(agents.trust and agents.trust_approval say why it takes two).
"""

from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.response import Response

from agents import trust
from agents.models import TrustProposal
from core.api_views import PaginatedList, errors
from core.permissions import IsGovernanceAdmin

STATES = [*TrustProposal.Outcome.values]


class TrustProposalSerializer(serializers.ModelSerializer):
    proposed_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    state = serializers.ChoiceField(
        choices=STATES, read_only=True,
        help_text="pending, confirmed (the mark is set), refused, withdrawn, or expired: pending past expires_at, "
                  "which can no longer be confirmed.")
    change_seq = serializers.IntegerField(
        read_only=True, allow_null=True,
        help_text="The seq of the trust chain's change that set the mark, once confirmed (null when it was trusted "
                  "already, and for an approval proposal).")
    kind = serializers.ChoiceField(
        choices=TrustProposal.Kind.values, read_only=True,
        help_text="trust: mark the subject trusted; approval: loosen its approval as `change` says.")
    change = serializers.DictField(
        read_only=True, help_text="kind approval: what confirming sets, by field (requires_approval: false, "
                                  "approver_role: a role's name or null); {} for a mark of trust.")
    was = serializers.DictField(
        read_only=True, help_text="kind approval: the approval when it was proposed; confirming is refused (409) "
                                  "if it is no longer that.")

    class Meta:
        model = TrustProposal
        ref_name = "TrustProposal"
        fields = ["id", "kind", "subject", "name", "change", "was", "reason", "proposed_by", "created_at", "expires_at", "state", "decided_by",
                  "decided_at", "change_seq"]
        read_only_fields = fields


def proposed(proposal: TrustProposal) -> Response:
    """The answer to a PATCH that asked to trust: 202, the proposal, and nothing trusted yet."""
    return Response(TrustProposalSerializer(proposal).data, status=status.HTTP_202_ACCEPTED)


class TrustProposalListApi(PaginatedList, GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = TrustProposalSerializer
    queryset = TrustProposal.objects.select_related("proposed_by", "decided_by")
    filterset_fields = ["kind", "subject", "name", "outcome"]

    @extend_schema(operation_id="trust_proposals_list",
                   description="Proposals to mark a tool source or a built-in tool trusted, or to loosen a tool's "
                               "or a source's approval, newest first. "
                               "`outcome=pending` includes expired ones (state says which).",
                   responses={200: TrustProposalSerializer(many=True), **errors(403)})
    def get(self, request):
        return self.list_response()


class _Decide(GenericAPIView):
    permission_classes = [IsGovernanceAdmin]
    serializer_class = TrustProposalSerializer
    queryset = TrustProposal.objects.all()
    decide = None  # agents.trust's function, as a staticmethod

    def post(self, request, pk):
        proposal = self.decide(proposal=self.get_object(), user=request.user)
        return Response(self.get_serializer(proposal).data)


class TrustProposalConfirmApi(_Decide):
    decide = staticmethod(trust.trust_confirm)

    @extend_schema(operation_id="trust_proposals_confirm", request=None,
                   description="A second governance admin confirms: the mark is set, and the sealed trust change "
                               "names who proposed it and who confirmed it; or the approval change is written, "
                               "and the proposal names both. 403 second_admin_required for its proposer; 409 "
                               "request_expired past expires_at; 409 once decided, or when the approval is no "
                               "longer what it was proposed against.",
                   responses={200: TrustProposalSerializer, **errors(403, 404, 409)})
    def post(self, request, pk):
        return super().post(request, pk)


class TrustProposalRefuseApi(_Decide):
    decide = staticmethod(trust.trust_refuse)

    @extend_schema(operation_id="trust_proposals_refuse", request=None,
                   description="Another governance admin turns the proposal down; nothing changes. 403 "
                               "second_admin_required for its proposer, who withdraws it instead.",
                   responses={200: TrustProposalSerializer, **errors(403, 404, 409)})
    def post(self, request, pk):
        return super().post(request, pk)


class TrustProposalWithdrawApi(_Decide):
    decide = staticmethod(trust.trust_withdraw)

    @extend_schema(operation_id="trust_proposals_withdraw", request=None,
                   description="Its proposer takes the proposal back; nothing changes. 403 for anyone else.",
                   responses={200: TrustProposalSerializer, **errors(403, 404, 409)})
    def post(self, request, pk):
        return super().post(request, pk)
