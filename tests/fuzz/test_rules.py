"""The fuzz's drop rules (tests/fuzz/rules.py): which 400s of schema-valid data are not failures."""

from tests.fuzz.rules import only_business_rules


def test_it_drops_a_refusal_that_names_a_missing_object():
    assert only_business_rules({"role": ["no role named 'x'"], "agent": ["unknown agent 'y'"]})


def test_it_drops_asking_for_and_confirming_an_emergency_at_once():
    assert only_business_rules({"confirm_emergency": ["confirm the reason asked for, or ask with a reason; not both"]})
    assert only_business_rules({"confirm_emergency": [
        "one governance admin asks (emergency_reason) and another confirms: not both at once"]})


def test_it_reads_a_name_quoted_either_way():
    assert only_business_rules({"service_account": ["'ops-bot' is not a service account"]})
    assert only_business_rules({"service_account": ['"o\'brien" is not a service account']})


def test_it_keeps_a_refusal_the_schema_could_state():
    assert not only_business_rules({"role": ["Ensure this field has no more than 64 characters."]})


def test_it_keeps_a_refusal_when_one_of_its_messages_is_not_a_rule():
    assert not only_business_rules({"role": ["no role named 'x'", "Unknown field."]})


def test_it_reads_a_list_fields_refusals_by_item_index():
    assert only_business_rules({"tools": {"0": ["Unknown tool: x"], "2": ["Unknown tool: y"]}})
    assert not only_business_rules({"tools": {"0": ["Unknown tool: x"], "1": ["Not a valid string."]}})


def test_it_takes_the_evidence_bundle_rule_under_any_field():
    assert only_business_rules({"status": ["A bundle holds every receipt of its period: drop the other filters."]})


def test_it_keeps_an_empty_or_shapeless_refusal():
    assert not only_business_rules({})
    assert not only_business_rules(["no role named 'x'"])
    assert not only_business_rules({"role": []})


def test_a_review_record_is_fitted_to_its_kind_keeping_what_fits():
    from tests.fuzz.rules import fit_review_record

    assert fit_review_record({"record_kind": "finding", "note": "x"}) == {"record_kind": "finding", "note": "x",
                                                                          "severity": "low"}
    assert fit_review_record({"record_kind": "sign_off", "severity": "high", "follows": "id", "resolves": True}) == {
        "record_kind": "sign_off"}
    fitted = fit_review_record({"record_kind": "follow_up", "severity": "low", "note": " ", "follows": "id",
                                "resolves": True})
    assert fitted == {"record_kind": "follow_up", "note": "Seen by the fuzz. ", "resolves": True}
