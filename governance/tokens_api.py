"""Your own API tokens: list them, issue one (its key is in that answer only), revoke one.

Everyone sees and revokes their own tokens only; another user's token is 404, superusers
included, so no one can act with someone else's key. Issuing needs a signed-in session: a
token cannot mint tokens, or a leaked key could outlive its own revocation.
"""

from django.shortcuts import get_object_or_404
from drf_spectacular.utils import extend_schema, extend_schema_view
from rest_framework import serializers, status
from rest_framework.authentication import SessionAuthentication
from rest_framework.generics import GenericAPIView, ListAPIView
from rest_framework.response import Response

from core.api_errors import Forbidden
from core.api_fields import StrictSerializer
from governance.models import ApiToken
from governance.tokens import token_issue, token_revoke, token_state

MAX_TTL_DAYS = 3650


class TokenOutputSerializer(serializers.ModelSerializer):
    state = serializers.SerializerMethodField(help_text="active, expired or revoked")

    class Meta:
        model = ApiToken
        ref_name = "ApiToken"
        fields = ["public_id", "name", "state", "issued_via", "issued_by", "created_at", "expires_at",
                  "last_used_at", "revoked_at", "revoked_by"]

    def get_state(self, token: ApiToken) -> str:
        return token_state(token)


class IssuedTokenSerializer(TokenOutputSerializer):
    key = serializers.CharField(help_text="Send as `Authorization: Token <key>`. Shown in this answer only.")

    class Meta(TokenOutputSerializer.Meta):
        ref_name = "IssuedApiToken"
        fields = TokenOutputSerializer.Meta.fields + ["key"]


class TokenIssueInputSerializer(StrictSerializer):
    name = serializers.CharField(max_length=100, required=False, allow_blank=True, default="")
    expires_in_days = serializers.IntegerField(
        min_value=1, max_value=MAX_TTL_DAYS, required=False, allow_null=True, default=None,
        help_text="Days until it expires; default WARRANT_TOKEN_TTL_DAYS.")

    class Meta:
        ref_name = "ApiTokenIssue"


def _own_tokens(request):
    return ApiToken.objects.filter(user=request.user)


@extend_schema_view(get=extend_schema(operation_id="tokens_list", summary="Your API tokens (never their keys)"))
class TokenListCreateApi(ListAPIView):
    serializer_class = TokenOutputSerializer
    filter_backends = []

    def get_queryset(self):
        if getattr(self, "swagger_fake_view", False):
            return ApiToken.objects.none()
        return _own_tokens(self.request)

    @extend_schema(operation_id="tokens_create", summary="Issue yourself a token (signed-in session only)",
                   request=TokenIssueInputSerializer, responses={201: IssuedTokenSerializer})
    def post(self, request):
        if not isinstance(request.successful_authenticator, SessionAuthentication):
            raise Forbidden("a token cannot issue tokens: sign in (a session) to issue one")
        serializer = TokenIssueInputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        token, key = token_issue(user=request.user, via=ApiToken.Issued.API, issued_by=request.user.get_username(),
                                 name=data["name"], ttl_days=data["expires_in_days"])
        token.key = key
        return Response(IssuedTokenSerializer(token).data, status=status.HTTP_201_CREATED)


class TokenDetailApi(GenericAPIView):
    serializer_class = TokenOutputSerializer

    def _token(self, request, public_id) -> ApiToken:
        return get_object_or_404(_own_tokens(request), public_id=public_id)

    @extend_schema(operation_id="tokens_retrieve", summary="One of your tokens")
    def get(self, request, public_id):
        return Response(TokenOutputSerializer(self._token(request, public_id)).data)

    @extend_schema(operation_id="tokens_destroy", summary="Revoke one of your tokens (it stays listed, revoked)",
                   responses={204: None})
    def delete(self, request, public_id):
        token_revoke(token=self._token(request, public_id), by=request.user.get_username())
        return Response(status=status.HTTP_204_NO_CONTENT)
