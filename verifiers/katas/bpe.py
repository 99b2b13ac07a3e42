"""Kata properties for ``class BPETokenizer`` with ``train(text, num_merges) -> merges``, ``encode(text) -> ids``
and ``decode(ids) -> text``: byte-level byte-pair encoding.

Conventions: the base vocabulary is the 256 byte values; a text is its UTF-8 bytes. ``train`` repeats
``num_merges`` times (fewer when fewer than two tokens are left): count every adjacent pair of the current
sequence, overlapping occurrences included ("aaa" holds (a, a) twice); take the most frequent pair, ties
going to the pair whose first occurrence comes first in the sequence; replace its occurrences scanning left
to right without overlap ("aaa" -> [aa, a]) by the new id 256 + k (k = 0, 1, ...). It returns the merges in
order as a list of pairs of ids [(a, b), ...] and keeps them for ``encode``. ``encode`` applies the learned
merges by rank (the order they were learned), never by how often a pair occurs in the new text; any
string encodes (no unknown token). ``decode`` joins the tokens' bytes, then decodes UTF-8 (a token can hold
part of a character), so ``decode(encode(t)) == t`` for every string t.

Oracles: training from the definition, with tokens as merge trees (a byte, or the pair of trees it was
merged from) instead of ids; encoding by replaying each learned merge in order over the whole sequence
(not by looking for the lowest-ranked pair, as most solutions do); round trips of arbitrary Unicode.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st



def spell(tree) -> bytes:
    return bytes([tree]) if isinstance(tree, int) else spell(tree[0]) + spell(tree[1])


def show(tree) -> str:
    return repr(spell(tree))


def _merge(seq: list, pair: tuple, new) -> list:
    out, i = [], 0
    while i < len(seq):
        if i + 1 < len(seq) and seq[i] == pair[0] and seq[i + 1] == pair[1]:
            out.append(new)
            i += 2
        else:
            out.append(seq[i])
            i += 1
    return out


def train_trees(text: str, num_merges: int) -> list[tuple]:
    """The merges of the definition, each as (left tree, right tree)."""
    seq: list = list(text.encode("utf-8"))
    merges = []
    for _ in range(num_merges):
        if len(seq) < 2:
            break
        counts: dict = {}
        for a, b in zip(seq, seq[1:]):
            counts[(a, b)] = counts.get((a, b), 0) + 1
        top = max(counts.values())
        pair = next(p for p, c in counts.items() if c == top)
        seq = _merge(seq, pair, pair)
        merges.append(pair)
    return merges


def trees_of(merges, where: str) -> dict:
    """id -> tree for the candidate's merges (ids 256 + k), checking that each merge uses earlier ids."""
    assert isinstance(merges, (list, tuple)), f"{where}: train must return a list of merges, got {type(merges).__name__}"
    tree: dict = {i: i for i in range(256)}
    for k, m in enumerate(merges):
        assert isinstance(m, (list, tuple)) and len(m) == 2 and all(type(i) is int for i in m), \
            f"{where}: merge {k} must be a pair of ids, got {m!r}"
        a, b = m
        assert a in tree and b in tree, f"{where}: merge {k} = {m!r} uses an id not defined before it (ids 0..{255 + k})"
        tree[256 + k] = (tree[a], tree[b])
    return tree


def encode_by_replay(text: str, merges: list[tuple]) -> list:
    seq: list = list(text.encode("utf-8"))
    for pair in merges:
        seq = _merge(seq, pair, pair)
    return seq


def _new(impl):
    return impl()


def _train(impl, text: str, n: int, where: str):
    tok = _new(impl)
    merges = tok.train(text, n)
    return tok, merges, trees_of(merges, where)


_small = st.text(alphabet=st.sampled_from(list("aaab bcc") + ["中", "é"]), max_size=40)
_any = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


