"""Plain SQL for the writes a run makes at every step, each statement built once per shape
(governance.rows has the model-independent pieces).

Django's model and query machinery builds and compiles a statement on every call; for the few
writes every run repeats, that cost more than the write itself.
"""

from functools import lru_cache

from django.db import connection

from governance.rows import with_plain_type
from runs.models import Run, RunEvent


@lru_cache(maxsize=64)
def update_sql(values: tuple, add: tuple, where: tuple, returning: tuple) -> tuple[str, list, list]:
    """UPDATE the run's row SET `values` (and `add` to integer columns) WHERE id and `where`
    match, RETURNING `returning`; with the fields of the SET and WHERE parameters, in order."""
    opts, qn = Run._meta, connection.ops.quote_name
    set_fields = [with_plain_type(opts.get_field(name)) for name in values]
    sets = [f"{qn(field.column)} = %s" for field, _plain in set_fields]
    for name in add:
        column = qn(opts.get_field(name).column)
        sets.append(f"{column} = {column} + %s")
    where_fields = [with_plain_type(opts.get_field(name)) for name in ("id", *where)]
    conditions = " AND ".join(f"{qn(field.column)} = %s" for field, _plain in where_fields)
    columns = ", ".join(qn(opts.get_field(name).column) for name in returning)
    sql = f"UPDATE {qn(opts.db_table)} SET {', '.join(sets)} WHERE {conditions} RETURNING {columns}"
    return sql, set_fields, where_fields


@lru_cache(maxsize=1)
def event_insert() -> tuple[tuple, str, str]:
    """The event columns' fields, the INSERT up to VALUES, and one row's placeholders."""
    fields = tuple(RunEvent._meta.get_field(name)
                   for name in ("run", "seq", "step", "kind", "data", "hash", "created_at"))
    qn = connection.ops.quote_name
    insert = f"INSERT INTO {qn(RunEvent._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) VALUES "
    return fields, insert, f"({', '.join(['%s'] * len(fields))})"


@lru_cache(maxsize=1)
def event_hash_sql() -> str:
    """The hash of one event of a run, by (run, seq): the unique index finds it."""
    opts, qn = RunEvent._meta, connection.ops.quote_name
    column = {name: qn(opts.get_field(name).column) for name in ("run", "seq", "hash")}
    return f"SELECT {column['hash']} FROM {qn(opts.db_table)} WHERE {column['run']} = %s AND {column['seq']} = %s"
