"""Migrations make the database triggers (the governance stamp, the append-only evidence tables),
and no later migration loses them.

Two ways to lose them: a fresh database that `migrate` left without them, and, on SQLite, a
later migration that rebuilds a table (Django copies its rows into a new table and drops the old
one, triggers included). The second does not show on a fresh database when the rebuilding
migration happens to run first, so it is found from the SQL each migration would send.
"""

import functools

import pytest
from django.db import connection, migrations, models
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.state import ProjectState
from django.db.utils import ConnectionHandler

from agents import append_only as agents_append_only
from core import stamp
from governance.checks import triggers_are_in_place
from review import append_only as review_append_only
from runs import append_only

# Each set of triggers, the module whose create_triggers re-creates it, and the migration that
# first made it on SQLite: any migration that is not an ancestor of that one may run after it.
STAMP_CREATOR = ("governance", "0006_governance_stamp_triggers")
CREATORS = [(stamp, STAMP_CREATOR), (append_only, ("runs", "0009_signed_receipts_and_checkpoints")),
            (review_append_only, ("review", "0001_compliance_review")),
            (agents_append_only, ("agents", "0010_trust_change_append_only"))]
IDS = ["governance-stamp", "append-only", "review-records", "trust-changes"]

# The statements runs.append_only and review.append_only made before they shared a builder, as
# migrations installed them (written out from the code of that time, not from core.triggers).
INSTALLED = {
    "runs": {
        ("sqlite", "create"): [
            "CREATE TRIGGER IF NOT EXISTS runs_receipt_no_update BEFORE UPDATE ON runs_receipt BEGIN SELECT RAISE(ABORT, 'warrant: runs_receipt rows are append-only (UPDATE refused)'); END",
            "CREATE TRIGGER IF NOT EXISTS runs_receipt_no_delete BEFORE DELETE ON runs_receipt BEGIN SELECT RAISE(ABORT, 'warrant: runs_receipt rows are append-only (DELETE refused)'); END",
            "CREATE TRIGGER IF NOT EXISTS runs_runevent_no_update BEFORE UPDATE ON runs_runevent BEGIN SELECT RAISE(ABORT, 'warrant: runs_runevent rows are append-only (UPDATE refused)'); END",
            "CREATE TRIGGER IF NOT EXISTS runs_runevent_no_delete BEFORE DELETE ON runs_runevent BEGIN SELECT RAISE(ABORT, 'warrant: runs_runevent rows are append-only (DELETE refused)'); END",
            "CREATE TRIGGER IF NOT EXISTS runs_receiptcheckpoint_no_update BEFORE UPDATE ON runs_receiptcheckpoint BEGIN SELECT RAISE(ABORT, 'warrant: runs_receiptcheckpoint rows are append-only (UPDATE refused)'); END",
            "CREATE TRIGGER IF NOT EXISTS runs_receiptcheckpoint_no_delete BEFORE DELETE ON runs_receiptcheckpoint BEGIN SELECT RAISE(ABORT, 'warrant: runs_receiptcheckpoint rows are append-only (DELETE refused)'); END",
            "CREATE TRIGGER IF NOT EXISTS runs_approvaldecision_no_update BEFORE UPDATE ON runs_approvaldecision BEGIN SELECT RAISE(ABORT, 'warrant: runs_approvaldecision rows are append-only (UPDATE refused)'); END",
            "CREATE TRIGGER IF NOT EXISTS runs_approvaldecision_no_delete BEFORE DELETE ON runs_approvaldecision BEGIN SELECT RAISE(ABORT, 'warrant: runs_approvaldecision rows are append-only (DELETE refused)'); END",
        ],
        ("sqlite", "drop"): [
            'DROP TRIGGER IF EXISTS runs_receipt_no_update',
            'DROP TRIGGER IF EXISTS runs_receipt_no_delete',
            'DROP TRIGGER IF EXISTS runs_runevent_no_update',
            'DROP TRIGGER IF EXISTS runs_runevent_no_delete',
            'DROP TRIGGER IF EXISTS runs_receiptcheckpoint_no_update',
            'DROP TRIGGER IF EXISTS runs_receiptcheckpoint_no_delete',
            'DROP TRIGGER IF EXISTS runs_approvaldecision_no_update',
            'DROP TRIGGER IF EXISTS runs_approvaldecision_no_delete',
        ],
        ("postgresql", "create"): [
            "\nCREATE OR REPLACE FUNCTION warrant_refuse_change() RETURNS trigger AS $$\nBEGIN\n    RAISE EXCEPTION 'warrant: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP\n        USING ERRCODE = 'insufficient_privilege';\nEND;\n$$ LANGUAGE plpgsql;\n",
            'CREATE OR REPLACE TRIGGER runs_receipt_no_update_delete BEFORE UPDATE OR DELETE ON runs_receipt FOR EACH ROW EXECUTE FUNCTION warrant_refuse_change()',
            'CREATE OR REPLACE TRIGGER runs_receipt_no_truncate BEFORE TRUNCATE ON runs_receipt FOR EACH STATEMENT EXECUTE FUNCTION warrant_refuse_change()',
            'CREATE OR REPLACE TRIGGER runs_runevent_no_update_delete BEFORE UPDATE OR DELETE ON runs_runevent FOR EACH ROW EXECUTE FUNCTION warrant_refuse_change()',
            'CREATE OR REPLACE TRIGGER runs_runevent_no_truncate BEFORE TRUNCATE ON runs_runevent FOR EACH STATEMENT EXECUTE FUNCTION warrant_refuse_change()',
            'CREATE OR REPLACE TRIGGER runs_receiptcheckpoint_no_update_delete BEFORE UPDATE OR DELETE ON runs_receiptcheckpoint FOR EACH ROW EXECUTE FUNCTION warrant_refuse_change()',
            'CREATE OR REPLACE TRIGGER runs_receiptcheckpoint_no_truncate BEFORE TRUNCATE ON runs_receiptcheckpoint FOR EACH STATEMENT EXECUTE FUNCTION warrant_refuse_change()',
            'CREATE OR REPLACE TRIGGER runs_approvaldecision_no_update_delete BEFORE UPDATE OR DELETE ON runs_approvaldecision FOR EACH ROW EXECUTE FUNCTION warrant_refuse_change()',
            'CREATE OR REPLACE TRIGGER runs_approvaldecision_no_truncate BEFORE TRUNCATE ON runs_approvaldecision FOR EACH STATEMENT EXECUTE FUNCTION warrant_refuse_change()',
        ],
        ("postgresql", "drop"): [
            'DROP TRIGGER IF EXISTS runs_receipt_no_update_delete ON runs_receipt',
            'DROP TRIGGER IF EXISTS runs_receipt_no_truncate ON runs_receipt',
            'DROP TRIGGER IF EXISTS runs_runevent_no_update_delete ON runs_runevent',
            'DROP TRIGGER IF EXISTS runs_runevent_no_truncate ON runs_runevent',
            'DROP TRIGGER IF EXISTS runs_receiptcheckpoint_no_update_delete ON runs_receiptcheckpoint',
            'DROP TRIGGER IF EXISTS runs_receiptcheckpoint_no_truncate ON runs_receiptcheckpoint',
            'DROP TRIGGER IF EXISTS runs_approvaldecision_no_update_delete ON runs_approvaldecision',
            'DROP TRIGGER IF EXISTS runs_approvaldecision_no_truncate ON runs_approvaldecision',
        ],
    },
    "review": {
        ("sqlite", "create"): [
            "CREATE TRIGGER IF NOT EXISTS review_reviewrecord_no_update BEFORE UPDATE ON review_reviewrecord BEGIN SELECT RAISE(ABORT, 'warrant: review_reviewrecord rows are append-only (UPDATE refused)'); END",
            "CREATE TRIGGER IF NOT EXISTS review_reviewrecord_no_delete BEFORE DELETE ON review_reviewrecord BEGIN SELECT RAISE(ABORT, 'warrant: review_reviewrecord rows are append-only (DELETE refused)'); END",
        ],
        ("sqlite", "drop"): [
            'DROP TRIGGER IF EXISTS review_reviewrecord_no_update',
            'DROP TRIGGER IF EXISTS review_reviewrecord_no_delete',
        ],
        ("postgresql", "create"): [
            "\nCREATE OR REPLACE FUNCTION warrant_review_refuse_change() RETURNS trigger AS $$\nBEGIN\n    RAISE EXCEPTION 'warrant: % rows are append-only (% refused)', TG_TABLE_NAME, TG_OP\n        USING ERRCODE = 'insufficient_privilege';\nEND;\n$$ LANGUAGE plpgsql;\n",
            'CREATE OR REPLACE TRIGGER review_reviewrecord_no_update_delete BEFORE UPDATE OR DELETE ON review_reviewrecord FOR EACH ROW EXECUTE FUNCTION warrant_review_refuse_change()',
            'CREATE OR REPLACE TRIGGER review_reviewrecord_no_truncate BEFORE TRUNCATE ON review_reviewrecord FOR EACH STATEMENT EXECUTE FUNCTION warrant_review_refuse_change()',
        ],
        ("postgresql", "drop"): [
            'DROP TRIGGER IF EXISTS review_reviewrecord_no_update_delete ON review_reviewrecord',
            'DROP TRIGGER IF EXISTS review_reviewrecord_no_truncate ON review_reviewrecord',
            'DROP FUNCTION IF EXISTS warrant_review_refuse_change()',
        ],
    },
}


