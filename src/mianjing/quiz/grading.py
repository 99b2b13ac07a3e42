"""Grade a free-text answer against an entry's key points; the candidate confirms or overrides.

A key point is *covered* when one of its match terms is found in the answer, where "found" is
robust to how people write:

* **normalisation** (both sides): Unicode NFKC and case folding; Greek letters, LaTeX commands and
  their names meet (``Ψ`` = ``\\Psi`` = ``psi``, ``ε`` = ``eps`` = ``epsilon``); dashes, minus signs
  and hyphens inside words (``non-empty`` = ``nonempty``), ``×``/``x``, ``≤``/``<=``, British and
  American spellings (``amortised`` = ``amortized``), ``1.0`` = ``1``, thousands separators;
* **words**: English and Chinese are segmented with jieba (its own dictionary;
  the site's search has its own tokenizer); a multi-word term is found when its words appear in order close together (``pushed and
  popped exactly once`` finds ``pushed once``), words compared by stem and by fuzzy ratio
  (rapidfuzz) so typos and inflections still meet; terms with symbols are found verbatim, at
  word boundaries (``2Ψ`` is not inside ``12Ψ``);
* **synonyms per key point**: the ``match`` lists of the entry; a point may also list groups that
  must appear ``near`` the match (in the same sentence: *which* bound binds *for which sign*), and
  ``opposite`` terms which, nearer to the match than its ``near`` terms, mean the answer says the
  opposite (the bounds swapped): the point is then *contradicted*;
* **negation**: a term preceded in its clause by ``not``/``no``/``不``/``没有``... (when the key point
  itself is not a negative statement) does not cover it.

An answer that is a bare list of keywords (fragments without the words that make a statement) is
flagged; it, and any contradicted answer, never gets a suggestion above Hard. The suggestion
follows the covered fraction otherwise, and follows the candidate's own ticks once they override.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..schema import Entry, KeyPoint

AGAIN, HARD, GOOD, EASY = 1, 2, 3, 4

GREEK = {"α": "alpha", "β": "beta", "γ": "gamma", "δ": "delta", "ε": "epsilon", "ϵ": "epsilon", "ζ": "zeta",
         "η": "eta", "θ": "theta", "κ": "kappa", "λ": "lambda", "μ": "mu", "ν": "nu", "ξ": "xi", "π": "pi",
         "ρ": "rho", "σ": "sigma", "ς": "sigma", "τ": "tau", "φ": "phi", "ϕ": "phi", "χ": "chi", "ψ": "psi",
         "ω": "omega", "∇": "nabla", "∞": "infinity", "∑": "sigma", "∏": "pi"}
LATEX_ALIAS = {"varepsilon": "epsilon", "varphi": "phi", "vartheta": "theta", "infty": "infinity", "cdot": "*",
               "times": "x", "le": "<=", "leq": "<=", "ge": ">=", "geq": ">=", "to": "->", "rightarrow": "->",
               "approx": "~", "neq": "!=", "ne": "!="}
WORD_ALIAS = {"eps": "epsilon", "lam": "lambda", "infinite": "infinity", "∞": "infinity"}
SYMBOL_MAP = str.maketrans({"−": "-", "–": "-", "—": "-", "‑": "-", "‐": "-", "×": "x", "·": "*", "⋅": "*",
                            "∗": "*", "≤": "<=", "≥": ">=", "≈": "~", "→": "->", "≠": "!=", "‖": "||", "$": " ",
                            "{": " ", "}": " ", "`": " ", "’": "'", "“": '"', "”": '"'})
NEGATIONS_EN = {"not", "no", "never", "without", "cannot", "neither", "nor", "isn't", "doesn't", "don't", "aren't",
                "won't", "can't", "didn't", "wasn't", "none", "nothing"}
NEGATIONS_ZH = ("不", "没", "无", "非", "未", "别")
FUNCTION_WORDS = {
    # English: the glue of a statement (a bare keyword list has almost none of it)
    "the", "a", "an", "is", "are", "was", "be", "been", "it", "its", "this", "that", "these", "those", "of", "to",
    "in", "on", "at", "for", "by", "with", "from", "as", "and", "or", "but", "so", "because", "since", "when",
    "while", "if", "then", "than", "only", "also", "each", "every", "which", "who", "what", "where", "there",
    "has", "have", "does", "do", "can", "will", "would", "should", "must", "may", "into", "after", "before",
    "until", "both", "same", "more", "less", "once", "twice", "why", "how", "we", "you", "they", "one",
    # Chinese
    "的", "是", "在", "了", "和", "与", "把", "被", "让", "就", "而", "也", "都", "会", "要", "能", "可以", "因为",
    "所以", "如果", "时", "时候", "只有", "只", "才", "但", "但是", "这", "那", "它", "个", "每", "每个", "再", "还",
    "对", "给", "用", "由", "从", "到", "为", "于", "之", "其", "比", "等", "即", "则", "又", "并",
}
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|[。！？；\n]+|;")
_FRAGMENT = re.compile(r"[,，、;；\n|/]+|(?<=[.!?])\s+|[。！？]")
_CJK = re.compile(r"[\u3400-\u9fff]")
_ALNUM = re.compile(r"[0-9a-z]")

_warm = threading.Lock()
_jieba = None


def warm_up() -> None:
    """Load jieba's dictionary and rapidfuzz (the quiz does it in the background while the candidate types)."""
    _segmenter()
    from rapidfuzz import fuzz  # noqa: F401


