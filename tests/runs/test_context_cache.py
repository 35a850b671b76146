"""The frozen policies of a snapshot are rebuilt once per snapshot digest, not once per step."""

import copy

from governance import engine
from runs import context

POLICY = engine.PolicySpec(id=1, name="no-drops", type="intent_guard", version=1, keywords=("drop",),
                           response="No.").to_dict()


def _snapshot(policies):
    specs = [engine.PolicySpec.from_dict(p) for p in policies]
    return {"policies": policies, "policy_snapshot_sha256": engine.snapshot_sha256(specs)}


def test_the_same_snapshot_gives_the_same_specs_and_another_gives_its_own():
    first = _snapshot([POLICY])
    assert context.policies(first) is context.policies(copy.deepcopy(first))
    other = _snapshot([POLICY | {"keywords": ["delete"]}])
    assert other["policy_snapshot_sha256"] != first["policy_snapshot_sha256"]
    assert [s.keywords for s in context.policies(other)] == [("delete",)]
