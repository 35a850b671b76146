"""Object-level authorization between two peers, against a live server.

Schemathesis' own `object_level_authorization` check (run by run_schemathesis.py with the two
operators as WFC peers) replays only reads, and only the ones it can prove the owner made. This
companion covers the object routes of the run API deterministically, writes included: the owner
(operator) creates a finished run (with a receipt) and a parked run (with a pending approval);
the peer (operator2, same role) must get 404 with the error body on every one of them, must not
find them in any list or export, and must not have changed them.

    python tests/fuzz/peer_isolation.py http://127.0.0.1:8000/api/v1 OWNER_TOKEN PEER_TOKEN
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from dataclasses import dataclass, field

import httpx

FINISHED_INPUT = "List all accounts."
PARKED_INPUT = "Delete the account Initech."  # delete_account needs a SecOps approval
TERMINAL = {"succeeded", "failed", "blocked", "stopped", "cancelled"}


@dataclass
class Report:
    checks: int = 0
    failures: list[str] = field(default_factory=list)

    def expect(self, ok: bool, message: str) -> None:
        self.checks += 1
        if not ok:
            self.failures.append(message)


def _client(base_url: str, token: str) -> httpx.Client:
    return httpx.Client(base_url=base_url.rstrip("/") + "/", headers={"Authorization": f"Token {token}"}, timeout=30)


def _start(owner: httpx.Client, text: str) -> dict:
    response = owner.post("runs/", json={"agent": "crm-assistant", "input": text},
                          headers={"Idempotency-Key": f"peer-isolation-{uuid.uuid4()}"})
    if response.status_code not in (200, 201):
        raise RuntimeError(f"the owner could not start a run: {response.status_code} {response.text[:300]}")
    return response.json()


def _settle(owner: httpx.Client, run: dict, done) -> dict:
    deadline = time.monotonic() + 30
    while not done(run) and time.monotonic() < deadline:
        time.sleep(0.2)
        run = owner.get(f"runs/{run['id']}/").json()
    return run


def _is_not_found(response: httpx.Response) -> bool:
    try:
        error = response.json().get("error", {})
    except (ValueError, AttributeError):
        return False
    return response.status_code == 404 and isinstance(error, dict) and error.get("code") == "not_found"


def _ids(body, key: str = "id") -> set[str]:
    results = body.get("results", []) if isinstance(body, dict) else []
    return {str(item.get(key)) for item in results if isinstance(item, dict)}


def check(base_url: str, owner_token: str, peer_token: str) -> Report:
    report = Report()
    with _client(base_url, owner_token) as owner, _client(base_url, peer_token) as peer:
        finished = _settle(owner, _start(owner, FINISHED_INPUT),
                           lambda r: r["status"] in TERMINAL and r.get("receipt_id"))
        parked = _settle(owner, _start(owner, PARKED_INPUT),
                         lambda r: r["status"] in TERMINAL or r.get("pending_approval"))
        if not finished.get("receipt_id"):
            raise RuntimeError(f"the owner's run did not finish with a receipt: {json.dumps(finished)[:400]}")
        if not parked.get("pending_approval"):
            raise RuntimeError(f"the owner's run did not park for approval: {json.dumps(parked)[:400]}")
        run_id, receipt_id = finished["id"], finished["receipt_id"]
        parked_id, approval_id = parked["id"], parked["pending_approval"]["id"]

        reads = [f"runs/{run_id}/", f"runs/{run_id}/events/", f"receipts/{receipt_id}/",
                 f"receipts/{receipt_id}/verify/", f"runs/{parked_id}/", f"runs/{parked_id}/events/"]
        # The owner reaches every one of them, or the peer's 404s would prove nothing.
        for path in reads:
            response = owner.get(path)
            report.expect(response.status_code == 200, f"owner GET {path} -> {response.status_code}, expected 200")
        for path in reads:
            response = peer.get(path)
            report.expect(_is_not_found(response),
                          f"peer GET {path} -> {response.status_code} {response.text[:200]!r}, expected 404 not_found")
        writes = [(f"runs/{parked_id}/cancel/", None), (f"runs/{run_id}/cancel/", None),
                  (f"approvals/{approval_id}/approve/", {"reason": "peer"}),
                  (f"approvals/{approval_id}/deny/", {"reason": "peer"})]
        for path, body in writes:
            response = peer.post(path, json=body) if body is not None else peer.post(path)
            report.expect(_is_not_found(response),
                          f"peer POST {path} -> {response.status_code} {response.text[:200]!r}, expected 404 not_found")

        # Nothing the peer did changed the owner's objects.
        after = owner.get(f"runs/{parked_id}/").json()
        report.expect(after.get("status") == "awaiting_approval"
                      and (after.get("pending_approval") or {}).get("id") == approval_id,
                      f"the owner's parked run changed after the peer's requests: {json.dumps(after)[:300]}")
        report.expect(owner.get(f"runs/{run_id}/").json().get("status") == finished["status"],
                      "the owner's finished run changed after the peer's requests")

        # Nor do the objects appear in the peer's lists or export.
        listed = {
            "runs/": _ids(peer.get("runs/", params={"limit": 1000}).json()),
            "approvals/": _ids(peer.get("approvals/", params={"limit": 1000}).json()),
            "receipts/": _ids(peer.get("receipts/", params={"limit": 1000}).json())
            | _ids(peer.get("receipts/", params={"limit": 1000}).json(), "run_id"),
        }
        for path, ids in listed.items():
            leaked = ids & {run_id, parked_id, receipt_id, approval_id}
            report.expect(not leaked, f"peer GET {path} lists the owner's {sorted(leaked)}")
        export = peer.get("receipts/export/", params={"format": "jsonl"})
        report.expect(export.status_code == 200 and run_id not in export.text and receipt_id not in export.text,
                      f"peer GET receipts/export/?format=jsonl -> {export.status_code}, or it holds the owner's receipt")
    return report


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    report = check(*argv)
    print(f"peer isolation: {report.checks} checks, {len(report.failures)} failures")
    for failure in report.failures:
        print(f"  FAIL {failure}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
