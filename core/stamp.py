"""The governance stamp: changes in the same transaction as every write to the tables a run's
governance is frozen from, so what was frozen under one stamp may be reused while it holds.

Triggers, not signals: bulk .update() and .delete(), cascades, raw SQL and TRUNCATE send no
signals. Each trigger upserts the single row with a random stamp, so a flushed table (tests)
can never bring back a stamp a process still caches.

Migration governance 0006 creates the triggers. For a migration author:
- a migration that alters a table in TABLES so that SQLite rebuilds it (see core.triggers)
  drops its triggers: end that migration with
  `migrations.RunPython(stamp.create_triggers, migrations.RunPython.noop)`;
- a table added to TABLES needs a migration with that same operation, after the one that
  creates the table (and after governance 0006); the operation skips tables not made yet.
tests/test_triggers.py fails when either is forgotten.
"""

from django.db import connection

from core.triggers import Trigger, TriggerSet

# Every table runs.freeze reads, directly or through a join (tests/runs/test_freeze_cache.py
# checks the list against the SQL an uncached freeze sends), the tool sources, which the
# dispatcher's live check per call reads with the tool's row, and the review's sampling rules,
# which every seal reads (review.sampling; their triggers come from review migration 0003).
TABLES = (
    "agents_agent", "agents_agentversion", "agents_tool", "agents_toolsource",
    "governance_policy", "governance_policy_agents", "governance_toolgrant",
    "skills_skill",
    "auth_group", "auth_user_groups", "auth_group_permissions", "auth_user_user_permissions", "auth_permission",
    "django_content_type",
    "review_samplingrule",
)
STAMP_TABLE = "governance_governancestamp"

_FUNCTION = "warrant_governance_changed"
_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {_FUNCTION}() RETURNS trigger AS $$
BEGIN
    INSERT INTO {STAMP_TABLE} (id, stamp) VALUES (1, gen_random_uuid()::text)
        ON CONFLICT (id) DO UPDATE SET stamp = EXCLUDED.stamp;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
"""
_SQLITE_UPSERT = (f"INSERT INTO {STAMP_TABLE} (id, stamp) VALUES (1, lower(hex(randomblob(16)))) "
                  "ON CONFLICT (id) DO UPDATE SET stamp = excluded.stamp;")


def _sqlite_trigger(table: str, event: str) -> Trigger:
    name = f"{table}_governance_changed_{event.lower()}"
    return Trigger(name, table, f"CREATE TRIGGER IF NOT EXISTS {name} AFTER {event} ON {table} "
                                f"BEGIN {_SQLITE_UPSERT} END")


def _postgresql_trigger(table: str) -> Trigger:
    name = f"{table}_governance_changed"
    return Trigger(name, table, f"CREATE OR REPLACE TRIGGER {name} AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE "
                                f"ON {table} FOR EACH STATEMENT EXECUTE FUNCTION {_FUNCTION}()")


TRIGGERS = TriggerSet(
    sqlite=tuple(_sqlite_trigger(table, event) for table in TABLES for event in ("INSERT", "UPDATE", "DELETE")),
    postgresql=tuple(_postgresql_trigger(table) for table in TABLES),
    postgresql_function=_PG_FUNCTION,
    postgresql_function_name=_FUNCTION,
)


def create_triggers(apps, schema_editor) -> None:
    """A migration's RunPython operation: create (or re-create) every stamp trigger."""
    TRIGGERS.create(schema_editor.connection)


def drop_triggers(apps, schema_editor) -> None:
    TRIGGERS.drop(schema_editor.connection)


def current(conn=connection) -> str | None:
    """The stamp as this transaction sees it; None before anything governed was ever written."""
    with conn.cursor() as cursor:
        cursor.execute(f"SELECT stamp FROM {STAMP_TABLE} WHERE id = 1")
        row = cursor.fetchone()
    return row[0] if row else None


class Kept:
    """What a process read from governed tables, kept while the stamp it was read under holds."""

    def __init__(self, *, limit: int):
        self.limit = limit
        self._state: tuple[str | None, dict] = (None, {})

    def get(self, stamp: str | None, key):
        kept_under, values = self._state
        return values.get(key) if stamp is not None and stamp == kept_under else None

    def get_or_load(self, key, load, *, stamp: str | None = None):
        """The value kept for `key` under the current stamp (or `stamp`, if the caller read it
        already); else `load()`, kept if no governed change committed meanwhile. None is a value."""
        stamp = stamp if stamp is not None else current()
        kept_under, values = self._state
        if stamp is not None and stamp == kept_under and key in values:
            return values[key]
        value = load()
        self.keep(stamp, {key: value})
        return value

    def keep(self, stamp: str | None, items: dict) -> None:
        """Keep `items`, all read after `stamp` was: only if no governed change has committed since."""
        if stamp is None or current() != stamp:
            return
        kept_under, values = self._state
        if kept_under != stamp:
            values = {}
            self._state = (stamp, values)
        if len(values) + len(items) <= self.limit:
            values.update(items)

    def clear(self) -> None:
        self._state = (None, {})
