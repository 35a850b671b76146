"""The product's URLs plus the floor of scenario 4: a trivial authenticated DRF endpoint."""

from django.urls import path
from rest_framework.response import Response
from rest_framework.views import APIView

from warrant.urls import urlpatterns as product


class Floor(APIView):
    """Token authentication, IsAuthenticated, the JSON body parsed; nothing else."""

    def post(self, request):
        return Response({"ok": True, "fields": sorted(request.data)}, status=201)


urlpatterns = [path("bench/floor/", Floor.as_view()), *product]
