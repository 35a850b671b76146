"""Scenario 6: verify a chain of N receipts (100,000 in the full run) beside hashing the same bytes
with hashlib alone (the floor).

The chain is made of one real receipt's body (sealed by a real run) repeated with each row's own
run id (an empty trace, no approvals, the row's own input and output digests), chained, signed and
stored through the ORM like receipt_seal does; verification is Warrant's own receipt_verify_chain
(signatures, links, hashes, canonical v2 bodies, and each run's row, trace and approvals against
its receipt, the checkpoints and the completeness check). The floor hashes prev_hash + body of
every receipt, already in memory.

The first verification in the process checks every signature (Ed25519) and parses every body;
the later ones, as in a long-lived web or worker process, find the receipts they found whole in
runs.verification_memo and runs.signing's remembered signatures, and still read every receipt,
hash every body and hold every run's row, trace and approvals to its receipt. The first is
recorded on its own ("warrant, first in the process"); the reps, and the target, are the later ones.
"""

import hashlib
import json
import time
import uuid
from pathlib import Path

from bench import djangoenv
from bench.common import record, rotations


def _build_chain(n: int) -> None:
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from agents.models import Agent
    from bench.script import PROMPT
    from runs.models import Receipt, Run
    from runs import signing
    from runs.receipts import canonical, chain_hash, sha256
    from runs.services import run_start
    from warrant_verify.messages import GENESIS, receipt_message

    operator = get_user_model().objects.get(username="operator")
    real = run_start(agent_slug=djangoenv.AGENT, input_text=PROMPT, caller=operator)[0]
    sealed = Receipt.objects.get(run_id=real.id)
    real = Run.objects.get(id=real.id)  # as it ended
    template = json.loads(sealed.body) | {"trace": {"events": 0, "head": GENESIS}, "approvals": [],
                                           "input_sha256": sha256(PROMPT), "output_sha256": sha256("")}
    key_id = signing.signing_key()[0]
    agent = Agent.objects.get(slug=djangoenv.AGENT)
    prev_hash, seq = sealed.hash, sealed.seq
    batch = 5_000
    while seq < n:
        runs, receipts = [], []
        for _ in range(min(batch, n - seq)):
            run = Run(id=uuid.uuid4(), agent=agent, agent_version_id=real.agent_version_id, caller=operator,
                      input=PROMPT, status="succeeded", snapshot={}, state={}, tainted=real.tainted,
                      stop_reason=real.stop_reason, error=real.error, policy_snapshot_sha256=real.policy_snapshot_sha256)
            body = canonical(template | {"run_id": str(run.id)})
            seq += 1
            hash_ = chain_hash(prev_hash, body)
            signature = signing.sign(receipt_message(seq=seq, prev_hash=prev_hash, hash=hash_, key_id=key_id,
                                                     run_id=str(run.id)))
            receipt = Receipt(run=run, seq=seq, prev_hash=prev_hash, hash=hash_, body=body, key_id=key_id,
                              signature=signature)
            prev_hash = receipt.hash
            runs.append(run)
            receipts.append(receipt)
        with transaction.atomic():
            Run.objects.bulk_create(runs)
            Receipt.objects.bulk_create(receipts)


def run(*, workdir: Path, n: int, reps: int) -> list[dict]:
    djangoenv.setup(workdir / "receipts")
    djangoenv.prepare()
    from runs.models import Receipt
    from runs.receipts import receipt_verify_chain

    started = time.perf_counter()
    _build_chain(n)
    build_s = time.perf_counter() - started
    count = Receipt.objects.count()
    chain = [(prev + body).encode("utf-8") for prev, body in Receipt.objects.order_by("seq").values_list("prev_hash", "body")]
    size = sum(len(b) for b in chain)

    def warrant() -> float:
        started = time.perf_counter()
        result = receipt_verify_chain()
        elapsed = time.perf_counter() - started
        assert result.valid and result.checked == count, result
        return count / elapsed

    def floor() -> float:
        started = time.perf_counter()
        for data in chain:
            hashlib.sha256(data).hexdigest()
        return count / (time.perf_counter() - started)

    records = [record("receipts", "chain build", 0, "build_s", build_s, "s", receipts=count, bytes=size),
               record("receipts", "warrant, first in the process", 0, "receipts_per_s", warrant(), "receipts/s",
                      receipts=count, bytes=size)]
    for rep, order in rotations(["warrant", "floor"], reps):
        for variant in order:
            value = warrant() if variant == "warrant" else floor()
            records.append(record("receipts", variant, rep, "receipts_per_s", value, "receipts/s", receipts=count,
                                  bytes=size))
    return records
