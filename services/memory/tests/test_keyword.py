"""BM25 keyword search: Snowball stemming and stopwords, Chinese by character n-grams, removal."""

from __future__ import annotations

import random

import pytest
from memory.keyword import BM25Index, tokenize


def test_tokenizer_handles_english_and_chinese():
    assert tokenize("The cats were researching painting") == ["cat", "research", "paint"]
    unigrams = ["下", "个", "月", "交", "房", "租"]
    bigrams = ["下个", "个月", "月交", "交房", "房租"]
    assert tokenize("下个月交房租") == [*unigrams, *bigrams]
    assert "ana" in tokenize("Ana's cat: 小猫 Miso") and "小猫" in tokenize("Ana's cat: 小猫 Miso")


def test_bm25_ranks_the_matching_document_first_with_scores_in_range():
    index = BM25Index()
    index.add(1, "Planted tomatoes and basil on the balcony")
    index.add(2, "记得下个月交房租")
    index.add(3, "Bought train tickets to Lisbon")
    index.add(4, "周末去西湖划船")
    top = index.search("when is the rent (房租) due", limit=3)
    assert top[0][0] == 2
    assert index.search("西湖", limit=1)[0][0] == 4
    assert index.search("tomato", limit=1)[0][0] == 1
    assert all(0.0 < score <= 1.0 for _, score in top)
    assert index.search("what is it", limit=3) == [], "stopwords alone match nothing"


def test_bm25_remove_and_filter():
    index = BM25Index()
    index.add(1, "jazz concert on friday")
    index.add(2, "jazz records to buy")
    index.remove_many([1])
    assert [d for d, _ in index.search("jazz concert", limit=5)] == [2]
    assert index.search("jazz", limit=5, allowed={1}) == []
    assert len(index) == 1


@pytest.mark.parametrize(
    ("note", "query"),
    [
        ("Team meetings every Monday", "meeting"),
        ("We met at the meeting", "meetings"),
        ("We decided to sell the car", "decide"),
        ("Decide on the venue by Friday", "decided"),
        ("She studies marine biology", "study"),
        ("Went hiking in the Alps", "hikes"),
        ("The adoption agency called back", "adopt"),
        ("Caroline painted a sunrise", "paintings"),
    ],
)
def test_word_forms_find_each_other(note, query):
    index = BM25Index()
    index.add(1, note)
    index.add(2, "Bought train tickets to Lisbon")
    assert [d for d, _ in index.search(query, limit=5)] == [1]


def test_stems_keep_apart_what_differs():
    assert tokenize("news") != tokenize("new")
    assert tokenize("meeting decided") == tokenize("meetings decide")


def test_removal_leaves_the_index_as_if_the_documents_were_never_added():
    rng = random.Random(7)
    words = [f"w{n}" for n in range(300)]
    docs = {i: " ".join(rng.choices(words, k=rng.randint(3, 40))) for i in range(200)}
    docs[200] = "a lone xylophone"
    index = BM25Index()
    for doc_id, text in docs.items():
        index.add(doc_id, text)
    index.add(5, "replaced text about xylophone practice")  # add again = replace
    gone = set(rng.sample(sorted(docs), 80)) | {200}
    index.remove_many(gone)
    index.remove(min(gone))  # removing twice is harmless
    index.remove(9999)
    fresh = BM25Index()
    for doc_id, text in docs.items():
        if doc_id == 5:
            text = "replaced text about xylophone practice"
        if doc_id not in gone:
            fresh.add(doc_id, text)
    assert len(index) == len(fresh)
    for query in ["w1 w2 w3", "w150", "w299 w0", "xylophone", "practice w7"]:
        expected = dict(fresh.search(query, limit=300))
        assert dict(index.search(query, limit=300)) == pytest.approx(expected), query
    left = {d for d, _ in index.search("xylophone", limit=10)}
    assert left <= {5}, "a removed document is never found"
