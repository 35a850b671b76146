"""summary.html: an evidence bundle's page for a person, tallied from the rows as they are written.

It is written from the same rows as the other files and its digest is in the signed manifest,
but it proves nothing by itself: the page says which command does. One self-contained file
(inline CSS, no script, nothing fetched), every value escaped by the template engine.
"""

from collections import Counter
from dataclasses import dataclass, field

from django.template.loader import render_to_string

from runs.evidence_rows import iso

LISTED = 200  # rows per table on the page; the JSON lines files hold them all


@dataclass
class Listed:
    rows: list = field(default_factory=list)
    count: int = 0

    def add(self, row: dict) -> None:
        self.count += 1
        if len(self.rows) < LISTED:
            self.rows.append(row)

    @property
    def more(self) -> int:
        return self.count - len(self.rows)


@dataclass
class Tally:
    plan: object
    requested_by: str
    witness_file: str = ""  # the witness file read, when one is configured
    receipts: int = 0
    events: int = 0
    checkpoints: int = 0
    witness_only: int = 0
    witness_unreadable: int = 0
    review_checkpoints: int = 0  # the review chain's, from the witness file
    policy_versions: int = 0
    runs: int = 0
    runs_by_status: Counter = field(default_factory=Counter)
    approvals_by_status: Counter = field(default_factory=Counter)
    deciders: Counter = field(default_factory=Counter)
    approvals: Listed = field(default_factory=Listed)
    denials: Listed = field(default_factory=Listed)
    blocked: Listed = field(default_factory=Listed)
    tainted: Listed = field(default_factory=Listed)
    unsealed: Listed = field(default_factory=Listed)
    refused: Listed = field(default_factory=Listed)  # runs that set out to do something and were refused it

    def approval(self, row: dict) -> None:
        self.approvals_by_status[row["status"]] += 1
        if row["decided_by"]:
            self.deciders[row["decided_by"]] += 1
        self.approvals.add(row)
        if row["status"] in ("denied", "expired"):
            self.denials.add(row)

    def run(self, row: dict, *, tainted: bool, taint_reason: str, agent: str, finished_at: str | None) -> None:
        self.runs += 1
        self.runs_by_status[row["status"]] += 1
        shown = {"id": row["id"], "status": row["status"], "agent": agent, "finished_at": finished_at,
                 "taint_reason": taint_reason}
        if tainted:
            self.tainted.add(shown)
        if row["status"] == "blocked":
            self.blocked.add(shown)
        if not row["has_receipt"]:
            self.unsealed.add(shown)
        if row.get("refused_count"):
            self.refused.add(shown | {"refused_count": row["refused_count"], "refused_kinds": row["refused_kinds"]})


def summary_html(tally: Tally) -> str:
    plan = tally.plan
    return render_to_string("evidence/summary.html", {
        "tally": tally, "plan": plan, "created_at": iso(plan.created_at),
        "period_from": iso(plan.period_from), "period_to": iso(plan.period_to),
        "runs_by_status": sorted(tally.runs_by_status.items()),
        "approvals_by_status": sorted(tally.approvals_by_status.items()),
        "deciders": tally.deciders.most_common(),
    })