def _segmenter():
    global _jieba
    with _warm:
        if _jieba is None:
            import logging

            import jieba

            jieba.setLogLevel(logging.WARNING)
            jieba.initialize()
            _jieba = jieba
    return _jieba


# -- normalisation -----------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Lower-case, width- and symbol-folded text with Greek letters spelled out (spaces kept)."""
    s = unicodedata.normalize("NFKC", text).casefold()
    s = re.sub(r"\\([a-z]+)", lambda m: " " + LATEX_ALIAS.get(m.group(1), m.group(1)) + " ", s)
    s = "".join(f" {GREEK[c]} " if c in GREEK else c for c in s)
    s = s.translate(SYMBOL_MAP)
    s = re.sub(r"(?<=[a-z])-(?=[a-z])", "", s)  # non-empty -> nonempty, worst-case -> worstcase
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)  # 1,000 -> 1000
    s = re.sub(r"(?<=\d)\.0+(?![\d])", "", s)  # 1.0 -> 1
    s = re.sub(r"\b([a-z]{3,}?)is(e|es|ed|ing|ation|ations)\b", r"\1iz\2", s)  # amortised -> amortized
    s = re.sub(r"\b([a-z]+)\b", lambda m: WORD_ALIAS.get(m.group(1), m.group(1)), s)
    return re.sub(r"\s+", " ", s).strip()


