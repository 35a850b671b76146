import pytest

from agents.tools.envelopes import ToolContext, ToolError
from agents.tools.knowledge import PASSAGES, search, search_knowledge

CTX = ToolContext(run_id="run-test", caller="tester")


def test_passages_have_unique_ids_titles_and_text():
    ids = [passage["id"] for passage in PASSAGES]
    assert len(ids) == len(set(ids))
    assert 6 <= len(PASSAGES) <= 10
    for passage in PASSAGES:
        assert passage["id"].startswith("kb-")
        assert passage["title"] and passage["text"]


def test_it_finds_the_renewal_passages_for_a_question_about_renewals():
    result = search_knowledge({"query": "What does our knowledge base say about renewals?"}, CTX)
    ids = [passage["id"] for passage in result["passages"]]
    assert ids[:2] == ["kb-renewals-1", "kb-renewals-2"]
    assert result["query"] == "What does our knowledge base say about renewals?"


def test_it_returns_at_most_three_cited_passages():
    passages = search("renewal health score churn P1 email discount")
    assert len(passages) == 3
    for passage in passages:
        assert set(passage) == {"id", "title", "text"}


@pytest.mark.parametrize(
    ("query", "first"),
    [
        ("SLA for P1 incidents", "kb-sla-1"),
        ("churn signals", "kb-churn-1"),
        ("churn-risk playbook", "kb-churn-2"),
        ("email etiquette", "kb-email-1"),
        ("data retention", "kb-retention-1"),
        ("discounts", "kb-discounts-1"),
        ("how is the health score calculated", "kb-health-1"),
    ],
)
def test_the_best_passage_comes_first(query, first):
    assert search(query)[0]["id"] == first


def test_it_matches_whole_words_only():
    # Both are prefixes of words in the knowledge base ("retention", "tickets"), not words.
    assert search("retent") == []
    assert search("tick") == []


def test_ties_are_broken_by_id_so_results_are_stable():
    # Both renewal passages score the same for "renewal"; the lower id goes first.
    ids = [passage["id"] for passage in search("renewal")]
    assert ids == ["kb-renewals-1", "kb-renewals-2", "kb-discounts-1"]


def test_it_returns_no_passages_when_nothing_matches():
    assert search_knowledge({"query": "salary of Dana Whitfield"}, CTX)["passages"] == []


def test_it_refuses_an_empty_query():
    with pytest.raises(ToolError):
        search_knowledge({"query": "  "}, CTX)
