"""GET schema/ serves the schema of the code the process runs: the same document for every
signed-in user, built once per process rather than on each request (it takes about a second of
CPU to build, which any signed-in user could otherwise make a worker spend at will)."""

from drf_spectacular.generators import SchemaGenerator

SCHEMA = "/api/v1/schema/?format=json"


def test_every_user_is_served_the_schema_the_code_declares(operator, approver, admin, outsider):
    # What `manage.py spectacular` writes: built without a request, so without anyone's roles.
    declared = SchemaGenerator().get_schema(request=None, public=True)
    for client in (operator, approver, admin, outsider):
        answer = client.get(SCHEMA)
        assert answer.status_code == 200
        assert answer.json() == declared


def test_the_schema_is_built_once_and_served_again(operator, compliance):
    first, again = operator.get(SCHEMA), compliance.get(SCHEMA)
    assert first.status_code == again.status_code == 200
    assert again.data is first.data


def test_signing_in_is_still_needed(client, demo):
    assert client.get(SCHEMA).status_code in (401, 403)