def prop_training_matches_the_definition(impl) -> None:
    """On short texts over a few characters (repeats, ties, multi-byte characters), up to 12 merges: the same
    merges, in the same order, as the definition (overlapping counts, first-occurring pair on ties)."""

    @given(_small, st.integers(0, 12))
    def check(text, n):
        where = f"train({text!r}, {n})"
        _, merges, tree = _train(impl, text, n, where)
        want = train_trees(text, n)
        got = [tree[256 + k] for k in range(len(merges))]
        assert got == want, (f"{where}: expected merges {[show(m) for m in want]}, got {[show(m) for m in got]} "
                             f"(ids {list(merges)})")

    check()


def prop_one_new_id_per_merge(impl) -> None:
    """train(t, n) returns exactly n merges while two tokens are left, merge k makes id 256 + k, and encoding the
    training text uses no id above 255 + n: the vocabulary grows by one per merge."""

    @given(_small.filter(lambda t: len(t.encode()) >= 14), st.integers(1, 12))
    def check(text, n):
        where = f"train({text!r}, {n})"
        tok, merges, _ = _train(impl, text, n, where)
        assert len(merges) == len(train_trees(text, n)), \
            f"{where}: expected {len(train_trees(text, n))} merges, got {len(merges)}"
        ids = tok.encode(text)
        assert isinstance(ids, (list, tuple)) and all(type(i) is int and 0 <= i < 256 + len(merges) for i in ids), \
            f"{where}: encode({text!r}) must give ids in 0..{255 + len(merges)}, got {ids!r}"

    check()


def prop_encode_replays_the_merges_in_order(impl) -> None:
    """Encoding any new text (arbitrary Unicode) with the learned merges gives the tokens of replaying every
    merge in the order it was learned (merging by frequency in the new text, or longest match, differs)."""

    @given(_small, st.integers(1, 12), st.one_of(_small, _any))
    def check(text, n, new):
        where = f"train({text!r}, {n}), then encode({new!r})"
        tok, merges, tree = _train(impl, text, n, where)
        ids = tok.encode(new)
        assert isinstance(ids, (list, tuple)) and all(i in tree for i in ids), \
            f"{where}: expected a list of known ids, got {ids!r}"
        want = encode_by_replay(new, [tree[256 + k] for k in range(len(merges))])
        got = [tree[i] for i in ids]
        assert got == want, f"{where}: expected {[show(t) for t in want]}, got {[show(t) for t in got]} (ids {ids})"

    check()


def prop_rank_not_frequency(impl) -> None:
    """Trained on "bcxbcybczabwab" with 2 merges, the merges are (b, c) then (a, b); "abcabcab" then encodes
    as [a, bc, a, bc, ab]: (b, c) ranks first although (a, b) occurs three times in the new text; merging the
    most frequent pair of the new text gives [ab, c, ab, c, ab], and so does longest match."""
    tok, merges, tree = _train(impl, "bcxbcybczabwab", 2, 'train("bcxbcybczabwab", 2)')
    assert [spell(tree[256 + k]) for k in range(len(merges))] == [b"bc", b"ab"], \
        f'train("bcxbcybczabwab", 2): expected the merges (b, c), (a, b), got {[show(tree[256 + k]) for k in range(len(merges))]}'
    ids = tok.encode("abcabcab")
    assert isinstance(ids, (list, tuple)) and all(i in tree for i in ids), f"expected known ids, got {ids!r}"
    got = [spell(tree[i]) for i in ids]
    assert got == [b"a", b"bc", b"a", b"bc", b"ab"], f'encode("abcabcab"): expected a|bc|a|bc|ab, got {got}'


def prop_overlapping_pair_merges_once(impl) -> None:
    """"aaa" counts the pair (a, a) twice, but one merge turns it into [aa, a], one new token (and "aaaa" into
    [aa, aa]); "aaabcbc" picks (a, a) (2 overlapping occurrences, tied with (b, c) and first), where counting
    without overlaps would pick (b, c)."""
    tok, merges, tree = _train(impl, "aaa", 1, 'train("aaa", 1)')
    assert len(merges) == 1 and tree[256] == (97, 97), f'train("aaa", 1): expected [(97, 97)], got {merges!r}'
    for text, want in (("aaa", [b"aa", b"a"]), ("aaaa", [b"aa", b"aa"])):
        ids = tok.encode(text)
        got = [spell(tree[i]) for i in ids] if all(i in tree for i in ids) else ids
        assert got == want, f'after train("aaa", 1): encode({text!r}) expected {want}, got {got}'
    _, merges, tree = _train(impl, "aaabcbc", 1, 'train("aaabcbc", 1)')
    assert len(merges) == 1 and tree[256] == (97, 97), \
        f'train("aaabcbc", 1): (a, a) occurs twice when overlaps count, tied with (b, c) and first: expected ' \
        f'[(97, 97)], got {merges!r}'


