"""The six invariants every fault scenario must end with, and the suite's figures.

I1 each approved side effect executed exactly once; I2 no unapproved side effect; I3 every run
terminal or parked within a bound; I4 exactly one receipt per terminal run; I5 the receipt
chain verifies; I6 every run's trace is numbered 1..n without gaps or repeats, n kept on the run.
"""

import time
from collections import Counter, defaultdict

from agents.models import SentEmail
from runs.models import ApprovalRequest, Receipt, Run, RunEvent, SideEffect
from runs.receipts import receipt_verify_chain
from runs.states import TERMINAL

SETTLED = TERMINAL | {"awaiting_approval"}


class Report:
    def __init__(self):
        self.rows: list[dict] = []

    def begin(self, name: str) -> dict:
        row = {"scenario": name}
        self.rows.append(row)
        return row

    @staticmethod
    def fault(row: dict) -> None:
        """Mark the moment the fault was injected: recovery time is counted from here."""
        row["fault_at"] = time.monotonic()

    def lines(self) -> list[str]:
        totals = Counter()
        # still-s: the longest time a run stood still after the fault (from the fault to the run
        # moving again), where the scenario measures it; recover-s: from the fault until every
        # run had settled.
        out = [f"{'scenario':<72} runs  lost  dup-fx  rcpt-err  still-s  recover-s"]
        for row in self.rows:
            for key in ("runs", "lost", "duplicate_side_effects", "receipt_errors"):
                totals[key] += row.get(key, 0)
            totals["longest"] = max(totals["longest"], row.get("recovery_seconds", 0))
            totals["still"] = max(totals["still"], row.get("standstill_seconds", 0))
            still = f"{row['standstill_seconds']:>7.1f}" if "standstill_seconds" in row else f"{'-':>7}"
            out.append(f"{row['scenario'][:72]:<72} {row.get('runs', 0):>4}  {row.get('lost', 0):>4}  "
                       f"{row.get('duplicate_side_effects', 0):>6}  {row.get('receipt_errors', 0):>8}  {still}  "
                       f"{row.get('recovery_seconds', 0):>9.1f}")
        for row in self.rows:
            extra = {k: v for k, v in row.items() if k in ("handed_back_seconds", "call_seconds", "after_restart_seconds")}
            if extra:
                out.append(f"  {row['scenario'][:60]}: {extra}")
        out.append(f"TOTAL {len(self.rows)} scenario runs, {totals['runs']} runs, {totals['lost']} lost, "
                   f"{totals['duplicate_side_effects']} duplicate side effects, {totals['receipt_errors']} duplicate "
                   f"or missing receipts, longest standstill {totals['still']:.1f}s, longest recovery "
                   f"{totals['longest']:.1f}s")
        return out


REPORT = Report()


def check_invariants(row: dict | None = None, *, bound_seconds: float = 60, since: float | None = None,
                     external_duplicates: int = 0) -> dict:
    """Wait (up to the bound) for every run to settle, then assert I1–I5; record the figures."""
    started = time.monotonic()
    deadline = started + bound_seconds
    while True:
        unsettled = list(Run.objects.exclude(status__in=SETTLED).values_list("id", "status"))
        if not unsettled or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    if since is None and row is not None:
        since = row.get("fault_at")
    recovery = time.monotonic() - (since if since is not None else started)

    runs = list(Run.objects.all())
    effects = list(SideEffect.objects.select_related("approval"))
    emails = Counter(SentEmail.objects.values_list("idempotency_key", flat=True))
    receipts = Counter(Receipt.objects.values_list("run_id", flat=True))
    approvals = list(ApprovalRequest.objects.filter(status="approved", tool="send_email"))

    # external_duplicates: effects a service outside Warrant performed twice (it counts them itself).
    duplicate_effects = external_duplicates + sum(count - 1 for count in emails.values() if count > 1)
    per_approval = Counter(e.approval_id for e in effects if e.status == "done")
    duplicate_effects += sum(count - 1 for count in per_approval.values() if count > 1)
    unapproved = [e.idempotency_key for e in effects if e.approval is None or e.approval.status != "approved"]
    stray_emails = [key for key in emails if key not in {e.idempotency_key for e in effects}]
    executed_approved = [a for a in approvals if a.run.status == "succeeded"]
    not_executed = [a.id for a in executed_approved if per_approval.get(a.id, 0) != 1]
    receipt_errors = sum(1 for r in runs if r.status in TERMINAL and receipts.get(r.id, 0) != 1)
    receipt_errors += sum(1 for r in runs if r.status not in TERMINAL and receipts.get(r.id, 0))
    chain = receipt_verify_chain()
    traces = defaultdict(list)
    for run_id, seq in RunEvent.objects.order_by("run_id", "seq").values_list("run_id", "seq"):
        traces[run_id].append(seq)
    broken_traces = [r.id for r in runs if traces.get(r.id, []) != list(range(1, r.event_seq + 1))]

    figures = {"runs": len(runs), "lost": len(unsettled), "duplicate_side_effects": duplicate_effects,
               "receipt_errors": receipt_errors, "recovery_seconds": round(recovery, 1)}
    if row is not None:
        row.update(figures)
    assert not unsettled, f"I3: runs not settled within {bound_seconds}s: {unsettled}"
    assert duplicate_effects == 0 and not not_executed, f"I1: duplicates {duplicate_effects}, missing {not_executed}"
    assert not unapproved and not stray_emails, f"I2: unapproved side effects {unapproved} {stray_emails}"
    assert receipt_errors == 0, f"I4: {receipt_errors} runs without exactly one receipt"
    assert chain.valid, f"I5: chain broken at #{chain.seq}: {chain.reason}"
    assert not broken_traces, f"I6: traces with gaps, repeats or a stale counter: {broken_traces}"
    return figures
