"""Kata properties for ``beam_search_table(table, beam_width, eos_id, length_penalty) -> hypotheses``.

The model is a position-dependent bigram table ``table[t, prev, next]`` [T, V, V] of log-probabilities
(the previous token at t = 0 is token 0, the BOS; an entry may be -inf, an impossible token); at most T
tokens are generated. The result is a list of up to ``beam_width`` distinct hypotheses, best first, each
with ``tokens`` (tuple of ints, EOS included when it ended the sequence), ``logprob`` (sum of the token
log-probabilities: keep sums of logs, a product of probabilities leaves float64's range after about a
thousand tokens) and ``score`` (``logprob / len(tokens) ** length_penalty``; length_penalty 0 = raw log-probability).
A hypothesis may be an object with those attributes (a dataclass), a dict with those keys, or a tuple
``(tokens, logprob, score)``.

Conventions (Hugging Face ``num_beams`` with ``early_stopping=True``): the search starts from one empty
prefix (k copies of it would fill the first beam with copies of one hypothesis); each step ranks all
extensions of the active prefixes by summed log-probability (ties: earlier beam, then lower token id); of the top
2·beam_width, an extension ending in EOS is finished if it ranks within the first beam_width, otherwise
dropped; the others fill the next beam up to beam_width. Search stops when beam_width hypotheses are
finished, when nothing is active, or after T steps (active prefixes then finish without EOS).

Oracles: exhaustive enumeration of every sequence (itertools.product) for "a beam as wide as the whole
tree is exact", a plain greedy loop for width 1, and hand-built tables whose answers are known.
"""

from __future__ import annotations

import itertools
import math

import torch
from hypothesis import given
from hypothesis import strategies as st


def fields(h) -> tuple[tuple[int, ...], float, float]:
    """(tokens, logprob, score) of a hypothesis given as an object, a dict or a tuple."""
    if isinstance(h, (tuple, list)):
        assert len(h) >= 3, f"a hypothesis tuple must be (tokens, logprob, score), got {h!r}"
        toks, lp, sc = h[0], h[1], h[2]
    elif isinstance(h, dict):
        toks, lp, sc = h.get("tokens"), h.get("logprob"), h.get("score")
    else:
        toks, lp, sc = getattr(h, "tokens"), getattr(h, "logprob"), getattr(h, "score")
    assert isinstance(toks, (tuple, list)) and all(type(t) is int for t in toks), \
        f"a hypothesis' tokens must be a tuple of ints, got {toks!r}"
    assert isinstance(lp, (int, float)) and isinstance(sc, (int, float)), \
        f"a hypothesis' logprob and score must be numbers, got {lp!r}, {sc!r}"
    return tuple(toks), float(lp), float(sc)


def results(impl, table, width, eos, alpha, where: str = "") -> list[tuple[tuple[int, ...], float, float]]:
    got = impl(table, width, eos, alpha)
    assert isinstance(got, (list, tuple)), f"{where}expected a list of hypotheses, got {type(got).__name__}"
    return [fields(h) for h in got]


def _log_softmax_rows(raw: torch.Tensor) -> torch.Tensor:
    return torch.log_softmax(raw.to(torch.float64), dim=-1)


@st.composite
def tables(draw, t_max: int = 3, v_max: int = 4):
    t = draw(st.integers(1, t_max))
    v = draw(st.integers(2, v_max))
    vals = draw(st.lists(st.integers(-6, 6), min_size=t * v * v, max_size=t * v * v))
    raw = torch.tensor(vals, dtype=torch.float64).reshape(t, v, v) / 2
    return _log_softmax_rows(raw)


def sequences(table: torch.Tensor, eos_id: int | None):
    """Every sequence the table can generate: stopped at EOS or at T tokens, with its log-probability."""
    t_max, v = table.shape[0], table.shape[1]
    seen = set()
    for n in range(1, t_max + 1):
        for toks in itertools.product(range(v), repeat=n):
            if eos_id is not None and eos_id in toks[:-1]:
                continue
            if n < t_max and toks[-1] != eos_id:
                continue
            if toks in seen:
                continue
            seen.add(toks)
            prev, lp = 0, 0.0
            for i, tok in enumerate(toks):
                lp += float(table[i, prev, tok])
                prev = tok
            yield toks, lp