def prop_round_trip_any_text(impl) -> None:
    """decode(encode(t)) == t for arbitrary Unicode t (emoji, CJK, combining marks, control characters), even
    characters absent from the training text: byte-level BPE has no unknown token."""

    @given(_small, st.integers(0, 12), _any)
    def check(text, n, new):
        where = f"train({text!r}, {n}), then decode(encode({new!r}))"
        tok, _, _ = _train(impl, text, n, where)
        back = tok.decode(tok.encode(new))
        assert back == new, f"{where}: got {back!r}"

    check()


def prop_decode_joins_bytes_first(impl) -> None:
    """Trained on "中中中中" with one merge, the new token is the first two of the three UTF-8 bytes of 中
    (e4 b8): decode must join the bytes before decoding UTF-8; decoding token by token raises or garbles."""
    tok, merges, tree = _train(impl, "中中中中", 1, 'train("中中中中", 1)')
    assert spell(tree[256]) == "中".encode()[:2], f'train("中中中中", 1): expected the merge (e4, b8), got {merges!r}'
    for text in ("中", "中文中", "a中b"):
        back = tok.decode(tok.encode(text))
        assert back == text, f'after train("中中中中", 1): decode(encode({text!r})) gave {back!r}'


CORPUS = (
    "Byte pair encoding starts from single bytes and keeps merging the most frequent neighbouring pair. "
    "A tokenizer trained on English text learns ' the', 'ing' and ' token' early; the same procedure on "
    "Chinese text first merges the bytes of common characters such as 的, 是 and 模型, because every "
    "Chinese character takes three bytes in UTF-8. 字节对编码从单个字节出发，不断合并出现次数最多的相邻字节对；"
    "训练得到的合并规则按顺序记录下来，编码新文本时按同样的顺序应用。 Decoding joins the bytes of the "
    "tokens and only then decodes them as UTF-8, so a token may end in the middle of a character. "
) * 3


def prop_realistic_corpus(impl) -> None:
    """A 2 KB English and Chinese corpus with 150 merges: the definition's merges, and a round trip of the corpus
    and of new text with the learned merges."""
    where = f"train(a {len(CORPUS.encode())}-byte corpus, 150)"
    tok, merges, tree = _train(impl, CORPUS, 150, where)
    want = train_trees(CORPUS, 150)
    got = [tree[256 + k] for k in range(len(merges))]
    if got != want:
        k = next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))
        raise AssertionError(f"{where}: merges differ from merge {k} on: expected "
                             f"{[show(m) for m in want[k:k + 3]]}, got {[show(m) for m in got[k:k + 3]]}")
    for text in (CORPUS, "Tokenizers trained on 中文 and English 😀 still round-trip."):
        ids = tok.encode(text)
        assert all(i in tree for i in ids) and [tree[i] for i in ids] == encode_by_replay(text, want), \
            f"{where}: encode({text[:40]!r}...) differs from replaying the merges"
        assert tok.decode(ids) == text, f"{where}: decode(encode({text[:40]!r}...)) differs from the text"


ALL = [prop_training_matches_the_definition, prop_one_new_id_per_merge, prop_encode_replays_the_merges_in_order,
       prop_rank_not_frequency, prop_overlapping_pair_merges_once, prop_round_trip_any_text,
       prop_decode_joins_bytes_first, prop_realistic_corpus]

