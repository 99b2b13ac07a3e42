"""Verifiers for qa/coding/bpe-tokenizer.yaml (catalog code.bpe-tokenizer).

Oracles: training from the definition with tokens as merge trees, and encoding by replaying every merge in
order (verifiers/katas/bpe.py); the reference encodes the other way, lowest-ranked pair first.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from impls.ml.bpe import BPETokenizer, pair_counts
from verifiers.katas import bpe as kata


def _trained(text: str, n: int) -> BPETokenizer:
    tok = BPETokenizer()
    tok.train(text, n)
    return tok


@pytest.mark.claim("coding.bpe.merge-rank-order")
def test_encoding_follows_merge_rank(evidence):
    kata.prop_encode_replays_the_merges_in_order(BPETokenizer)
    kata.prop_rank_not_frequency(BPETokenizer)
    kata.prop_training_matches_the_definition(BPETokenizer)
    tok = _trained("bcxbcybczabwab", 2)
    text = "abcabcab"
    ids = tok.encode(text)
    pieces = [tok.vocab[i].decode() for i in ids]
    # the alternatives: most frequent known pair of the new text first, and longest match in the vocabulary
    freq = {("a", "b"): 3, ("b", "c"): 2}
    assert pieces == ["a", "bc", "a", "bc", "ab"] and max(freq, key=freq.get) == ("a", "b")
    longest, i = [], 0
    vocab = {tok.vocab[k]: k for k in sorted(tok.vocab)}
    data = text.encode()
    while i < len(data):
        n = max(n for n in range(1, len(data) - i + 1) if data[i:i + n] in vocab)
        longest.append(data[i:i + n].decode())
        i += n
    assert longest == ["ab", "c", "ab", "c", "ab"]
    evidence["merges learned on 'bcxbcybczabwab'"] = ["b+c", "a+b"]
    evidence["'abcabcab' encoded"] = {"by merge rank": pieces, "longest match": longest,
                                       "pair counts in the new text": {"ab": 3, "bc": 2}}


@pytest.mark.claim("coding.bpe.vocab-size")
def test_one_id_per_merge(evidence):
    kata.prop_one_new_id_per_merge(BPETokenizer)

    @given(st.text(alphabet="ab c", min_size=0, max_size=30), st.integers(0, 40))
    def check(text, n):
        tok = BPETokenizer()
        merges = tok.train(text, n)
        ids = sorted(tok.vocab)
        assert ids == list(range(256 + len(merges)))                  # 256 bytes, then one id per merge
        assert len(merges) == len(kata.train_trees(text, n)) <= min(n, max(len(text.encode()) - 1, 0))

    check()
    early = BPETokenizer().train("abab", 10)                         # "abab" -> [ab, ab] -> [abab]: two merges
    assert len(early) == 2
    evidence["train('abab', 10)"] = {"merges learned": len(early), "ids": 256 + len(early)}


@pytest.mark.claim("coding.bpe.no-unknown-token")
def test_any_string_round_trips(evidence):
    kata.prop_round_trip_any_text(BPETokenizer)
    kata.prop_decode_joins_bytes_first(BPETokenizer)
    tok = _trained(kata.CORPUS, 100)
    text = "naïve café, 大模型, emoji 🤖, control \x00\x1f, combining é"
    ids = tok.encode(text)
    assert tok.decode(ids) == text and max(ids) < 356
    unseen = [c for c in "🤖\x00" if c not in kata.CORPUS]
    assert unseen and all(i < 256 for i in tok.encode("🤖"))
    evidence["unseen characters encode to their bytes"] = {"🤖": tok.encode("🤖"), "\\x00": tok.encode("\x00")}


@pytest.mark.claim("coding.bpe.overlapping-pair")
def test_aaa_merges_into_one_aa(evidence):
    kata.prop_overlapping_pair_merges_once(BPETokenizer)
    tok = BPETokenizer()
    merges = tok.train("aaa", 1)
    counts = pair_counts(list(b"aaa"))
    assert counts[(97, 97)] == 2 and merges == [(97, 97)]
    assert [tok.vocab[i] for i in tok.encode("aaa")] == [b"aa", b"a"]
    evidence["counterexample"] = {"pair (a, a) counted in 'aaa'": counts[(97, 97)],
                                  "'aaa' after merging it": ["aa", "a"]}