def _best_exhaustive(table, eos_id, length_penalty):
    return max(((lp / len(t) ** length_penalty, t) for t, lp in sequences(table, eos_id)), key=lambda x: x[0])


def _greedy(table, eos_id):
    prev, toks, lp = 0, [], 0.0
    for i in range(table.shape[0]):
        row = table[i, prev].tolist()
        tok = max(range(len(row)), key=lambda j: (row[j], -j))
        toks.append(tok)
        lp += row[tok]
        prev = tok
        if tok == eos_id:
            break
    return tuple(toks), lp


def prop_width_one_is_greedy(impl) -> None:
    """beam_width = 1 returns exactly the greedy sequence and its log-probability: on ``length_bias_table``
    (EOS ranks second at step 1 and must be dropped, not finished) and ``finished_table`` (greedy's first
    token is EOS), then on random tables."""

    def one(table, eos, where):
        got = results(impl, table, 1, eos, 0.0)
        toks, lp = _greedy(table, eos)
        assert len(got) == 1 and got[0][0] == toks and abs(got[0][1] - lp) <= 1e-9, \
            f"{where}, eos={eos}: greedy gives {toks} ({lp}), beam 1 gave {got}"

    one(length_bias_table(), 0, "length_bias_table")
    one(finished_table(), 0, "finished_table")

    @given(tables(), st.one_of(st.none(), st.integers(0, 1)))
    def check(table, eos):
        one(table, eos, f"table={table.tolist()}")

    check()


def prop_wide_beam_is_exhaustive(impl) -> None:
    """A beam wider than the number of prefixes never prunes: its best is the exhaustive optimum."""

    @given(tables(), st.one_of(st.none(), st.integers(0, 1)), st.sampled_from([0.0, 1.0]))
    def check(table, eos, alpha):
        width = table.shape[1] ** table.shape[0]
        got = results(impl, table, width, eos, alpha)
        best, toks = _best_exhaustive(table, eos, alpha)
        assert got and abs(got[0][2] - best) <= 1e-9, \
            f"table={table.tolist()}, eos={eos}, length_penalty={alpha}: optimum {toks} ({best}), got {got[:1]}"

    check()


def prop_scores_and_order(impl) -> None:
    """Each hypothesis' logprob is its tokens' sum in the table, score = logprob / len**alpha, best first,
    and EOS appears only as the last token."""

    @given(tables(), st.integers(1, 3), st.integers(0, 1), st.sampled_from([0.0, 0.5, 1.0]))
    def check(table, width, eos, alpha):
        got = results(impl, table, width, eos, alpha)
        assert 1 <= len(got) <= width, f"width {width}: got {len(got)} hypotheses"
        for toks, logprob, score in got:
            prev, lp = 0, 0.0
            for i, tok in enumerate(toks):
                lp += float(table[i, prev, tok])
                prev = tok
            assert abs(logprob - lp) <= 1e-9, f"{toks}: logprob {logprob}, table says {lp}"
            assert abs(score - lp / len(toks) ** alpha) <= 1e-9, f"{toks}: score {score}, alpha={alpha}"
            assert eos not in toks[:-1], f"{toks} continues after EOS {eos}"
        scores = [h[2] for h in got]
        assert scores == sorted(scores, reverse=True), f"not best first: {scores}"

    check()


def greedy_beats_beam_table(spread: int = 10) -> torch.Tensor:
    """Three steps over V = spread + 4 tokens (0 = BOS/EOS, 1 = a, 2 = b, 3 = x, 4.. = spread tokens).

    Step 1: a 0.55, b 0.45. After a: x 0.4 (and 0.6 spread thin); after b: two spread tokens 0.5 each.
    Greedy keeps a→x (0.22); a width-2 beam prefers b→y1, b→y2 (0.225 each) and drops a→x.
    Step 3: after x, EOS with probability 1 (greedy ends at 0.22); after y1, y2 every token 1/V (beam ends
    at 0.225/V). So greedy's sequence is about V times more probable than the width-2 beam's."""
    v = spread + 4
    p = torch.full((3, v, v), 1.0 / v, dtype=torch.float64)
    p[0, 0] = 0.0
    p[0, 0, 1], p[0, 0, 2] = 0.55, 0.45
    p[1, 1] = 0.6 / (v - 1)
    p[1, 1, 3] = 0.4
    p[1, 2] = 0.0
    p[1, 2, 4], p[1, 2, 5] = 0.5, 0.5
    p[2, 3] = 0.0
    p[2, 3, 0] = 1.0
    return p.log()