@pytest.mark.django_db
@pytest.mark.parametrize("module", [module for module, _ in CREATORS], ids=IDS)
def test_after_migrate_every_trigger_is_there(module):
    assert module.TRIGGERS.missing(connection) == []


@pytest.mark.django_db
def test_every_stamped_table_has_stamp_triggers():
    assert stamp.TRIGGERS.tables(connection.vendor) == set(stamp.TABLES)


@pytest.mark.django_db
def test_the_stamp_triggers_drop_and_come_back():
    # DDL is transactional on SQLite and PostgreSQL: the test's rollback leaves the schema as it was.
    stamp.TRIGGERS.drop(connection)
    assert sorted(stamp.TRIGGERS.missing(connection)) == sorted(t.name for t in stamp.TRIGGERS.triggers(connection.vendor))
    stamp.TRIGGERS.create(connection)
    stamp.TRIGGERS.create(connection)  # idempotent: a database from the old post_migrate hook has them
    assert stamp.TRIGGERS.missing(connection) == []


def _sqlite():
    """A connection to an empty in-memory SQLite database, whatever the tests run on."""
    return ConnectionHandler({"default": {"ENGINE": "django.db.backends.sqlite3", "NAME": ":memory:"}})["default"]


def _rebuilds(migration, state: ProjectState, editor) -> tuple[list[tuple[int, set[str]]], ProjectState]:
    """(operation index, the tables it rebuilds) for each operation of `migration` that makes
    SQLite rebuild a table, and the project state after the migration."""
    found = []
    for index, operation in enumerate(migration.operations):
        if not operation.reduces_to_sql:  # RunPython: no schema change to look at
            continue
        before, after = len(editor.collected_sql), state.clone()
        operation.state_forwards(migration.app_label, after)
        operation.database_forwards(migration.app_label, editor, state, after)
        state = after
        if dropped := {sql.split('"')[1] for sql in editor.collected_sql[before:] if sql.startswith('DROP TABLE "')}:
            found.append((index, dropped))
    return found, state


