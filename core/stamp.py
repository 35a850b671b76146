"""The governance stamp: changes in the same transaction as every write to the tables a run's
governance is frozen from, so what was frozen under one stamp may be reused while it holds.

Triggers, not signals: bulk .update() and .delete(), cascades, raw SQL and TRUNCATE send no
signals. They are (re)installed after every migrate, because SQLite rebuilds a table to alter it
and drops its triggers with it. Each trigger upserts the single row with a random stamp, so a
flushed table (tests) can never bring back a stamp a process still caches.
"""

from django.db import connection

# Every table runs.freeze reads, directly or through a join (tests/runs/test_freeze_cache.py
# checks the list against the SQL an uncached freeze sends), and the tool sources, which the
# dispatcher's live check per call reads with the tool's row.
TABLES = (
    "agents_agent", "agents_agentversion", "agents_tool", "agents_toolsource",
    "governance_policy", "governance_policy_agents", "governance_toolgrant",
    "skills_skill",
    "auth_group", "auth_user_groups", "auth_group_permissions", "auth_user_user_permissions", "auth_permission",
    "django_content_type",
)
STAMP_TABLE = "governance_governancestamp"

_PG_FUNCTION = f"""
CREATE OR REPLACE FUNCTION warrant_governance_changed() RETURNS trigger AS $$
BEGIN
    INSERT INTO {STAMP_TABLE} (id, stamp) VALUES (1, gen_random_uuid()::text)
        ON CONFLICT (id) DO UPDATE SET stamp = EXCLUDED.stamp;
    RETURN NULL;
END;
$$ LANGUAGE plpgsql;
"""
_SQLITE_UPSERT = (f"INSERT INTO {STAMP_TABLE} (id, stamp) VALUES (1, lower(hex(randomblob(16)))) "
                  "ON CONFLICT (id) DO UPDATE SET stamp = excluded.stamp;")


def install_triggers(conn=connection) -> None:
    with conn.cursor() as cursor:
        if conn.vendor == "postgresql":
            cursor.execute(_PG_FUNCTION)
            for table in TABLES:
                cursor.execute(f"CREATE OR REPLACE TRIGGER {table}_governance_changed "
                               f"AFTER INSERT OR UPDATE OR DELETE OR TRUNCATE ON {table} "
                               "FOR EACH STATEMENT EXECUTE FUNCTION warrant_governance_changed()")
        elif conn.vendor == "sqlite":
            for table in TABLES:
                for event in ("INSERT", "UPDATE", "DELETE"):
                    cursor.execute(f"CREATE TRIGGER IF NOT EXISTS {table}_governance_changed_{event.lower()} "
                                   f"AFTER {event} ON {table} BEGIN {_SQLITE_UPSERT} END")
        else:
            raise NotImplementedError(f"no governance stamp triggers for {conn.vendor}")


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