def prop_wider_beam_can_be_worse(impl) -> None:
    """On ``greedy_beats_beam_table`` greedy (width 1) returns a→x→EOS and width 2 a lower-probability
    sequence: beam search is not monotone in its width."""
    table = greedy_beats_beam_table()
    one, two = results(impl, table, 1, 0, 0.0)[0], results(impl, table, 2, 0, 0.0)[0]
    assert one[0] == (1, 3, 0) and abs(one[1] - math.log(0.22)) <= 1e-9, f"width 1 gave {one}"
    assert two[1] < one[1] - 1.0, f"width 2 should miss a→x (log 0.22), got {two}"


def length_bias_table() -> torch.Tensor:
    """Five steps over V = 3 tokens (0 = BOS/EOS, 1 = a, 2 = filler; rows not set are uniform).

    EOS at once with probability 0.4, or a (0.6) followed by a, a, a at 0.9 each (EOS impossible there) and
    EOS at 0.9: the long sentence has log-probability log 0.6 + 4 log 0.9 = -0.932, just below log 0.4 =
    -0.916, but a far better per-token average (-0.186)."""
    v, t = 3, 5
    p = torch.full((t, v, v), 1.0 / v, dtype=torch.float64)
    p[0, 0] = torch.tensor([0.4, 0.6, 0.0])
    for i in range(1, 4):
        p[i, 1] = torch.tensor([0.0, 0.9, 0.1])
    p[4, 1] = torch.tensor([0.9, 0.05, 0.05])
    return p.log()


def prop_length_penalty_changes_the_winner(impl) -> None:
    """Without normalisation the 1-token EOS wins; with length_penalty 1 the 5-token sentence wins."""
    table = length_bias_table()
    raw, norm = results(impl, table, 2, 0, 0.0)[0], results(impl, table, 2, 0, 1.0)[0]
    assert raw[0] == (0,), f"length_penalty 0: expected the immediate EOS, got {raw}"
    assert norm[0] == (1, 1, 1, 1, 0), f"length_penalty 1: expected a a a a EOS, got {norm}"


def prop_hypotheses_are_distinct(impl) -> None:
    """No two returned hypotheses have the same tokens: the search starts from one live empty prefix (k copies
    of it each extended by the same best token would fill the beam with one hypothesis k times)."""

    @given(tables(), st.integers(2, 4), st.one_of(st.none(), st.integers(0, 1)))
    def check(table, width, eos):
        got = results(impl, table, width, eos, 0.0)
        toks = [h[0] for h in got]
        assert len(set(toks)) == len(toks), f"table={table.tolist()}, width={width}, eos={eos}: duplicates in {toks}"

    check()


def finished_table() -> torch.Tensor:
    """Three steps over V = 4 (0 = EOS, 1 = a, 2 = b, 3 = c; rows not set uniform). Step 1: EOS 0.5, a 0.3,
    b 0.2; after a: c 0.9, EOS 0.1; after b: EOS 1.0. With width 2 the finished (EOS,) must free its slot,
    so that b survives step 1 and finishes as (b, EOS) with 0.2."""
    p = torch.full((3, 4, 4), 0.25, dtype=torch.float64)
    p[0, 0] = torch.tensor([0.5, 0.3, 0.2, 0.0], dtype=torch.float64)
    p[1, 1] = torch.tensor([0.1, 0.0, 0.0, 0.9], dtype=torch.float64)
    p[1, 2] = torch.tensor([1.0, 0.0, 0.0, 0.0], dtype=torch.float64)
    return p.log()


