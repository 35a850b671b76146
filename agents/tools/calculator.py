"""Arithmetic for the model, without eval: parse to a Python AST and walk only the nodes we allow.

Anything else (names, calls, attributes, subscripts, comparisons...) is refused, and every step is
bounded so that an expression cannot make the worker compute a number with millions of digits.
"""

import ast
import math
import operator
import re

from agents.tools.envelopes import ToolContext, ToolError

MAX_EXPRESSION_LENGTH = 200
MAX_EXPONENT = 1000
MAX_RESULT_DIGITS = 300
MAX_MAGNITUDE = 10**MAX_RESULT_DIGITS

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.USub: operator.neg, ast.UAdd: operator.pos}
_NOT_ALLOWED = {
    ast.Name: "names and variables are not allowed",
    ast.Call: "function calls are not allowed",
    ast.Attribute: "attributes are not allowed",
    ast.Subscript: "indexing is not allowed",
}

_NUMBER = r"(\d+(?:\.\d*)?|\.\d+)"
# "10% of 240000" reads as 0.1 * 240000.
_PERCENT_OF = re.compile(_NUMBER + r"\s*%\s*of\b", re.IGNORECASE)
# "10%" is a percentage unless an operand follows ("10 % 3" stays a remainder).
_PERCENT = re.compile(_NUMBER + r"\s*%(?!\s*[\d.(])")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


class _Refused(Exception):
    pass


def _normalize(expression: str) -> str:
    text = expression.replace("×", "*").replace("÷", "/").replace("−", "-")
    text = _THOUSANDS.sub("", text)
    text = _PERCENT_OF.sub(r"(\1/100)*", text)
    return _PERCENT.sub(r"(\1/100)", text)


def _check_size(value):
    if isinstance(value, complex):
        raise _Refused("the result is not a real number")
    if isinstance(value, float) and not math.isfinite(value):
        raise _Refused("the result is too large")
    if isinstance(value, int) and abs(value) >= MAX_MAGNITUDE:
        raise _Refused(f"the result has more than {MAX_RESULT_DIGITS} digits")
    return value


def _power(base, exponent):
    if abs(exponent) > MAX_EXPONENT:
        raise _Refused(f"exponents are limited to {MAX_EXPONENT}")
    # Refuse before computing: 2**1000 is fine, 999999**999 is a 6,000-digit number.
    if isinstance(base, int) and isinstance(exponent, int) and abs(base) > 1 and exponent > 0:
        if exponent * math.log10(abs(base)) >= MAX_RESULT_DIGITS:
            raise _Refused(f"the result has more than {MAX_RESULT_DIGITS} digits")
    return base**exponent


def _evaluate(node):
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
            raise _Refused(f"{node.value!r} is not a number")
        return _check_size(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow):
            return _check_size(_power(left, right))
        return _check_size(_BINARY[type(node.op)](left, right))
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitXor):
        raise _Refused("'^' is not a power here; write '**'")
    raise _Refused(_NOT_ALLOWED.get(type(node), f"{type(node).__name__} is not arithmetic"))


def evaluate(expression: str) -> int | float:
    """The value of an arithmetic expression, or ToolError("invalid_arguments", why not)."""
    if not isinstance(expression, str) or not expression.strip():
        raise ToolError("invalid_arguments", "The expression is empty.")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ToolError("invalid_arguments", f"Expressions are limited to {MAX_EXPRESSION_LENGTH} characters.")
    try:
        tree = ast.parse(_normalize(expression).strip(), mode="eval")
    except (SyntaxError, ValueError):
        raise ToolError("invalid_arguments", f"{expression!r} is not an arithmetic expression.") from None
    try:
        value = _evaluate(tree)
    except ZeroDivisionError:
        raise ToolError("invalid_arguments", "Division by zero.") from None
    except ArithmeticError:
        raise ToolError("invalid_arguments", "The result is too large.") from None
    except _Refused as refusal:
        raise ToolError("invalid_arguments", f"Cannot calculate {expression!r}: {refusal}.") from None
    if isinstance(value, float):
        # Binary floats make 7% of 100 come out as 7.000000000000001; nobody asked for that digit.
        value = float(f"{value:.15g}")
        if value.is_integer() and abs(value) < 2**53:
            return int(value)
    return value


def calculator(args: dict, ctx: ToolContext) -> dict:
    expression = args.get("expression")
    return {"expression": expression, "result": evaluate(expression)}
