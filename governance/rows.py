"""Model rows by plain SQL, for the few statements a hot path repeats: built once per shape
instead of by Django's query machinery on every call, with values prepared and converted
exactly as a model query would prepare and convert them."""

from functools import lru_cache

from django.db import connection, models
from django.db.models import Field

_PLAIN_TYPES = {"IntegerField": int, "PositiveIntegerField": int, "BigIntegerField": int,
                "PositiveBigIntegerField": int, "BooleanField": bool, "CharField": str, "TextField": str}


def with_plain_type(field) -> tuple:
    """The field, and the Python type its column takes as it is (None: always prepared by the
    field). A field's own preparation is several calls deep, for an int that stays an int."""
    return field, _PLAIN_TYPES.get(field.get_internal_type())


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


@lru_cache(maxsize=16)
def _insert_sql(model: type[models.Model]) -> tuple[str, tuple]:
    """The INSERT, and per field: its plain type and whether it has a pre_save of its own
    (auto_now_add and the like; the default one reads the attribute)."""
    qn = connection.ops.quote_name
    fields = model._meta.concrete_fields
    columns = ", ".join(qn(field.column) for field in fields)
    sql = f"INSERT INTO {qn(model._meta.db_table)} ({columns}) VALUES ({', '.join(['%s'] * len(fields))})"
    return sql, tuple((*with_plain_type(field), type(field).pre_save is not Field.pre_save) for field in fields)


def converted(field, value):
    """A column's value as a model query hands it on: through the backend's converters and the
    field's own (SQLite's naive datetimes made aware, JSON decoded, and so on)."""
    return _convert(value, *_converters(field))


def _convert(value, column, converters):
    for convert in converters:
        value = convert(value, column, connection)
    return value


def from_row(model: type[models.Model], row) -> models.Model:
    """The instance a row of every concrete column (in field order, as RETURNING or SELECT of
    them gives it) stands for, each value converted as a model query converts it."""
    names, converting = _row_reading(model)
    values = list(row)
    for index, column, converters in converting:
        values[index] = _convert(values[index], column, converters)
    return model.from_db(connection.alias, names, values)


@lru_cache(maxsize=16)
def _row_reading(model: type[models.Model]) -> tuple[tuple, tuple]:
    """The fields' attribute names, and (index, column, converters) of those with converters."""
    fields = model._meta.concrete_fields
    converting = tuple((index, *_converters(field)) for index, field in enumerate(fields) if _converters(field)[1])
    return tuple(field.attname for field in fields), converting


@lru_cache(maxsize=256)
def _converters(field) -> tuple:
    column = field.get_col(field.model._meta.db_table)
    return column, tuple(connection.ops.get_db_converters(column) + field.get_db_converters(connection))
