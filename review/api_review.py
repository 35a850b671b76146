"""The compliance review API: sampling rules and their proposed loosenings, the review queue,
assignment, review records and the review chain's verification (review.rules, review.sampling,
review.records, review.verification)."""

from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

from django.core.exceptions import ValidationError as DjangoValidationError
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.generics import GenericAPIView
from rest_framework.permissions import BasePermission
from rest_framework.response import Response

from agents.models import Agent
from core.api_fields import StrictFieldsMixin, StrictSerializer
from core.api_views import PaginatedList, errors, proposal_decision_view
from governance.tokens import auth_via
from review import rules
from review.models import ReviewItem, ReviewRecord, SamplingRule, SamplingRuleProposal, Trigger
from review.records import MAX_NOTE, refusal, review_assign, review_submit, user_named
from review.verification import review_verify_chain
from review.views import may_see_dashboard
from runs.verification_receipt import receipt_verify


class ReviewsCompliance(BasePermission):
    message = "only compliance, governance admins and superusers see compliance review"

    def has_permission(self, request, view) -> bool:
        return may_see_dashboard(request.user)


class Hundredths(serializers.DecimalField):
    """A percentage kept to hundredths: a finer one (83.339...) is rounded half up, not refused."""

    def validate_precision(self, value):
        try:
            value = value.quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
        except InvalidOperation:  # more digits than the context holds (1e307): max_digits refuses it
            pass
        return super().validate_precision(value)


class RuleSerializer(StrictFieldsMixin, serializers.ModelSerializer):
    agent = serializers.SlugRelatedField(slug_field="slug", queryset=Agent.objects.all(), allow_null=True,
                                         required=False, error_messages={"does_not_exist": "unknown agent {value}"},
                                         help_text="An agent's slug; null: every agent.")
    percentage = Hundredths(max_digits=5, decimal_places=2, min_value=0, max_value=100, required=False,
                            coerce_to_string=False, help_text="Of the runs, 0 to 100, kept to hundredths.")
    always = serializers.ListField(child=serializers.ChoiceField(choices=Trigger.choices), required=False,
                                   max_length=len(Trigger.values))
    tools = serializers.ListField(child=serializers.CharField(max_length=64), required=False, max_length=100)
    created_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)

    class Meta:
        model = SamplingRule
        ref_name = "SamplingRule"
        fields = ["id", "name", "agent", "percentage", "always", "tools", "seed", "enabled", "note", "created_by",
                  "created_at", "updated_at"]
        read_only_fields = ["id", "seed", "created_by", "created_at", "updated_at"]
        extra_kwargs = {"name": {"validators": []}}  # the unique name answers 409, below

    def validate(self, attrs):
        values = {f: getattr(self.instance, f) for f in ("always", "tools")} if self.instance else {}
        try:
            SamplingRule(**{"always": [], "tools": []} | values | {f: attrs[f] for f in ("always", "tools")
                                                                  if f in attrs}).clean()
        except DjangoValidationError as exc:
            raise serializers.ValidationError(exc.message_dict) from None
        return attrs


# Inline (allOf), as skills.api does: a golden case proposal's `status` has these values too, other
# components' `status` others, and a generated enum name shared between them is a schema warning.
@extend_schema_field({"allOf": [{"type": "string", "enum": SamplingRuleProposal.Status.values}]})
class ProposalStatusField(serializers.ChoiceField):
    def __init__(self, **kwargs):
        super().__init__(choices=SamplingRuleProposal.Status.choices, **kwargs)


class RuleProposalSerializer(serializers.ModelSerializer):
    proposed_by = serializers.SlugRelatedField(slug_field="username", read_only=True)
    decided_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    changes = serializers.JSONField(read_only=True, help_text="For an update: each changed field and its new value "
                                                              "(agent as a slug, percentage as a string); for a "
                                                              "deletion: {}.")
    loosens = serializers.ListField(child=serializers.CharField(), read_only=True,
                                    help_text="What the change would sample less: why it needs a second person.")
    status = ProposalStatusField(read_only=True)
    # Not "kind" alone: a golden case proposal's kind has another value set (one name per set in the schema).
    proposal_kind = serializers.ChoiceField(source="kind", choices=SamplingRuleProposal.Kind.choices, read_only=True)

    class Meta:
        model = SamplingRuleProposal
        ref_name = "SamplingRuleProposal"
        fields = ["id", "rule", "rule_name", "proposal_kind", "base_updated_at", "changes", "loosens", "proposed_by",
                  "created_at", "status", "decided_by", "decided_at"]
        read_only_fields = fields