def prop_finished_hypotheses_leave_the_beam(impl) -> None:
    """A hypothesis that emits EOS moves to the finished list and frees its slot: on ``finished_table`` width 2
    returns (EOS,) then (b, EOS); keeping finished hypotheses in the beam (or extending them) loses (b, EOS)."""
    got = results(impl, finished_table(), 2, 0, 0.0)
    assert [h[0] for h in got] == [(0,), (2, 0)], \
        f"finished_table, width 2, eos 0: expected [(0,), (2, 0)] (probabilities 0.5 and 0.2), got {got}"


LANES = 1500  # from token 1458 on, a float64 product of 0.6s is stuck at the smallest subnormal, 2 ** -1074


def lanes_table(steps: int = LANES) -> torch.Tensor:
    """Two lanes over V = 3 (0 never emitted, 1 = lane a, 2 = lane b) for ``steps`` tokens. Step 0: a 0.55,
    b 0.45. Then each lane stays with 0.6 and switches with 0.4, so the beam of width 2 holds a^t and b^t.
    Last step: a stays with 0.3 and switches with 0.7; b stays with 0.9. So b^T (0.45 · 0.6^(T-2) · 0.9)
    beats a^(T-1) b (0.55 · 0.6^(T-2) · 0.7), which greedy returns. Every such probability is far below
    2^-1074 when T = 1500, so a search that multiplies probabilities sees every prefix at the smallest
    subnormal (a product of 0.6s stops changing there) or at 0: they all tie."""
    p = torch.zeros(steps, 3, 3, dtype=torch.float64)
    p[0, 0] = torch.tensor([0.0, 0.55, 0.45], dtype=torch.float64)
    p[1:, 0] = torch.tensor([0.0, 0.5, 0.5], dtype=torch.float64)
    p[1:-1, 1] = torch.tensor([0.0, 0.6, 0.4], dtype=torch.float64)
    p[1:-1, 2] = torch.tensor([0.0, 0.4, 0.6], dtype=torch.float64)
    p[-1, 1] = torch.tensor([0.0, 0.3, 0.7], dtype=torch.float64)
    p[-1, 2] = torch.tensor([0.0, 0.1, 0.9], dtype=torch.float64)
    return p.log()


def prop_long_sequences_keep_log_space(impl) -> None:
    """On ``lanes_table`` (1500 tokens, no EOS) width 2 returns b^1500 with log-probability log 0.45 +
    1498·log 0.6 + log 0.9 (about -766.1): scores are sums of logs. A product of probabilities leaves the
    normal range around token 1387 and bottoms out at 2^-1074: the lanes tie, lane b is dropped, and the
    log of what is left is about -744 (or log 0 = -inf)."""
    table = lanes_table()
    want = math.log(0.45) + (LANES - 2) * math.log(0.6) + math.log(0.9)
    got = results(impl, table, 2, None, 0.0)
    assert got, "lanes_table, width 2: no hypothesis returned"
    toks, lp, _ = got[0]
    assert toks == (2,) * LANES and abs(lp - want) <= 1e-9 * abs(want), (
        f"lanes_table (T={LANES}), width 2, no EOS: expected token 2 repeated {LANES} times with log-probability "
        f"{want:.6f}; got {len(toks)} tokens starting {toks[:5]}, ending {toks[-5:]}, log-probability {lp!r}")


ALL = [prop_width_one_is_greedy, prop_wide_beam_is_exhaustive, prop_scores_and_order,
       prop_wider_beam_can_be_worse, prop_length_penalty_changes_the_winner, prop_hypotheses_are_distinct,
       prop_finished_hypotheses_leave_the_beam, prop_long_sequences_keep_log_space]

