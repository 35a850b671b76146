"""Scenarios 1 and 2, in one process on the embedded default: Warrant beside LangGraph and Pydantic AI.

1. harness: the scripted agent, N runs one after another.
2. approval: the same with compute_health_score under an approval, approved programmatically.
Warrant runs with full governance on SQLite in-process (Celery eager): policy snapshot, intent
screening, per-step checkpoints with events, the approval bound to the call's digest, a sealed
hash-chained receipt. Every variant's answers are checked, not only timed.
"""

import time
from pathlib import Path

from bench import djangoenv
from bench.common import rate, record, rotations
from bench.script import PLAN, final_answer


def _warrant(approval: bool):
    from django.contrib.auth import get_user_model

    from runs.models import ApprovalRequest, Run
    from runs.services import approval_decide, run_start

    users = get_user_model().objects
    operator, approver = users.get(username="operator"), users.get(username="approver")
    slug = djangoenv.APPROVAL_AGENT if approval else djangoenv.AGENT

    def once() -> str:
        run, _ = run_start(agent_slug=slug, input_text="How healthy is Acme Corp?", caller=operator)
        if approval:
            pending = ApprovalRequest.objects.filter(run_id=run.id, status="pending").values_list("id", flat=True)
            approval_decide(via="session", approval_id=pending.get(), user=approver, approve=True, reason="bench")
        return run.id

    def check(run_id) -> str:
        run = Run.objects.get(id=run_id)
        assert run.status == "succeeded", (run.status, run.error, run.error_message)
        assert run.receipt is not None and run.tool_calls == len(PLAN)
        return run.output

    return once, check


def run(*, workdir: Path, n: int, reps: int, scenarios=("harness", "approval")) -> list[dict]:
    djangoenv.setup(workdir / "embedded")
    djangoenv.prepare()
    from bench.peers_langgraph import LangGraphAgent
    from bench.peers_pydantic import PydanticAIAgent
    from bench.script import call_tool

    expected = final_answer(call_tool("compute_health_score", {"account_id": "A-100"}))
    records = []
    for scenario in scenarios:
        approval = scenario == "approval"
        w_once, w_check = _warrant(approval)
        lg = LangGraphAgent(workdir / f"langgraph-{scenario}.sqlite3", approval=approval)
        pa = PydanticAIAgent(approval=approval)
        variants = {
            "warrant": w_once,
            "langgraph": lg.run_with_approval if approval else lg.run,
            "pydantic_ai": pa.run_with_approval if approval else pa.run,
            # The agent's own work without any framework: what every variant spends in the tools.
            TOOLS_ALONE: _tools_alone,
        }
        # Every variant gives the right answer before anything is timed (and warms up).
        assert w_check(w_once()) == expected
        assert variants["langgraph"]() == expected and variants["pydantic_ai"]() == expected
        assert variants[TOOLS_ALONE]() == expected
        # What one run asks of its database (counted, not timed): statements and transactions.
        for name, counts in (("warrant", _warrant_sql(w_once)), ("langgraph", _sqlite_sql(lg.conn, variants["langgraph"]))):
            for metric, unit in (("statements_per_run", "statements"), ("transactions_per_run", "transactions")):
                records.append(record(scenario, name, 0, metric, counts[metric], unit))
        for rep, order in rotations(list(variants), reps):
            cpu_ms = {}
            for name in order:
                fn = variants[name]
                cpu = time.process_time()
                value = rate(lambda _i: fn(), n)
                cpu_ms[name] = (time.process_time() - cpu) / n * 1000
                records.append(record(scenario, name, rep, "runs_per_s", value, "runs/s", n=n))
                records.append(record(scenario, name, rep, "cpu_ms_per_run", cpu_ms[name], "ms", n=n))
            # What a framework adds to the agent's work: its CPU per run beyond the tools' own.
            for name in variants.keys() - {TOOLS_ALONE}:
                records.append(record(scenario, name, rep, "cpu_ms_beyond_tools", cpu_ms[name] - cpu_ms[TOOLS_ALONE], "ms", n=n))
        lg.close()
    return records


TOOLS_ALONE = "tools alone"


def _tools_alone() -> str:
    """The plan's tool calls, one after another, as the peers call them: no model, no framework."""
    from bench.script import call_tool

    result = None
    for name, arguments in PLAN:
        result = call_tool(name, arguments)
    return final_answer(result)


def _counted(statements: list[str]) -> dict:
    """Statements that read or write, and transactions (each BEGIN; commits end them)."""
    begins = sum(1 for sql in statements if sql.lstrip().upper().startswith("BEGIN"))
    control = ("BEGIN", "COMMIT", "ROLLBACK", "SAVEPOINT", "RELEASE")
    work = sum(1 for sql in statements if not sql.lstrip().upper().startswith(control))
    return {"statements_per_run": work, "transactions_per_run": begins}


def warrant_statements(once) -> list[str]:
    """The SQL of every statement Django sends while `once()` runs."""
    from django.db import connection

    seen = []

    def spy(execute, sql, params, many, context):
        seen.append(sql)
        return execute(sql, params, many, context)

    with connection.execute_wrapper(spy):
        once()
    return seen


def _warrant_sql(once) -> dict:
    return _counted(warrant_statements(once))


def _sqlite_sql(conn, once) -> dict:
    seen = []
    conn.set_trace_callback(seen.append)
    try:
        once()
    finally:
        conn.set_trace_callback(None)
    return _counted(seen)