def compact(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _stem(tok: str) -> str:
    for suf in ("ations", "ation", "ings", "ing", "edly", "ed", "es", "ly", "s"):
        if tok.endswith(suf) and len(tok) - len(suf) >= 3 and tok.isascii():
            return tok[: -len(suf)]
    return tok


@dataclass
class _Tok:
    text: str
    stem: str
    sentence: int
    start: int  # offset in the compact text


@dataclass
class Parsed:
    """An answer, normalised, segmented into tokens with their sentence and compact offsets."""

    raw: str
    norm: str
    compact: str
    tokens: list[_Tok]
    sentence_of: list[int]  # compact offset -> sentence
    token_at: list[int]  # compact offset -> token index


def parse(text: str) -> Parsed:
    norm = normalise(text)
    jieba = _segmenter()
    tokens: list[_Tok] = []
    comp: list[str] = []
    sentence_of: list[int] = []
    token_at: list[int] = []
    pos = 0
    for si, sent in enumerate(_SENTENCE.split(norm)):
        if not sent or not sent.strip():
            continue
        for w in jieba.lcut(sent):
            w = w.strip()
            if not w:
                continue
            tokens.append(_Tok(w, _stem(w), si, pos))
            comp.append(w)
            sentence_of.extend([si] * len(w))
            token_at.extend([len(tokens) - 1] * len(w))
            pos += len(w)
        comp.append(" ")  # a sentence boundary in the compact text: nothing matches across it
        sentence_of.append(-1)
        token_at.append(-1)
        pos += 1
    return Parsed(text, norm, "".join(comp), tokens, sentence_of, token_at)


# -- finding a term ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    term: str
    sentence: int
    token: int  # index of the first token of the match
    how: str  # exact | words | fuzzy
    end: int = -1  # index of its last token

    def gap(self, other: "Hit") -> int:
        """Tokens between the two matches (0 when they touch or overlap)."""
        a_end = self.end if self.end >= 0 else self.token
        b_end = other.end if other.end >= 0 else other.token
        return max(0, other.token - a_end, self.token - b_end)


def _is_word(tok: str) -> bool:
    return any(ch.isalnum() for ch in tok)


def _same_word(a: _Tok, b: _Tok) -> bool:
    if a.text == b.text or a.stem == b.stem:
        return True
    if len(a.text) >= 5 and len(b.text) >= 5 and a.text.isascii() and b.text.isascii():
        from rapidfuzz import fuzz

        return fuzz.ratio(a.text, b.text) >= 86
    return False


def find(term: str, ans: Parsed) -> list[Hit]:
    """Every place ``term`` is found in the answer."""
    nt = normalise(term)
    ct = compact(nt)
    if not ct:
        return []
    hits: list[Hit] = []
    # 1. verbatim (compact), with word boundaries at ASCII-alphanumeric ends
    start = ans.compact.find(ct)
    while start != -1:
        end = start + len(ct)
        c = ans.compact
        # at ASCII-alphanumeric ends the match must begin/end a word: a token boundary or a non-alnum neighbour
        ok_left = not (_ALNUM.match(ct[0]) and start > 0 and _ALNUM.match(c[start - 1])
                       and ans.token_at[start - 1] == ans.token_at[start])
        ok_right = not (_ALNUM.match(ct[-1]) and end < len(c) and _ALNUM.match(c[end])
                        and ans.token_at[end] == ans.token_at[end - 1])
        if ok_left and ok_right and ans.sentence_of[start] >= 0:
            hits.append(Hit(term, ans.sentence_of[start], ans.token_at[start], "exact", ans.token_at[end - 1]))
        start = ans.compact.find(ct, start + 1)
    if hits:
        return hits
    # 2. its words in order, close together (stems and fuzzy words)
    words = [_Tok(w, _stem(w), 0, 0) for w in (x.strip() for x in _segmenter().lcut(nt)) if w and _is_word(w)]
    content = [w for w in words if w.text not in FUNCTION_WORDS] or words
    if not content:
        return []
    if len(content) == 1 and not (len(content[0].text) >= 6 and content[0].text.isascii()):
        return []  # a short single word: verbatim only (fuzzy would find "bias" in "bad")
    toks = ans.tokens
    window = len(content) + 2
    for i, t in enumerate(toks):
        if not _same_word(content[0], t):
            continue
        j, k = i, 1
        while k < len(content):
            nxt = next((x for x in range(j + 1, min(len(toks), i + window + 1))
                        if toks[x].sentence == t.sentence and _same_word(content[k], toks[x])), None)
            if nxt is None:
                break
            j, k = nxt, k + 1
        if k == len(content):
            hits.append(Hit(term, t.sentence, i, "words" if len(content) > 1 else "fuzzy", j))
    return hits


def _negated(hit: Hit, ans: Parsed) -> bool:
    """A negation word just before the match, in the same clause."""
    toks = ans.tokens
    for x in range(hit.token - 1, max(-1, hit.token - 4), -1):
        t = toks[x]
        if t.sentence != hit.sentence or t.text in (",", "，", "、"):
            break
        if t.text in NEGATIONS_EN or (t.text.startswith(NEGATIONS_ZH) and _CJK.match(t.text)):
            return True
    # a Chinese negation glued to the term's first token (不是投影 -> 不 + 是投影)
    first = toks[hit.token].text
    return first.startswith(NEGATIONS_ZH) and len(first) > 1


def _has_negation(text: str) -> bool:
    n = normalise(text)
    return bool(set(re.findall(r"[a-z']+", n)) & NEGATIONS_EN) or any(c in n for c in NEGATIONS_ZH)


# -- a key point ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PointResult:
    covered: bool
    contradicted: bool = False
    evidence: str = ""  # the term found, or why the point is contradicted


def _terms(group, lang: str) -> list[str]:
    other = "en" if lang == "zh" else "zh"
    return list(group.get(lang)) + list(group.get(other))  # a Chinese answer may use English terms


def judge_point(point: KeyPoint, ans: Parsed, lang: str) -> PointResult:
    match = point.match
    positive = not _has_negation(point.get(lang)) and not _has_negation(point.get("en"))
    hits = [h for t in _terms(match, lang) for h in find(t, ans)]
    if positive:
        hits = [h for h in hits if not _negated(h, ans)]
    if not hits:
        return PointResult(False)
    near = list(getattr(match, "near", []) or [])
    opposite = list(getattr(match, "opposite", []) or [])
    if not near and not opposite:
        return PointResult(True, evidence=hits[0].term)
    opp_hits = [h for t in (x for g in opposite for x in _terms(g, lang)) for h in find(t, ans)]
    contradiction = ""
    for h in sorted(hits, key=lambda h: h.token):
        same = [o for o in opp_hits if o.sentence == h.sentence and (o.token, o.end) != (h.token, h.end)]
        nearest_opp = min((o.gap(h) for o in same), default=None)
        ok = True
        dist_needed = 0
        for g in near:
            cands = [x.gap(h) for t in _terms(g, lang) for x in find(t, ans) if x.sentence == h.sentence]
            if not cands:
                ok = False
                break
            dist_needed = max(dist_needed, min(cands))
        if nearest_opp is not None and (not ok or nearest_opp <= dist_needed):
            o = min(same, key=lambda o: o.gap(h))
            contradiction = f"'{o.term}' next to '{h.term}'"
            continue
        if ok:
            return PointResult(True, evidence=h.term)
    if contradiction:
        return PointResult(False, True, contradiction)
    return PointResult(False)


# -- the answer ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Grade:
    covered: list[KeyPoint]
    missed: list[KeyPoint]
    contradicted: list[KeyPoint] = field(default_factory=list)  # a subset of missed: the answer says the opposite
    keyword_only: bool = False
    empty: bool = False
    overridden: bool = False  # the candidate changed the ticks
    evidence: dict = field(default_factory=dict)  # key point text (en) -> what was found / why contradicted

    @property
    def total(self) -> int:
        return len(self.covered) + len(self.missed)

    @property
    def fraction(self) -> float:
        return len(self.covered) / self.total if self.total else 0.0

    @property
    def suggested(self) -> int:
        s = suggest(self.fraction)
        if self.overridden:
            return s  # the candidate's ticks decide
        if self.empty:
            return AGAIN
        if self.contradicted:
            s = min(s, HARD)
            if len(self.contradicted) >= 2 or len(self.contradicted) >= len(self.covered):
                s = AGAIN
        if self.keyword_only:
            s = min(s, HARD)
        return s

    def with_ticks(self, ticked: list[bool], points: list[KeyPoint]) -> "Grade":
        """The candidate's override: exactly the ticked points are covered."""
        covered = [p for p, t in zip(points, ticked) if t]
        missed = [p for p, t in zip(points, ticked) if not t]
        changed = covered != self.covered
        return replace(self, covered=covered, missed=missed,
                       contradicted=[p for p in self.contradicted if p in missed], overridden=changed)


def suggest(fraction: float) -> int:
    """All key points -> Easy; at least 2/3 -> Good; at least 1/3 -> Hard; less -> Again."""
    if fraction >= 1.0:
        return EASY
    if fraction >= 2 / 3 - 1e-9:
        return GOOD
    if fraction >= 1 / 3 - 1e-9:
        return HARD
    return AGAIN


def keyword_only(ans: Parsed, found_terms: list[str]) -> bool:
    """A bare list of keywords: short fragments with next to none of the words that make a statement."""
    words = [t for t in ans.tokens if _is_word(t.text)]
    if len(words) < 2:
        return False
    glue = sum(1 for t in words if t.text in FUNCTION_WORDS)
    fragments = [f for f in _FRAGMENT.split(ans.norm) if f.strip()]
    jieba = _segmenter()
    bare = 0
    for f in fragments:
        ws = [w for w in (x.strip() for x in jieba.lcut(f)) if w and _is_word(w)]
        if len(ws) <= 3 and not any(w in FUNCTION_WORDS for w in ws):
            bare += 1
    term_chars = sum(len(compact(normalise(t))) for t in set(found_terms))
    word_chars = sum(len(t.text) for t in words) or 1
    if len(fragments) >= 3 and bare / len(fragments) >= 0.7 and glue / len(words) < 0.12:
        return True
    return glue == 0 and term_chars / word_chars >= 0.6


def covers(point: KeyPoint, answer: str, lang: str) -> bool:
    return judge_point(point, parse(answer), lang).covered


def grade(entry: Entry, answer: str, lang: str) -> Grade:
    if not answer.strip():
        return Grade([], list(entry.key_points), empty=True)
    ans = parse(answer)
    covered, missed, contradicted, evidence, found = [], [], [], {}, []
    for kp in entry.key_points:
        r = judge_point(kp, ans, lang)
        (covered if r.covered else missed).append(kp)
        if r.contradicted:
            contradicted.append(kp)
        if r.evidence:
            evidence[kp.en] = r.evidence
            if r.covered:
                found.append(r.evidence)
    for kp in missed:  # terms of missed points count as keywords too
        found += [t for t in _terms(kp.match, lang) if find(t, ans)]
    if keyword_only(ans, found):
        # naming a term is not stating the point: nothing is covered, the terms are shown as mentioned
        mentioned = {kp.en: f"mentioned '{evidence[kp.en]}' without saying anything about it"
                     for kp in covered if kp.en in evidence}
        return Grade([], list(entry.key_points), contradicted, True, False, False, {**evidence, **mentioned})
    return Grade(covered, missed, contradicted, False, False, False, evidence)
