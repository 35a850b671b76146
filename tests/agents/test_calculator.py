import pytest

from agents.tools.calculator import calculator, evaluate
from agents.tools.envelopes import ToolContext, ToolError

CTX = ToolContext(run_id="run-test", caller="tester")


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 / 2", 3.5),
        ("7 // 2", 3),
        ("7 % 3", 1),
        ("2 ** 10", 1024),
        ("-3 ** 2", -9),
        ("-(4 - 10)", 6),
        ("+5", 5),
        ("0.1 + 0.2", 0.3),
        ("(910 + 960 + 1010) / 3", 960),
        ("1,000,000 / 4", 250000),
        ("2 ** -1", 0.5),
    ],
)
def test_it_evaluates_arithmetic(expression, expected):
    assert evaluate(expression) == expected


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("10%", 0.1),
        ("240000 * 10%", 24000),
        ("10% * 240000", 24000),
        ("10% of 240000", 24000),
        ("7% * 100", 7),
        ("1.5% of 1000", 15),
        ("100 - 20%", 99.8),
    ],
)
def test_it_reads_a_trailing_percent_sign_as_hundredths(expression, expected):
    assert evaluate(expression) == expected


def test_a_percent_sign_followed_by_an_operand_is_a_remainder():
    assert evaluate("10 % 3") == 1
    assert evaluate("10 % (4)") == 2


def test_whole_results_come_back_as_integers():
    assert isinstance(evaluate("10 / 2"), int)
    assert isinstance(evaluate("10% of 240000"), int)


@pytest.mark.parametrize(
    "expression",
    [
        "x + 1",
        "__import__('os').system('true')",
        "abs(-1)",
        "(1).real",
        "[1, 2][0]",
        "1 < 2",
        "1 if 1 else 2",
        "lambda: 1",
        "'a' * 3",
        "True + 1",
        "1 & 3",
        "2 ^ 3",
        "1; 2",
        "",
        "   ",
    ],
)
def test_it_refuses_anything_but_arithmetic(expression):
    with pytest.raises(ToolError) as caught:
        evaluate(expression)
    assert caught.value.code == "invalid_arguments"


HUGE = ["9**9**9", "10 ** 1001", "99999 ** 299", "2 ** 100000", "10.0 ** 400", "1e999"]


@pytest.mark.parametrize("expression", HUGE)
def test_it_refuses_numbers_too_large_to_compute(expression):
    with pytest.raises(ToolError) as caught:
        evaluate(expression)
    assert caught.value.code == "invalid_arguments"


@pytest.mark.parametrize("expression", ["1 / 0", "1 // 0", "5 % 0", "0 ** -1"])
def test_it_reports_division_by_zero_as_a_tool_error(expression):
    with pytest.raises(ToolError, match="Division by zero"):
        evaluate(expression)


def test_it_refuses_complex_results():
    with pytest.raises(ToolError):
        evaluate("(-8) ** 0.5")


def test_it_refuses_overlong_expressions():
    with pytest.raises(ToolError):
        evaluate("1 + " * 100 + "1")


def test_the_tool_echoes_the_expression_with_its_result():
    assert calculator({"expression": "10% of 240000"}, CTX) == {"expression": "10% of 240000", "result": 24000}