def _lost(module, creator, history) -> list[str]:
    """Migrations in `history` that may run after `creator`, rebuild a table with triggers of
    `module` on SQLite, and do not re-create them after that."""
    tables, lost = module.TRIGGERS.tables("sqlite"), []
    for migration, found, before_creator in history:
        if (migration.app_label, migration.name) in before_creator[creator]:
            continue
        for index, dropped in found:
            recreated = any(isinstance(operation, migrations.RunPython) and operation.code is module.create_triggers
                            for operation in migration.operations[index + 1:])
            if dropped & tables and not recreated:
                lost.append(f"{migration.app_label}.{migration.name} rebuilds {sorted(dropped & tables)}")
    return lost


def _collect(migrations_in_order, state: ProjectState, before_creator) -> tuple[list, ProjectState]:
    sqlite = _sqlite()
    try:
        history = []
        with sqlite.schema_editor(collect_sql=True, atomic=False) as editor:
            for migration in migrations_in_order:
                found, state = _rebuilds(migration, state, editor)
                history.append((migration, found, before_creator))
        return history, state
    finally:
        sqlite.close()


@functools.cache
def _history() -> tuple[list, ProjectState]:
    """Every migration in the order a fresh `migrate` runs them, each with the tables it
    rebuilds on SQLite and, per creator, the migrations that always run before it; and the
    project state at the end."""
    executor = MigrationExecutor(_sqlite())
    graph = executor.loader.graph
    plan = [migration for migration, backwards in executor.migration_plan(graph.leaf_nodes(), clean_start=True)]
    before_creator = {creator: set(graph.forwards_plan(creator)) for _, creator in CREATORS}
    return _collect(plan, ProjectState(real_apps=executor.loader.unmigrated_apps), before_creator)