PROPOSED = ("A change that would sample fewer runs (disabling, a lower percentage, a trigger or tool dropped, a "
            "narrower agent) changes nothing yet: the answer is 202 and a pending proposal, which a different "
            "compliance member or governance admin approves (POST review/rule-proposals/{id}/approve/).")


class RuleListCreateApi(PaginatedList, GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = RuleSerializer
    queryset = SamplingRule.objects.select_related("agent", "created_by")
    filterset_fields = ["enabled"]

    @extend_schema(operation_id="review_rules_list", summary="List sampling rules", responses=RuleSerializer(many=True))
    def get(self, request):
        return self.list_response()

    @extend_schema(operation_id="review_rules_create", summary="Create a sampling rule",
                   description="Evaluated when each later run's receipt is sealed: the percentage is drawn as "
                               "sha256(seed \":\" run id), the always-sample triggers from the sealed facts.",
                   request=RuleSerializer, responses={201: RuleSerializer, **errors(400, 403, 409)})
    def post(self, request):
        serializer = RuleSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        rule = rules.rule_create(serializer.validated_data, user=request.user)
        return Response(RuleSerializer(rule).data, status=status.HTTP_201_CREATED)


class RuleDetailApi(GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = RuleSerializer
    queryset = SamplingRule.objects.select_related("agent", "created_by")
    lookup_url_kwarg = "rule_id"

    @extend_schema(operation_id="review_rules_retrieve", summary="Read a sampling rule",
                   responses={200: RuleSerializer, **errors(403, 404)})
    def get(self, request, rule_id):
        return Response(RuleSerializer(self.get_object()).data)

    @extend_schema(operation_id="review_rules_partial_update", summary="Change a sampling rule",
                   description="Applies to runs sealed from now on; runs sampled already keep their reasons. "
                               + PROPOSED,
                   request=RuleSerializer,
                   responses={200: RuleSerializer, 202: RuleProposalSerializer, **errors(400, 403, 404, 409)})
    def patch(self, request, rule_id):
        serializer = RuleSerializer(self.get_object(), data=request.data, partial=True)
        serializer.is_valid(raise_exception=True)
        result = rules.rule_update(serializer.instance, serializer.validated_data, user=request.user)
        if isinstance(result, SamplingRuleProposal):
            return Response(RuleProposalSerializer(result).data, status=status.HTTP_202_ACCEPTED)
        return Response(RuleSerializer(result).data)

    @extend_schema(operation_id="review_rules_destroy", summary="Propose deleting a sampling rule",
                   description="Nothing is deleted yet: the answer is a pending proposal, which a different "
                               "compliance member or governance admin approves. Items the rule sampled keep its "
                               "name in their reasons.",
                   responses={202: RuleProposalSerializer, **errors(403, 404)})
    def delete(self, request, rule_id):
        proposal = rules.rule_delete(self.get_object(), user=request.user)
        return Response(RuleProposalSerializer(proposal).data, status=status.HTTP_202_ACCEPTED)


PROPOSALS = SamplingRuleProposal.objects.select_related("proposed_by", "decided_by")


class RuleProposalListApi(PaginatedList, GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = RuleProposalSerializer
    queryset = PROPOSALS
    filterset_fields = ["status", "kind"]

    @extend_schema(operation_id="review_rule_proposals_list", summary="Proposed loosenings of sampling rules",
                   description="Newest first; filter by `status` or `kind`.",
                   responses=RuleProposalSerializer(many=True))
    def get(self, request):
        return self.list_response()


class RuleProposalDetailApi(GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = RuleProposalSerializer
    queryset = PROPOSALS
    lookup_url_kwarg = "proposal_id"

    @extend_schema(operation_id="review_rule_proposals_retrieve", summary="Read a proposed loosening of a sampling rule",
                   responses={200: RuleProposalSerializer, **errors(403, 404)})
    def get(self, request, proposal_id):
        return Response(RuleProposalSerializer(self.get_object()).data)


def _decision(verb: str, summary: str, description: str):
    return proposal_decision_view(decide=getattr(rules, verb), model=SamplingRuleProposal, serializer=RuleProposalSerializer,
                                  permission=ReviewsCompliance, operation=f"review_rule_proposals_{verb}",
                                  name=f"RuleProposal{verb.title()}Api", summary=summary, description=description)


RuleProposalApproveApi = _decision(
    "approve", "Approve a proposed loosening of a sampling rule",
    "Applies the change (or the deletion); the proposal names the proposer and the approver. Refused with 403 "
    "`second_admin_required` (nothing written) when the approver proposed it or their account was set up by the "
    "proposer, 409 `proposal_stale` when the rule changed since it was proposed, 409 `request_expired` past the "
    "second-admin window, 409 `proposal_decided` when it was decided already.")
RuleProposalRefuseApi = _decision(
    "refuse", "Refuse a proposed loosening of a sampling rule",
    "Another compliance member or governance admin than the proposer turns it down; nothing changes (the proposer "
    "withdraws instead).")
RuleProposalWithdrawApi = _decision(
    "withdraw", "Withdraw one's own proposed loosening of a sampling rule", "Only its proposer; nothing changes.")


class ReasonSerializer(serializers.Serializer):
    rule = serializers.CharField()
    rule_id = serializers.IntegerField(allow_null=True)
    reason = serializers.CharField(help_text="A trigger, or 'percentage'.")
    detail = serializers.CharField()


class RecordSerializer(serializers.ModelSerializer):
    reviewer = serializers.SlugRelatedField(slug_field="username", read_only=True)
    follows = serializers.PrimaryKeyRelatedField(read_only=True, allow_null=True)
    # Not "kind": approvals have a kind of other values (one name per value set in the schema).
    record_kind = serializers.ChoiceField(source="kind", choices=ReviewRecord.Kind.choices, read_only=True)

    class Meta:
        model = ReviewRecord
        ref_name = "ReviewRecord"
        fields = ["id", "seq", "record_kind", "severity", "note", "follows", "resolves", "reviewer", "created_at",
                  "prev_hash", "hash", "key_id", "signature", "body"]


class ItemSerializer(serializers.ModelSerializer):
    run = serializers.UUIDField(source="run_id", read_only=True)
    receipt = serializers.UUIDField(source="receipt_id", read_only=True)
    agent = serializers.CharField(source="run.agent.slug", read_only=True)
    caller = serializers.CharField(source="run.caller.username", read_only=True)
    run_status = serializers.CharField(source="run.status", read_only=True)
    reasons = ReasonSerializer(many=True, read_only=True)
    assignee = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    assigned_by = serializers.SlugRelatedField(slug_field="username", read_only=True, allow_null=True)
    # Not "state" alone: one name per value set keeps the schema's enums apart.
    review_state = serializers.ChoiceField(source="state", choices=ReviewItem.State.choices, read_only=True)

    class Meta:
        model = ReviewItem
        ref_name = "ReviewItem"
        fields = ["id", "run", "receipt", "agent", "caller", "run_status", "reasons", "review_state", "assignee",
                  "assigned_by", "assigned_at", "sampled_at"]


class VerificationSerializer(serializers.Serializer):
    valid = serializers.BooleanField()
    checked = serializers.IntegerField()
    reason = serializers.CharField(allow_blank=True)
    failures = serializers.ListField(child=serializers.CharField())

    class Meta:
        ref_name = "ReviewVerification"


def _verification(result) -> dict:
    return {"valid": result.valid, "checked": result.checked, "reason": result.reason,
            "failures": [str(p) for p in result.failures]}


class ItemDetailSerializer(ItemSerializer):
    records = RecordSerializer(many=True, read_only=True)
    receipt_verification = serializers.SerializerMethodField()

    class Meta(ItemSerializer.Meta):
        ref_name = "ReviewItemDetail"
        fields = [*ItemSerializer.Meta.fields, "records", "receipt_verification"]

    def get_receipt_verification(self, item) -> VerificationSerializer:
        return _verification(receipt_verify(receipt=item.receipt))


ITEMS = ReviewItem.objects.select_related("run__agent", "run__caller", "assignee", "assigned_by", "receipt")


class QueueApi(PaginatedList, GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = ItemSerializer
    queryset = ITEMS
    filterset_fields = {"state": ["exact"], "assignee__username": ["exact"], "run__agent__slug": ["exact"]}

    @extend_schema(operation_id="review_queue_list", summary="List sampled runs (the review queue)",
                   description="Newest first; filter by `state`, `assignee__username` or `run__agent__slug`.",
                   responses=ItemSerializer(many=True))
    def get(self, request):
        return self.list_response()


class ItemDetailApi(GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = ItemDetailSerializer
    queryset = ITEMS.prefetch_related("records__reviewer")
    lookup_url_kwarg = "item_id"

    @extend_schema(operation_id="review_items_retrieve", summary="Read a sampled run's review",
                   description="Its reasons, assignment, records, and the receipt's verification now.",
                   responses={200: ItemDetailSerializer, **errors(403, 404)})
    def get(self, request, item_id):
        return Response(ItemDetailSerializer(self.get_object()).data)


class AssignInputSerializer(StrictSerializer):
    assignee = serializers.CharField(max_length=150, allow_null=True,
                                     help_text="A compliance member's username; null: back to the pool.")

    class Meta:
        ref_name = "ReviewAssignInput"


class AssignApi(GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = AssignInputSerializer
    queryset = ITEMS
    lookup_url_kwarg = "item_id"

    @extend_schema(operation_id="review_items_assign", summary="Assign a sampled run to a reviewer",
                   description="Only the compliance role assigns, and only to a compliance member who is neither "
                               "the run's caller nor anyone who decided an approval inside it (400 says which).",
                   request=AssignInputSerializer, responses={200: ItemSerializer, **errors(400, 403, 404, 409)})
    def post(self, request, item_id):
        item = self.get_object()
        serializer = AssignInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        name = serializer.validated_data["assignee"]
        assignee = user_named(name) if name is not None else None
        if name is not None and assignee is None:
            raise refusal("assignee", f"no user named {name!r}")
        item = review_assign(item=item, assignee=assignee, by=request.user)
        return Response(ItemSerializer(ITEMS.get(pk=item.pk)).data)


class RecordInputSerializer(StrictSerializer):
    record_kind = serializers.ChoiceField(choices=ReviewRecord.Kind.choices,
                                          help_text="sign_off, finding, or follow_up.")
    severity = serializers.ChoiceField(choices=ReviewRecord.Severity.choices, required=False, default="",
                                       help_text="A finding's severity (required for a finding, else absent).")
    note = serializers.CharField(max_length=MAX_NOTE, required=False, default="", allow_blank=True,
                                 trim_whitespace=False)
    follows = serializers.UUIDField(required=False, allow_null=True, default=None,
                                    help_text="A follow-up's finding or follow-up; default: the latest.")
    resolves = serializers.BooleanField(required=False, default=False, help_text="A follow-up that closes the finding.")

    class Meta:
        ref_name = "ReviewRecordInput"


class RecordCreateApi(GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = RecordInputSerializer
    queryset = ITEMS
    lookup_url_kwarg = "item_id"

    @extend_schema(operation_id="review_records_create", summary="Submit a review record",
                   description="By the item's assignee: a sign-off, a finding (severity and note), or a follow-up "
                               "of a finding (`resolves` closes it). Appended to the signed review chain; never "
                               "changed afterwards.",
                   request=RecordInputSerializer, responses={201: RecordSerializer, **errors(400, 403, 404, 409)})
    def post(self, request, item_id):
        item = self.get_object()
        serializer = RecordInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        values = dict(serializer.validated_data)
        values["kind"] = values.pop("record_kind")
        record = review_submit(item=item, reviewer=request.user, via=auth_via(request), **values)
        return Response(RecordSerializer(record).data, status=status.HTTP_201_CREATED)


class ChainVerifyApi(GenericAPIView):
    permission_classes = [ReviewsCompliance]
    serializer_class = VerificationSerializer

    @extend_schema(operation_id="review_chain_verify", summary="Verify the review chain",
                   description="Every record's link, hash, canonical body and signature (the offline verifier's "
                               "code), each row against its sealed body, and the append-only triggers.",
                   responses={200: VerificationSerializer, **errors(403)})
    def get(self, request):
        return Response(_verification(review_verify_chain()))
