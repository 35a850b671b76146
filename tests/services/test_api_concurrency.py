"""Concurrent duplicates over the API, on PostgreSQL where requests really run side by side."""

import threading

import pytest

from runs.models import Run

pytestmark = pytest.mark.django_db(transaction=True)


def test_concurrent_duplicate_run_starts_make_one_run(redis_server, operator):
    results, barrier = [], threading.Barrier(4)

    def post():
        from django.db import connection

        barrier.wait()
        results.append(operator.post("/api/v1/runs/", {"agent": "crm-assistant", "input": "List all accounts."},
                                     format="json", HTTP_IDEMPOTENCY_KEY="same").status_code)
        connection.close()

    threads = [threading.Thread(target=post) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert Run.objects.count() == 1
    assert sorted(results).count(201) >= 1 and set(results) <= {201, 409}, results