def _history_with(extra) -> list:
    history, state = _history()
    return history + _collect([extra], state.clone(), history[0][2])[0]


def _altering_tool(*, then_recreate: bool):
    operations = [migrations.AlterField("tool", "description", models.CharField(max_length=500))]
    if then_recreate:
        operations.append(migrations.RunPython(stamp.create_triggers, migrations.RunPython.noop))
    return type("Migration", (migrations.Migration,), {"operations": operations})("9999_alter_tool", "agents")


# One test, so one pytest-xdist process replays the migrations (several seconds), not each of them.
def test_no_later_migration_rebuilds_a_table_and_loses_its_triggers(django_db_blocker):
    with django_db_blocker.unblock():
        # The check would pass vacuously if it never saw a rebuild: first it must see this one.
        assert _lost(stamp, STAMP_CREATOR, _history_with(_altering_tool(then_recreate=False))) == [
            "agents.9999_alter_tool rebuilds ['agents_tool']"]
        assert _lost(stamp, STAMP_CREATOR, _history_with(_altering_tool(then_recreate=True))) == []
        lost = {name: _lost(module, creator, _history()[0]) for name, (module, creator) in zip(IDS, CREATORS)}
    assert lost == dict.fromkeys(IDS, []), (
        "end each with migrations.RunPython(<the triggers' module>.create_triggers, migrations.RunPython.noop)")


@pytest.mark.django_db
def test_check_database_names_a_lost_trigger():
    assert triggers_are_in_place(None, databases=["default"]) == []
    lost = stamp.TRIGGERS.triggers(connection.vendor)[0]
    with connection.cursor() as cursor:
        cursor.execute(stamp.TRIGGERS.drop_statements(connection.vendor)[0])  # rolled back with the test
    [warning] = triggers_are_in_place(None, databases=["default"])
    assert warning.id == "governance.W036" and lost.name in warning.msg
    assert "core.stamp.create_triggers" in warning.hint


@pytest.mark.parametrize("module", [append_only, review_append_only], ids=["runs", "review"])
@pytest.mark.parametrize("vendor", ["sqlite", "postgresql"])
def test_the_append_only_statements_are_the_ones_migrations_installed(module, vendor):
    """A trigger that exists is not re-created with new text (IF NOT EXISTS on SQLite), and a drop
    must name what is there: the shared builder has to make these statements to the letter."""
    installed = INSTALLED[module.__name__.split(".")[0]]
    assert module.TRIGGERS.create_statements(vendor) == installed[(vendor, "create")]
    assert module.TRIGGERS.drop_statements(vendor) == installed[(vendor, "drop")]
    for trigger in module.TRIGGERS.triggers(vendor):
        assert f" {trigger.name} BEFORE " in trigger.create and f" ON {trigger.table} " in trigger.create
    assert module.TRIGGERS.tables(vendor) == set(module.TABLES)
