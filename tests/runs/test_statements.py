"""governance.rows and runs.statements write and read a run's row by plain SQL: what it writes and reads must be what
Django's model machinery would have, column by column."""

import datetime
import uuid

import pytest
from django.db import connection, transaction

from runs.models import Run
from runs.services import _update_returning
from runs.states import RunStatus
from governance.rows import from_row, insert_row
from tests.runs.helpers import start

pytestmark = pytest.mark.django_db


def _columns(run: Run) -> dict:
    return {field.attname: getattr(run, field.attname) for field in Run._meta.concrete_fields}


def _row(run_id) -> tuple:
    table, qn = Run._meta.db_table, connection.ops.quote_name
    columns = ", ".join(qn(field.column) for field in Run._meta.concrete_fields)
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {columns} FROM {qn(table)} WHERE {qn('id')} = %s",
                       [Run._meta.pk.get_db_prep_value(run_id, connection)])
        return cursor.fetchone()


def test_a_row_read_back_is_the_run_a_model_query_gives(operator):
    run_id = start(operator, "How healthy is Acme Corp?")["id"]
    stored = Run.objects.get(id=run_id)
    read = from_row(Run, _row(run_id))
    assert _columns(read) == _columns(stored)
    # Typed as the model query types them: a UUID, aware datetimes, JSON decoded, booleans.
    assert isinstance(read.id, uuid.UUID) and isinstance(read.state, dict) and isinstance(read.snapshot, dict)
    assert isinstance(read.created_at, datetime.datetime) and read.created_at.tzinfo is not None
    assert read.tainted is stored.tainted and not read._state.adding


def test_an_inserted_run_is_stored_as_model_save_would_store_it(operator):
    template = Run.objects.get(id=start(operator, "How healthy is Acme Corp?")["id"])
    run = Run(agent_id=template.agent_id, agent_version_id=template.agent_version_id, caller_id=template.caller_id,
              caller_roles=["operators"], input="plain insert", snapshot={"agent": {"deadline_seconds": 5}},
              state={"messages": [{"role": "user", "content": "plain insert"}]}, event_seq=1)
    with transaction.atomic():
        insert_row(run)
    assert run.created_at is not None and not run._state.adding  # auto_now_add filled in, as save() does
    stored = Run.objects.get(id=run.id)
    assert _columns(stored) == _columns(run)
    assert (stored.status, stored.step, stored.tainted, stored.idempotency_key) == (RunStatus.QUEUED, 0, False, None)


def test_an_update_writes_plain_and_prepared_values_alike(operator):
    run = Run.objects.get(id=start(operator, "How healthy is Acme Corp?")["id"])
    with transaction.atomic():
        saved = _update_returning(run.id, where={"status": run.status},
                                  values={"output": "new output", "step": 41, "tainted": True,
                                          "status": RunStatus.CANCELLED, "state": {"n": 1}},
                                  add={"event_seq": 2}, returning=("event_seq", "step"))
    assert saved == (run.event_seq + 2, 41)
    stored = Run.objects.get(id=run.id)
    assert (stored.output, stored.step, stored.tainted, stored.status, stored.state) == (
        "new output", 41, True, RunStatus.CANCELLED, {"n": 1})
    # A row that no longer matches is left alone, and the answer says so.
    with transaction.atomic():
        assert _update_returning(run.id, where={"status": RunStatus.RUNNING}, values={"step": 1}, add={},
                                 returning=("step",)) is None
    assert Run.objects.get(id=run.id).step == 41
