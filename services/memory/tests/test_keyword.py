"""BM25 keyword search: English stemming and stopwords, Chinese by character n-grams."""

from __future__ import annotations

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
