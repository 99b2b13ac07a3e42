"""Decoding: temperature, top-k and top-p as composable logit filters; greedy search; beam search.

Filters take logits ``[..., V]`` and return logits of the same shape with the removed tokens set to
−∞, batched over every leading dimension (the convention of Hugging Face's ``LogitsWarper`` chain and of
vLLM's sampler), so they compose: ``top_p_filter(top_k_filter(apply_temperature(z, 0.7), 50), 0.9)``.

* ``apply_temperature(z, T)``: z / T, before the softmax (T > 0; T = 0 is greedy, use ``greedy``). For T > 0 it
  never changes the order of the logits, so argmax and any top-k set are the same at every T.
* ``top_k_filter(z, k)``: keep every token whose logit is ≥ the k-th largest (tokens tied with the k-th are kept,
  as in HF's ``TopKLogitsWarper``, so more than k can survive a tie).
* ``top_p_filter(z, p)``: nucleus (Holtzman et al. 2020, §3.1, Eq. 2): sort the probabilities descending, keep token
  i iff the mass strictly before it is < p, i.e. the smallest prefix whose mass reaches p. The first token is
  always kept; p ≥ 1 keeps everything. Same set as HF's ``cumsum_ascending <= 1 - p`` removal in exact
  arithmetic. Sums run in fp64 so that a boundary at exactly p is decided exactly for dyadic probabilities.

``distribution(z, temperature, top_k, top_p)`` applies them in the order HF and vLLM use (temperature, then
top-k, then top-p) and returns the renormalised probabilities; ``sample`` draws from it. Temperature 0 is
greedy decoding (vLLM's convention): all the mass on the argmax, whatever the filters (the argmax survives
every one of them). A top-k at least the vocabulary size keeps every token.

Search over a left-to-right model ``next_logprobs(prefixes [n, t]) -> [n, V]`` (log-probabilities of the next
token after each prefix):

* ``greedy``: argmax at every step (first index on ties, as ``torch.argmax``), stop at ``eos_id``.
* ``beam_search``: keep the ``beam_width`` best active prefixes by summed log-probability; each step ranks all
  ``beam_width·V`` one-token extensions (ties by beam, then token index); an extension ending in ``eos_id`` is
  finished: it leaves the active set and enters the finished list with score
  ``logprob / len(tokens) ** length_penalty`` (HF's ``length_penalty``; 0 = raw log-probability; the EOS token
  counts in the length, prompt tokens do not). Like HF, the top ``2·beam_width`` extensions are considered so
  that finished ones do not starve the beam, and an EOS extension ranked below ``beam_width`` is dropped.
  Search stops when ``beam_width`` hypotheses are finished (HF ``early_stopping=True``), when no prefix is
  active, or after ``max_new_tokens``; still-active prefixes are then finished without EOS. Width 1 is greedy.

``markov_lm(table)`` turns a position-dependent bigram table ``logp[t, prev, next]`` into such a model: plain
data, so a judge can hand it to a candidate's code (``beam_search_table``, ``greedy_table``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import torch
from torch import Tensor

NEG_INF = float("-inf")


def apply_temperature(logits: Tensor, t: float) -> Tensor:
    """z / T; T must be > 0 (greedy is T → 0, which ``greedy`` implements)."""
    if not t > 0:
        raise ValueError(f"temperature must be > 0 (use greedy decoding for T = 0), got {t}")
    return logits / t


def top_k_filter(logits: Tensor, k: int) -> Tensor:
    """Keep the tokens whose logit is ≥ the k-th largest of their row; the rest become −∞."""
    if k < 1:
        raise ValueError(f"top_k needs k >= 1, got {k}")
    if k >= logits.shape[-1]:
        return logits
    kth = torch.topk(logits, k, dim=-1).values[..., -1:]
    return logits.masked_fill(logits < kth, NEG_INF)


def top_p_filter(logits: Tensor, p: float) -> Tensor:
    """Keep the smallest set of most probable tokens whose mass reaches p (always at least one)."""
    if not 0 < p <= 1:
        raise ValueError(f"top_p needs 0 < p <= 1, got {p}")
    if p >= 1:
        return logits
    probs = torch.softmax(logits.to(torch.float64), dim=-1)
    sorted_p, order = torch.sort(probs, dim=-1, descending=True, stable=True)
    before = torch.cumsum(sorted_p, dim=-1) - sorted_p          # mass strictly before each sorted token
    remove_sorted = before >= p
    remove = torch.zeros_like(remove_sorted).scatter(-1, order, remove_sorted)
    return logits.masked_fill(remove, NEG_INF)


def distribution(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                 top_p: float | None = None) -> Tensor:
    """softmax(top_p(top_k(z / T))) in fp32 at least: the distribution ``sample`` draws from.
    ``temperature=0``: greedy, probability 1 on the argmax (the first of tied maxima, as ``torch.argmax``)."""
    z = logits.to(torch.promote_types(logits.dtype, torch.float32))
    if temperature == 0:
        return torch.nn.functional.one_hot(z.argmax(dim=-1), z.shape[-1]).to(z.dtype)
    z = apply_temperature(z, temperature)
    if top_k is not None:
        z = top_k_filter(z, top_k)
    if top_p is not None:
        z = top_p_filter(z, top_p)
    return torch.softmax(z, dim=-1)


def sample(logits: Tensor, temperature: float = 1.0, top_k: int | None = None, top_p: float | None = None,
           generator: torch.Generator | None = None) -> Tensor:
    """One token id per row of ``logits`` [..., V] -> [...]."""
    probs = distribution(logits, temperature, top_k, top_p)
    flat = probs.reshape(-1, probs.shape[-1])
    return torch.multinomial(flat, 1, generator=generator).reshape(probs.shape[:-1])


# ------------------------------------------------------------------------------------------- search
NextLogprobs = Callable[[Tensor], Tensor]


@dataclass(frozen=True)
class Hypothesis:
    tokens: tuple[int, ...]      # generated tokens (EOS included when it ended the sequence)
    logprob: float               # sum of the token log-probabilities
    score: float                 # logprob / len(tokens) ** length_penalty
    finished: bool               # ended with EOS (False: stopped by max_new_tokens)


def _score(logprob: float, length: int, length_penalty: float) -> float:
    return logprob / (max(length, 1) ** length_penalty)


def greedy(next_logprobs: NextLogprobs, max_new_tokens: int, eos_id: int | None = None,
           prompt: tuple[int, ...] = ()) -> Hypothesis:
    """The argmax token at every step until ``eos_id`` or ``max_new_tokens``."""
    tokens: list[int] = []
    total = 0.0
    for _ in range(max_new_tokens):
        lp = next_logprobs(torch.tensor([list(prompt) + tokens], dtype=torch.long))[0]
        tok = int(torch.argmax(lp))
        total += float(lp[tok])
        tokens.append(tok)
        if tok == eos_id:
            return Hypothesis(tuple(tokens), total, total, True)
    return Hypothesis(tuple(tokens), total, total, False)


def beam_search(next_logprobs: NextLogprobs, beam_width: int, max_new_tokens: int, eos_id: int | None = None,
                length_penalty: float = 0.0, prompt: tuple[int, ...] = ()) -> list[Hypothesis]:
    """The finished hypotheses, best score first (at most ``beam_width``)."""
    if beam_width < 1 or max_new_tokens < 1:
        raise ValueError("beam_width and max_new_tokens must be >= 1")
    active: list[tuple[tuple[int, ...], float]] = [((), 0.0)]
    finished: list[Hypothesis] = []
    for _ in range(max_new_tokens):
        prefixes = torch.tensor([list(prompt) + list(t) for t, _ in active], dtype=torch.long)
        lp = next_logprobs(prefixes).to(torch.float64)                      # [n_active, V]
        cand = torch.tensor([s for _, s in active], dtype=torch.float64)[:, None] + lp
        vocab = lp.shape[-1]
        flat = cand.reshape(-1)
        order = torch.sort(flat, descending=True, stable=True).indices[: 2 * beam_width]
        nxt: list[tuple[tuple[int, ...], float]] = []
        for rank, idx in enumerate(order.tolist()):
            score = float(flat[idx])
            if score == NEG_INF:
                break
            beam, tok = divmod(idx, vocab)
            tokens = active[beam][0] + (tok,)
            if tok == eos_id:
                if rank < beam_width:
                    finished.append(Hypothesis(tokens, score, _score(score, len(tokens), length_penalty), True))
            else:
                nxt.append((tokens, score))
            if len(nxt) == beam_width:
                break
        active = nxt
        if len(finished) >= beam_width or not active:
            break
    else:
        finished += [Hypothesis(t, s, _score(s, len(t), length_penalty), False) for t, s in active]
    finished.sort(key=lambda h: -h.score)          # stable: earlier-finished first on equal scores
    return finished[:beam_width]


def markov_lm(table: Tensor, bos: int = 0) -> NextLogprobs:
    """A model whose next-token log-probabilities depend on the position and the previous token only:
    ``table[t, prev, next]`` [T, V, V] (rows are log-probabilities); at t = 0 the previous token is ``bos``.
    Generation may not run past T tokens."""
    if table.dim() != 3 or table.shape[1] != table.shape[2]:
        raise ValueError(f"table must be [T, V, V], got {tuple(table.shape)}")

    def next_logprobs(prefixes: Tensor) -> Tensor:
        t = prefixes.shape[1]
        if t >= table.shape[0]:
            raise ValueError(f"the table covers {table.shape[0]} steps, asked for step {t}")
        prev = prefixes[:, -1] if t else torch.full((prefixes.shape[0],), bos, dtype=torch.long)
        return table[t, prev]

    return next_logprobs


def beam_search_table(table: Tensor, beam_width: int, eos_id: int | None = None, length_penalty: float = 0.0,
                      bos: int = 0) -> list[Hypothesis]:
    """Beam search over a position-dependent bigram model: ``table[t, prev, next]`` [T, V, V] holds the
    log-probabilities of the next token at step t after ``prev`` (``bos`` before the first token), for up to
    T = table.shape[0] new tokens. Returns the finished hypotheses, best score first (at most ``beam_width``),
    each with ``tokens``, ``logprob`` and ``score`` = logprob / len(tokens) ** length_penalty.
    (``beam_search`` on ``markov_lm(table)``.)"""
    return beam_search(markov_lm(table, bos), beam_width, table.shape[0], eos_id, length_penalty)


def greedy_table(table: Tensor, eos_id: int | None = None, bos: int = 0) -> Hypothesis:
    """``greedy`` on ``markov_lm(table)`` for up to T = table.shape[0] new tokens."""
    return greedy(markov_lm(table, bos), table.shape[0], eos_id)