ZH = {
    "doc": """`beam_search_table(table, beam_width, eos_id, length_penalty) -> hypotheses` 的性质。

模型是一张与位置相关的 bigram 表 `table[t, prev, next]` [T, V, V]，存的是对数概率（t = 0 时前一个 token 是 token 0，
即 BOS；某一项可以是 -inf，表示不可能出现的 token）；最多生成 T 个 token。结果是一个列表，最多 `beam_width` 个
互不相同的假设，最好的在前，每个假设带 `tokens`（int 的 tuple，以 EOS 结束时包含 EOS）、`logprob`（各 token
对数概率之和：要累加对数，概率连乘大约一千个 token 之后就超出 float64 的范围）和 `score`
（`logprob / len(tokens) ** length_penalty`；length_penalty 为 0 即原始对数概率）。假设可以是带这些属性的对象
（dataclass）、带这些键的 dict，或者 tuple `(tokens, logprob, score)`。

约定（Hugging Face 的 `num_beams` 加 `early_stopping=True`）：搜索从一个空前缀开始（放 k 份空前缀，第一轮 beam
就会被同一个假设的副本填满）；每一步把所有活跃前缀的全部扩展按对数概率之和排序（并列时先比 beam 靠前，再比
token id 小）；在前 2·beam_width 个扩展里，以 EOS 结尾的扩展若排在前 beam_width 名之内就算完成，否则丢弃；
其余扩展依次填入下一轮 beam，直到 beam_width 个。有 beam_width 个假设完成、没有活跃前缀、或走完 T 步时停止
（此时仍活跃的前缀不带 EOS 直接完成）。

对照答案：穷举每一条序列（itertools.product），用来检验“与整棵树一样宽的 beam 是精确的”；width 1 用朴素的
贪心循环对照；另有若干手工构造、答案已知的表。""",
    "prop_width_one_is_greedy": "beam_width = 1 恰好返回贪心序列及其对数概率：先在 `length_bias_table`（第 1 步 EOS 排第二，必须丢弃，而不是算作完成）和 `finished_table`（贪心的第一个 token 就是 EOS）上检查，再在随机表上检查。",
    "prop_wide_beam_is_exhaustive": "beam 比前缀总数还宽时永远不会剪枝：它的最优结果就是穷举的最优解。",
    "prop_scores_and_order": "每个假设的 logprob 等于它的 token 在表中对数概率之和，score = logprob / len**alpha，最好的在前，EOS 只能作为最后一个 token 出现。",
    "prop_wider_beam_can_be_worse": "在 `greedy_beats_beam_table` 上，贪心（width 1）返回 a→x→EOS，而 width 2 返回一个概率更低的序列：beam search 的结果并不随宽度单调变好。",
    "prop_length_penalty_changes_the_winner": "不做长度归一化时，只有 1 个 token 的 EOS 胜出；length_penalty 为 1 时，5 个 token 的句子胜出。",
    "prop_hypotheses_are_distinct": "返回的假设两两 token 不同：搜索从一个活跃的空前缀开始（放 k 份空前缀、每份都接上同一个最优 token，beam 里就会是同一个假设重复 k 次）。",
    "prop_finished_hypotheses_leave_the_beam": "输出 EOS 的假设移入完成列表并让出它在 beam 中的位置：在 `finished_table` 上 width 2 依次返回 (EOS,) 和 (b, EOS)；把完成的假设留在 beam 里（或继续扩展它们）会丢掉 (b, EOS)。",
    "prop_long_sequences_keep_log_space": "在 `lanes_table`（1500 个 token，无 EOS）上 width 2 返回 b^1500，对数概率为 log 0.45 + 1498·log 0.6 + log 0.9（约 -766.1）：score 是对数之和。概率连乘在第 1387 个 token 左右离开正规数范围，最后停在 2^-1074：两条路线打平，b 路线被丢掉，剩下那条的对数约为 -744（或者 log 0 = -inf）。",
    "beam_search_table": """在与位置相关的 bigram 模型上做 beam search：`table[t, prev, next]` [T, V, V] 存的是第 t 步、前一个 token 为
`prev`（第一个 token 之前为 `bos`）时下一个 token 的对数概率，最多生成 T = table.shape[0] 个新 token。返回完成的
假设，最好的在前（最多 `beam_width` 个），每个带 `tokens`、`logprob` 和 `score` = logprob / len(tokens) ** length_penalty。
（即在 `markov_lm(table)` 上调用 `beam_search`。）""",
}
