"""The scripted backend is generic: it plans for tools it has never seen, and its code names no demo tool."""

from pathlib import Path

from agents import prompt_format as fmt
from agents.tools.calculator import evaluate
from tests.agents.scripted_chat import Conversation, demo_tools, ok, schema, system


PROJECT_TOOLS = [
    {"name": "list_projects", "description": "Every project.", "input_schema": schema()},
    {"name": "find_project", "description": "One project by name.", "input_schema": schema(query="A name.")},
    {"name": "get_project_budget", "description": "A project's budget.", "input_schema": schema(project_id="P-1")},
]
PROJECTS = {"P-7": "Apollo", "P-8": "Gemini"}


def projects(name, arguments):
    """Tools no wording module knows, answering as tools do."""
    if name == "list_projects":
        return ok([{"id": i, "name": n} for i, n in PROJECTS.items()])
    if name == "find_project":
        return ok(next({"id": i, "name": n} for i, n in PROJECTS.items() if n == arguments["query"]))
    return ok({"project_id": arguments["project_id"], "budget": 1000 + int(arguments["project_id"][2:])})


def test_it_plans_for_tools_it_has_never_seen_from_their_schemas_alone():
    # project_id makes projects a kind; find_project takes a query and says project: it resolves names.
    tools = PROJECT_TOOLS[1:]
    batches, answer = Conversation("What is the budget of Apollo?", tools=tools, answer=projects).batches()

    assert batches == [[("find_project", {"query": "Apollo"})], [("get_project_budget", {"project_id": "P-7"})]]
    assert answer == 'get_project_budget returned: {"budget": 1007, "project_id": "P-7"}'


def test_it_fans_out_over_what_a_lister_it_has_never_seen_returns():
    playbook = fmt.playbook_section("budgets", "1. Call `list_projects`.\n2. Call `get_project_budget` for each.\n")
    batches, answer = Conversation("What are the budgets?", system_prompt=system(playbook), tools=PROJECT_TOOLS,
                                   answer=projects).batches()

    assert batches == [[("list_projects", {})],
                       [("get_project_budget", {"project_id": "P-7"}), ("get_project_budget", {"project_id": "P-8"})]]
    assert answer.split("\n\n") == ['get_project_budget returned: {"budget": 1007, "project_id": "P-7"}',
                                     'get_project_budget returned: {"budget": 1008, "project_id": "P-8"}']


def test_an_id_the_schema_pattern_does_not_fit_is_not_taken_for_a_record():
    from agents.demo_data import TOOL_DEFINITIONS

    tools = [{key: tool[key] for key in ("name", "description", "input_schema")} for tool in TOOL_DEFINITIONS]
    batches, _ = Conversation("List the open tickets for Globex after INC-42.", tools=tools).batches()

    assert batches == [[("get_account", {"query": "Globex"})], [("list_open_tickets", {"account_id": "A-200"})]]


def test_the_backend_code_names_no_demo_tool_and_imports_no_run_module():
    import ast

    from agents.backends.scripted_text import WORDING_MODULES
    from agents.demo_data import TOOL_DEFINITIONS

    demo_names = {tool["name"] for tool in TOOL_DEFINITIONS}
    for path in sorted((Path(__file__).resolve().parents[2] / "agents" / "backends").glob("scripted*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef)) and ast.get_docstring(node)}
        # The paths of the wording modules name the tools they speak for (calculator_wording): the list of
        # them is the one place the backend points at tools' words, and the code reads none by name.
        strings = {node.value for node in ast.walk(tree)
                   if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings}
        strings -= set(WORDING_MODULES)
        assert not {name for name in demo_names if any(name in text for text in strings)}, path.name
        imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
        assert not {name for name in imported if name.split(".")[0] == "runs"}, path.name


def test_the_demo_tools_words_come_from_the_wording_beside_them():
    from agents.backends.scripted_text import WORDING_MODULES, wording
    from agents.tools import calculator_wording, crm_wording

    words = wording()
    assert WORDING_MODULES == ("agents.tools.crm_wording", "agents.tools.calculator_wording")
    assert set(words.answers) | set(words.summaries) == {tool["name"] for tool in demo_tools()}
    assert words.synonyms["churn"] == "health" and words.answers["send_email"] is crm_wording.sent
    assert {tool for tool, _ in words.orders} == {"send_email", "delete_account"}
    assert words.answers["calculator"] is calculator_wording.calculated
    assert set(words.fills) == {"expression", "subject", "body"}  # the calculator's, then the email's


def test_a_tool_it_has_never_seen_that_takes_an_expression_is_given_the_requests_arithmetic():
    # The calculator's wording reads a request by the property `expression`, not by the tool's name;
    # the answer is the tool's JSON, since no wording module knows this tool.
    tools = [{"name": "evaluate", "description": "Arithmetic.", "input_schema": schema(expression="e.g. 2 * 3")}]

    def evaluating(name, arguments):
        return ok({"result": evaluate(arguments["expression"])})

    assert Conversation("What is 6 * 7?", tools=tools, answer=evaluating).batches() == (
        [[("evaluate", {"expression": "6 * 7"})]], 'evaluate returned: {"result": 42}')
    assert Conversation("Evaluate the weather.", tools=tools, answer=evaluating).batches() == (
        [], "I can't help with that using the tools available to me.")


def test_an_order_phrase_is_filled_by_the_schema_of_the_tool_it_orders():
    # "Send an email to ..." names the tool through crm_wording's phrase; the call takes the properties
    # the tool's schema gives (here `recipient`, not `to`), filled as for a step about that address.
    tools = [tool if tool["name"] != "send_email" else
             {**tool, "input_schema": schema(recipient="An address.", subject="A subject.", body="Plain text.")}
             for tool in demo_tools()]
    [[(name, arguments)]], _ = Conversation("Send an email to ops@example.com about the outage.", tools=tools).batches()

    assert name == "send_email" and list(arguments) == ["recipient", "subject", "body"]
    assert (arguments["recipient"], arguments["subject"]) == ("ops@example.com", "Outage")
    assert arguments["body"].startswith("Hi Ops,\n\nI am writing about the outage.")