ZH = {
    "doc": """`class BPETokenizer` 的性质，方法为 `train(text, num_merges) -> merges`、`encode(text) -> ids` 和
`decode(ids) -> text`：字节级 BPE（byte-pair encoding）。

约定：基础词表是 256 个字节值；一段文本就是它的 UTF-8 字节。`train` 重复 `num_merges` 次（剩下不到两个 token 时
提前结束）：统计当前序列中所有相邻对的出现次数，重叠的出现也算（"aaa" 含两次 (a, a)）；取出现最多的一对，
并列时取在序列中最先出现的那一对；从左到右、不重叠地把它的出现替换成新 id 256 + k（k = 0, 1, ...）（"aaa" -> [aa, a]）。
它按顺序返回这些合并规则，形式是 id 对的列表 [(a, b), ...]，并保存下来供 `encode` 使用。`encode` 按 rank
（学到的先后顺序）应用学到的合并规则，绝不按某一对在新文本中出现的次数；任何字符串都能编码（没有 unknown token）。
`decode` 先把各 token 的字节拼起来，再按 UTF-8 解码（一个 token 可能只含一个字符的一部分），所以对任意字符串 t
都有 `decode(encode(t)) == t`。

对照答案：按定义训练，token 用合并树（一个字节，或由它合并而来的两棵树组成的一对）表示，而不是 id；编码时
在整个序列上按顺序重放每一条学到的合并规则（而不是像大多数解法那样找 rank 最低的那一对）；以及任意 Unicode
文本的往返。""",
    "prop_training_matches_the_definition": "在由少数几个字符组成的短文本上（有重复、有并列、有多字节字符），最多 12 次合并：得到的合并规则及其顺序与定义完全一致（重叠的出现也计数，并列时取最先出现的一对）。",
    "prop_one_new_id_per_merge": "只要还剩两个 token，train(t, n) 就恰好返回 n 条合并规则，第 k 条生成 id 256 + k，编码训练文本用到的 id 都不超过 255 + n：每合并一次，词表恰好增加一个。",
    "prop_encode_replays_the_merges_in_order": "用学到的合并规则编码任意新文本（任意 Unicode），结果等于按学到的顺序重放每一条合并规则得到的 token（按新文本中的频率合并，或者最长匹配，结果都不同）。",
    "prop_rank_not_frequency": '在 "bcxbcybczabwab" 上做 2 次合并，规则依次是 (b, c) 和 (a, b)；随后 "abcabcab" 编码为 [a, bc, a, bc, ab]：尽管 (a, b) 在新文本中出现三次，(b, c) 的 rank 更靠前；按新文本中最频繁的一对合并会得到 [ab, c, ab, c, ab]，最长匹配也是如此。',
    "prop_overlapping_pair_merges_once": '"aaa" 中 (a, a) 计数为两次，但一次合并只把它变成 [aa, a]，一个新 token（"aaaa" 变成 [aa, aa]）；"aaabcbc" 选 (a, a)（重叠计数 2 次，与 (b, c) 并列且先出现），而不计重叠的计数会选 (b, c)。',
    "prop_round_trip_any_text": "对任意 Unicode 文本 t（emoji、中日韩文字、组合符号、控制字符），即使其中的字符没在训练文本中出现过，也有 decode(encode(t)) == t：字节级 BPE 没有 unknown token。",
    "prop_decode_joins_bytes_first": '在 "中中中中" 上做一次合并，新 token 是“中”的三个 UTF-8 字节中的前两个（e4 b8）：decode 必须先拼接字节再做 UTF-8 解码；逐个 token 解码会报错或出现乱码。',
    "prop_realistic_corpus": "一份 2 KB 的中英文语料，150 次合并：合并规则与定义一致，用学到的规则对语料和新文本做编码再解码，都能还原。",
    "BPETokenizer": """字节级 BPE：`train(text, num_merges)` 学习合并规则（新 id 为 256, 257, ...），`encode(text)` 给出 id，
`decode(ids)` 还原文本。""",
    "BPETokenizer.train": "在 `text` 上学习最多 `num_merges` 条合并规则；按顺序返回：第 k 条合并生成 token 256 + k。",
    "BPETokenizer.encode": "`text` 的 id：先取它的 UTF-8 字节，再反复合并 rank 最低的已学到的相邻对，直到没有可合并的为止。",
    "BPETokenizer.decode": "`ids` 对应的文本：把它们的字节全部拼接起来，再按 UTF-8 解码（非法字节变成 U+FFFD）。",
}
