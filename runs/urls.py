from django.urls import path

from runs import api, approvals_api, receipts_api, standing_api

urlpatterns = [
    path("runs/", api.RunListCreateApi.as_view(), name="run-list"),
    path("runs/<uuid:run_id>/", api.RunDetailApi.as_view(), name="run-detail"),
    path("runs/<uuid:run_id>/events/", api.RunEventsApi.as_view(), name="run-events"),
    path("runs/<uuid:run_id>/cancel/", api.RunCancelApi.as_view(), name="run-cancel"),
    path("approvals/", approvals_api.ApprovalListApi.as_view(), name="approval-list"),
    path("approvals/<uuid:approval_id>/", approvals_api.ApprovalDetailApi.as_view(), name="approval-detail"),
    path("approvals/<uuid:approval_id>/approve/", approvals_api.ApprovalApproveApi.as_view(), name="approval-approve"),
    path("approvals/<uuid:approval_id>/deny/", approvals_api.ApprovalDenyApi.as_view(), name="approval-deny"),
    path("standing-approvals/", standing_api.StandingApprovalListCreateApi.as_view(), name="standing-list"),
    path("standing-approvals/<uuid:standing_id>/", standing_api.StandingApprovalDetailApi.as_view(),
         name="standing-detail"),
    path("standing-approvals/<uuid:standing_id>/revoke/", standing_api.StandingApprovalRevokeApi.as_view(),
         name="standing-revoke"),
    path("receipts/", receipts_api.ReceiptListApi.as_view(), name="receipt-list"),
    path("receipts/export/", receipts_api.ReceiptExportApi.as_view(), name="receipt-export"),
    path("receipts/keys/", receipts_api.ReceiptKeysApi.as_view(), name="receipt-keys"),
    path("receipts/<uuid:receipt_id>/", receipts_api.ReceiptDetailApi.as_view(), name="receipt-detail"),
    path("receipts/<uuid:receipt_id>/verify/", receipts_api.ReceiptVerifyApi.as_view(), name="receipt-verify"),
]
