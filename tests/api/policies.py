"""What the policy API tests share: a valid intent guard to post, a demo policy's id, the dry run."""

from governance.models import Policy

GUARD = {
    "name": "no-drops", "type": "intent_guard", "priority": 20,
    "keywords": ["drop", "truncate"], "response": "I can't change the schema.",
}


def policy_id(name: str) -> int:
    return Policy.objects.get(name=name).pk


def evaluate(client, **body):
    return client.post("/api/v1/policies/evaluate/", body, format="json")
