"""Shared setup for trigger tests: a service account in `operators`, triggers, signed deliveries, races."""

import json
import threading
import time

from django.db import connections
from rest_framework.test import APIClient

from triggers import services, signatures
from triggers.models import ServiceAccount

HOOKS = "/api/v1/hooks/"


def service_account(username: str = "helpdesk-bot", roles=("operators",)) -> ServiceAccount:
    return services.service_account_create(username=username, roles=list(roles), description="tests")


def webhook(name: str = "helpdesk", *, template: str = "{{ payload.ticket.title }}", account=None, **options):
    """(trigger, secret) for the demo agent, run as `account` (a new helpdesk-bot by default)."""
    account = account or service_account()
    return services.trigger_create(name=name, kind="webhook", agent="crm-assistant", input_template=template,
                                   service_account=account, **options)


def schedule(name: str = "morning", *, template: str = "List all accounts.", account=None, **options):
    account = account or service_account("scheduler-bot")
    options.setdefault("interval_seconds", 60) if "cron" not in options else None
    trigger, _ = services.trigger_create(name=name, kind="schedule", agent="crm-assistant", input_template=template,
                                         service_account=account, **options)
    return trigger


def deliver(name: str, secret: str, payload, *, delivery: str | None = "d-1", timestamp: int | None = None,
            body: bytes | None = None, signature: str | None = None, client: APIClient | None = None):
    """POST a signed delivery, as a sender would: HMAC over '<timestamp>.<raw body>'."""
    body = json.dumps(payload).encode() if body is None else body
    stamp = str(int(time.time()) if timestamp is None else timestamp)
    headers = {"HTTP_X_WARRANT_TIMESTAMP": stamp,
               "HTTP_X_WARRANT_SIGNATURE": signature or signatures.sign(secret, stamp, body)}
    if delivery is not None:
        headers["HTTP_X_WARRANT_DELIVERY"] = delivery
    return (client or APIClient()).generic("POST", f"{HOOKS}{name}/", body, content_type="application/json",
                                           **headers)


def race(action, copies: int) -> list:
    """Call `action` in `copies` threads released together by a barrier, each on its own database
    connection (closed after); what each returned, in the order they finished."""
    results, barrier = [], threading.Barrier(copies)

    def run():
        try:
            barrier.wait()
            results.append(action())
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(copies)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return results
