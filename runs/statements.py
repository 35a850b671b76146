"""Plain SQL for the writes a run makes at every step, each statement built once per shape.

Django's model and query machinery builds and compiles a statement on every call; for the few
writes every run repeats, that cost more than the write itself.
"""

from functools import lru_cache

from django.db import connection, models
from django.db.models import Field
from django.db.models.sql import Query

from runs.models import Run, RunEvent


def insert_row(obj: models.Model) -> None:
    """INSERT a new model instance as Model.save would for an add (defaults, auto_now_add, each
    field's own preparation), in one plain statement. Sends no signals: only for models that
    have no receivers (runs and receipts)."""
    sql, fields = _insert_sql(type(obj))
    params = []
    for field, plain, own_pre_save in fields:
        value = field.pre_save(obj, True) if own_pre_save else getattr(obj, field.attname)
        params.append(value if type(value) is plain else field.get_db_prep_save(value, connection))
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
    obj._state.adding, obj._state.db = False, connection.alias


def from_row(model: type[models.Model], row) -> models.Model:
    """The instance a row of every concrete column (in field order, as RETURNING or SELECT of
    them gives it) stands for, each value through the converters a model query applies."""
    names, converters = _row_reading(model)
    values = list(row)
    for index, convert_all, expression in converters:
        value = values[index]
        for convert in convert_all:
            value = convert(value, expression, connection)
        values[index] = value
    return model.from_db(connection.alias, names, values)


@lru_cache(maxsize=16)
def _row_reading(model: type[models.Model]) -> tuple[tuple, tuple]:
    fields = model._meta.concrete_fields
    compiler = connection.ops.compiler("SQLCompiler")(Query(model), connection, connection.alias)
    converters = compiler.get_converters([field.get_col(model._meta.db_table) for field in fields])
    return tuple(field.attname for field in fields), tuple((i, *found) for i, found in converters.items())


@lru_cache(maxsize=16)
def _insert_sql(model: type[models.Model]) -> tuple[str, tuple]:
    """The INSERT, and per field: its plain type (see _with_plain_type) and whether it has a
    pre_save of its own (auto_now_add and the like; the default one reads the attribute)."""
    qn = connection.ops.quote_name
    fields = model._meta.concrete_fields
    columns = ", ".join(qn(field.column) for field in fields)
    sql = f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    return sql, tuple((*_with_plain_type(field), type(field).pre_save is not Field.pre_save) for field in fields)


_PLAIN_TYPES = {"IntegerField": int, "PositiveIntegerField": int, "BigIntegerField": int,
                "PositiveBigIntegerField": int, "BooleanField": bool, "CharField": str, "TextField": str}


def _with_plain_type(field) -> tuple:
    """The field, and the Python type its column takes as it is (None: always prepared by the
    field). A field's own preparation is several calls deep, for an int that stays an int."""
    return field, _PLAIN_TYPES.get(field.get_internal_type())


@lru_cache(maxsize=64)
def update_sql(values: tuple, add: tuple, where: tuple, returning: tuple) -> tuple[str, list, list]:
    """UPDATE the run's row SET `values` (and `add` to integer columns) WHERE id and `where`
    match, RETURNING `returning`; with the fields of the SET and WHERE parameters, in order."""
    opts, qn = Run._meta, connection.ops.quote_name
    set_fields = [_with_plain_type(opts.get_field(name)) for name in values]
    sets = [f"{qn(field.column)} = %s" for field, _plain in set_fields]
    for name in add:
        column = qn(opts.get_field(name).column)
        sets.append(f"{column} = {column} + %s")
    where_fields = [_with_plain_type(opts.get_field(name)) for name in ("id", *where)]
    conditions = " AND ".join(f"{qn(field.column)} = %s" for field, _plain in where_fields)
    columns = ", ".join(qn(opts.get_field(name).column) for name in returning)
    sql = f"UPDATE {qn(opts.db_table)} SET {', '.join(sets)} WHERE {conditions} RETURNING {columns}"
    return sql, set_fields, where_fields


@lru_cache(maxsize=1)
def event_insert() -> tuple[tuple, str, str]:
    """The event columns' fields, the INSERT up to VALUES, and one row's placeholders."""
    fields = tuple(RunEvent._meta.get_field(name) for name in ("run", "seq", "step", "kind", "data", "created_at"))
    qn = connection.ops.quote_name
    insert = f"INSERT INTO {qn(RunEvent._meta.db_table)} ({', '.join(qn(f.column) for f in fields)}) VALUES "
    return fields, insert, f"({', '.join(['%s'] * len(fields))})"
