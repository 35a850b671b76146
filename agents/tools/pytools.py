"""Python functions as tools: a dotted path, a JSON schema derived from the type hints.

A function tool takes its arguments as keywords (`def f(account_id: str, limit: int = 10)`);
a parameter annotated `ToolContext` receives the call's context and is not part of the schema.
A dotted module path registers every function the module lists in `__all__`.
"""

import enum
import importlib
import inspect
import re
import types
import typing
from dataclasses import dataclass

from django.utils.module_loading import import_string

from agents.tools.allowed import python_path_allowed
from agents.tools.envelopes import ToolContext

_SIMPLE = {str: "string", int: "integer", float: "number", bool: "boolean", type(None): "null"}


class SignatureError(ValueError):
    """A function whose signature cannot become a tool's schema."""


@dataclass(frozen=True)
class FunctionTool:
    name: str
    handler: str
    description: str
    input_schema: dict


def schema_of(hint) -> dict:
    if hint in _SIMPLE:
        return {"type": _SIMPLE[hint]}
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = schema_of(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        return schema | {"description": notes[0]} if notes else schema
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [schema_of(a) for a in args]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (list, tuple, set, frozenset) or hint in (list, tuple, set):
        return {"type": "array", "items": schema_of(args[0])} if args else {"type": "array"}
    if origin is dict or hint is dict:
        if len(args) == 2:
            return {"type": "object", "additionalProperties": schema_of(args[1])}
        return {"type": "object"}
    if isinstance(hint, type) and issubclass(hint, enum.Enum):
        return {"enum": [m.value for m in hint]}
    if hint is typing.Any:
        return {}
    raise SignatureError(f"the type {hint!r} has no JSON schema; use str, int, float, bool, list, dict, Literal or an Enum")


def describe(path: str, func) -> FunctionTool:
    if not callable(func):
        raise SignatureError(f"{path} is not callable")
    try:
        hints = typing.get_type_hints(func, include_extras=True)
    except Exception as exc:
        raise SignatureError(f"{path}: its type hints cannot be resolved ({exc})") from None
    try:
        parameters = inspect.signature(func).parameters
    except (TypeError, ValueError) as exc:  # a class or builtin without a signature Python can read
        raise SignatureError(f"{path}: its signature cannot be read ({exc})") from None
    properties, required = {}, []
    for name, param in parameters.items():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise SignatureError(f"{path}: parameter {name!r} must be a plain or keyword-only parameter")
        if hints.get(name) is ToolContext:
            continue
        if name not in hints:
            raise SignatureError(f"{path}: parameter {name!r} has no type hint")
        schema = schema_of(hints[name])
        if param.default is inspect.Parameter.empty:
            required.append(name)
        elif isinstance(param.default, (str, int, float, bool, type(None))):
            schema = schema | {"default": param.default}
        properties[name] = schema
    schema = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    doc = inspect.getdoc(func) or ""
    description = doc.split("\n\n")[0].replace("\n", " ").strip() or f"The Python function {path}."
    name = re.sub(r"[^A-Za-z0-9_-]+", "_", getattr(func, "__name__", path.rpartition(".")[2]))[:48]
    return FunctionTool(name=name, handler=path, description=description, input_schema=schema)


def functions_at(path: str) -> list[FunctionTool]:
    if not python_path_allowed(path):  # whoever calls: importing runs the module's code
        raise SignatureError(f"{path} is outside the modules this deployment allows (WARRANT_PYTHON_TOOL_MODULES)")
    try:
        try:
            target = importlib.import_module(path)
        except ImportError:
            target = import_string(path)
    except ImportError as exc:
        raise SignatureError(f"cannot import {path}: {exc}") from None
    if inspect.ismodule(target):
        names = getattr(target, "__all__", None)
        if not names:
            raise SignatureError(f"the module {path} lists no functions in __all__")
        return [describe(f"{path}.{n}", getattr(target, n)) for n in names]
    return [describe(path, target)]


def invoke(func, arguments: dict, ctx: ToolContext):
    hints = typing.get_type_hints(func)
    extra = {name: ctx for name, hint in hints.items() if hint is ToolContext}
    return func(**arguments, **extra)
