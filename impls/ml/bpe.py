"""Byte-level byte-pair encoding (Sennrich et al. 2016; byte-level as GPT-2, Radford et al. 2019, §2.2):
train merges on a text, encode new text with them, decode back.

The base vocabulary is the 256 byte values, so any string encodes (its UTF-8 bytes) and nothing is ever an
unknown token. Training repeats ``num_merges`` times: count every adjacent pair of the current sequence
(overlapping occurrences too: "aaa" holds the pair (a, a) twice), take the most frequent pair (ties: the pair
that occurs first in the sequence, which is what ``max`` over a dict filled in order of occurrence gives,
as in Karpathy's minbpe), replace its occurrences left to right by a new token 256 + k, and record the
merge. Replacing left to right never overlaps: "aaa" becomes [aa, a], one new token, not two. Training
stops early when fewer than two tokens remain. Each merge adds exactly one id, so the vocabulary is
256 + the number of merges ids (GPT-2: 256 + 50,000 merges + 1 special token = 50,257); two merges can
spell the same bytes (aa·b and a·ab), so the number of distinct strings can be smaller.

Encoding applies the learned merges by rank, never by the frequency of pairs in the new text: while some
adjacent pair has a rank, merge the lowest-ranked such pair everywhere. That is the same as replaying the
merges in the order they were learned, because a merge only creates pairs that contain its new token, and
those rank later. Greedy longest-match against the vocabulary (WordPiece's rule) is a different tokenizer:
with merges [(b, c), (a, b)] it splits "abc" as [ab, c], BPE as [a, bc].

Decoding concatenates the tokens' bytes and only then decodes UTF-8: a token may hold part of a character
(the first two of the three bytes of 中), so decoding token by token fails.
"""

from __future__ import annotations

from collections import Counter


def pair_counts(ids: list[int]) -> Counter:
    """Every adjacent pair with its number of occurrences, in order of first occurrence."""
    return Counter(zip(ids, ids[1:]))


def merge_pair(ids: list[int], pair: tuple[int, int], new: int) -> list[int]:
    """Replace the occurrences of ``pair`` in ``ids``, scanning left to right without overlaps."""
    out, i = [], 0
    while i < len(ids):
        if i + 1 < len(ids) and ids[i] == pair[0] and ids[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(ids[i])
            i += 1
    return out


class BPETokenizer:
    """Byte-level BPE: ``train(text, num_merges)`` learns the merges (new ids 256, 257, ...), ``encode(text)``
    gives ids, ``decode(ids)`` gives the text back."""

    def __init__(self):
        self.merges: list[tuple[int, int]] = []
        self.vocab: dict[int, bytes] = {i: bytes([i]) for i in range(256)}

    def train(self, text: str, num_merges: int) -> list[tuple[int, int]]:
        """Learn up to ``num_merges`` merges on ``text``; returns them in order: merge k made token 256 + k."""
        ids = list(text.encode("utf-8"))
        self.merges = []
        self.vocab = {i: bytes([i]) for i in range(256)}
        for _ in range(num_merges):
            counts = pair_counts(ids)
            if not counts:
                break
            pair = max(counts, key=counts.__getitem__)        # the first of the most frequent, in order of occurrence
            new = 256 + len(self.merges)
            ids = merge_pair(ids, pair, new)
            self.merges.append(pair)
            self.vocab[new] = self.vocab[pair[0]] + self.vocab[pair[1]]
        return list(self.merges)

    def encode(self, text: str) -> list[int]:
        """Ids of ``text``: its UTF-8 bytes, then the lowest-ranked learned pair merged, until none is left."""
        rank = {pair: k for k, pair in enumerate(self.merges)}
        ids = list(text.encode("utf-8"))
        while len(ids) >= 2:
            pair = min(zip(ids, ids[1:]), key=lambda p: rank.get(p, len(rank)))
            if pair not in rank:
                break
            ids = merge_pair(ids, pair, 256 + rank[pair])
        return ids

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``: all their bytes joined, then decoded as UTF-8 (invalid bytes become U+FFFD)."""
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")
