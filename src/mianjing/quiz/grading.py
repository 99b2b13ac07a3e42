"""Grade a free-text answer against an entry's key points; the candidate confirms or overrides.

A key point is *covered* when one of its match terms is found in the answer, where "found" is
robust to how people write:

* **normalisation** (both sides): Unicode NFKC and case folding; Greek letters, LaTeX commands and
  their names meet (``Ψ`` = ``\\Psi`` = ``psi``, ``ε`` = ``eps`` = ``epsilon``); dashes, minus signs
  and hyphens inside words (``non-empty`` = ``nonempty``), ``×``/``x``, ``≤``/``<=``, powers and
  products in formulas (``5as²b`` = ``5as^2b`` = ``5·a·s²·b``), British and American spellings
  (``amortised`` = ``amortized``), ``1.0`` = ``1``, thousands separators;
* **words**: English and Chinese are segmented with jieba (its own dictionary, plus the compounds of
  :data:`COMPOUNDS`); a multi-word term is found when all its words except articles and the like
  appear in order close together (``same distribution`` needs ``same``; ``pushed and popped exactly
  once`` finds ``pushed once``); words meet by stem (``Epochs`` = ``epoch``, ``quadratically`` =
  ``quadratic``) and, for long words, by fuzzy ratio (rapidfuzz: typos), never across a negating
  prefix (``non-contiguous`` is not ``contiguous``); terms with symbols are found verbatim, at word
  boundaries (``2Ψ`` is not inside ``12Ψ``); a Chinese term is not found inside a longer compound
  (``精度`` in ``半精度``, ``激活`` in ``激活函数``);
* **polarity**: a term with a negation next to it in its clause (``not``/``no``/``不``/``没有``/``并非``...
  as words: ``无偏``, ``无损``, ``区别``, ``不同`` are not negations) covers the point only if the key
  point's own text negates it too; said the other way round, the point is *contradicted*;
* **synonyms per key point**: the ``match`` lists of the entry; a point may also list groups that
  must appear ``near`` the match (in the same sentence: *which* bound binds *for which sign*), and
  ``opposite`` terms which, nearer to the match than its ``near`` terms, mean the answer says the
  opposite (the bounds swapped): the point is then contradicted;
* **misconceptions**: an answer sentence that states one of the entry's refuted claims (its content
  words, the distinctive ones weighted double, with the statement's polarity, closer to the statement
  than to its correction, and not introduced as a misconception) marks the key point nearest that claim
  contradicted, in either language.

An answer that is a bare list of keywords (fragments without the words that make a statement) is
flagged; it, and any contradicted answer, never gets a suggestion above Hard. The suggestion
follows the covered fraction otherwise, and follows the candidate's own ticks once they override.
"""

from __future__ import annotations

import re
import threading
import unicodedata
from dataclasses import dataclass, field, replace
from functools import lru_cache
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
                "won't", "can't", "didn't", "wasn't", "none", "nothing", "nobody", "hardly"}
# Chinese negation *words* (jieba tokens); a character like 无/不/非/别/未 inside a word (无偏, 无损, 区别, 不同,
# 非负, 未来) is not one
NEGATIONS_ZH = {"不", "没", "没有", "无", "非", "未", "别", "不是", "并不", "并非", "不会", "不能", "不可", "不可以",
                "不可能", "不要", "不用", "不必", "不需", "不需要", "无法", "无需", "未必", "从不", "从未", "绝不",
                "毫无", "不再", "不对", "而非", "不算", "不等于", "没法", "不一定", "并没有", "不太", "不到", "不该"}
NOT_NEGATION = {("not", "only"), ("not", "just"), ("no", "matter")}  # "not only X": X is affirmed
NEGATING_PAIRS = {("rather", "than"), ("instead", "of")}  # "A rather than B": B is denied
CLAUSE_BREAKS = {",", "，", "、", ";", "；", ":", "：", "but", "however", "whereas", "while", "although", "though",
                 "但", "但是", "而", "不过", "然而", "可是", "(", ")", "（", "）"}
COPULA = {"is", "are", "was", "were", "be", "does", "do", "did", "has", "have", "had", "can", "will", "would",
          "should", "it", "they", "also", "still", "at", "all", "并", "也", "就", "都", "还", "是", "会", "能", "的",
          "说法", "这", "这种"}
# Compounds jieba should keep whole, inside which a shorter term is another word: half precision is not
# precision, an activation function is not the activations
COMPOUNDS = ("半精度", "单精度", "双精度", "全精度", "混合精度", "低精度", "高精度", "激活函数", "激活检查点",
             "次正规", "次正规数", "非正规数", "无偏", "有偏", "无损", "有损", "非负", "非零", "不同", "区别",
             "反向传播", "前向传播", "动态范围")
EN_COMPOUNDS = {("mixed", "precision"), ("half", "precision"), ("single", "precision"), ("double", "precision"),
                ("full", "precision"), ("low", "precision"), ("activation", "function"), ("activation", "functions"),
                ("activation", "checkpointing")}
NEGATING_PREFIXES = ("non", "un", "in", "im", "ir", "il", "dis", "anti", "de", "a")
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
# Words a term can do without: articles, copulas, prepositions, particles (not "same", "only", "more"...)
IGNORABLE = {"the", "a", "an", "is", "are", "was", "be", "been", "it", "its", "this", "that", "these", "those", "of",
             "to", "in", "on", "at", "for", "by", "with", "from", "as", "and", "or", "so", "has", "have", "does", "do",
             "which", "we", "you", "they", "there", "then",
             "的", "是", "在", "了", "和", "与", "把", "被", "就", "也", "都", "会", "要", "这", "那", "它", "个", "对",
             "给", "用", "由", "从", "到", "为", "于", "之", "其", "等", "即", "则", "又", "并", "地", "得", "着", "过"}
# A sentence that names a claim to reject it is not asserting it
REFUTING = ("misconception", "myth", "mistake", "wrong", "not true", "incorrect", "people think", "people say",
            "often said", "it is said", "claim", "contrary", "误区", "误解", "错误", "有人说", "有人认为", "常见说法",
            "说法", "不对", "并不是", "以为")
_SENTENCE = re.compile(r"(?<=[.!?;])\s+|[。！？；\n]+|;")
_FRAGMENT = re.compile(r"[,，、;；\n|/]+|(?<=[.!?])\s+|[。！？]")
_CJK = re.compile(r"[\u3400-\u9fff]")
_ALNUM = re.compile(r"[0-9a-z]")
FRACTIONS = {"a third": "1/3", "one third": "1/3", "two thirds": "2/3", "a quarter": "1/4", "one quarter": "1/4",
             "three quarters": "3/4", "三分之一": "1/3", "三分之二": "2/3", "四分之一": "1/4", "一半": "1/2",
             **{f"{c}成": f"{i}0%" for i, c in enumerate("一二三四五六七八九", 1)}}
_FRACTIONS = re.compile("|".join(sorted(map(re.escape, FRACTIONS), key=len, reverse=True)))
SYNONYMS_ZH = {"一模一样": "完全相同", "完全一样": "完全相同", "毫无区别": "完全相同"}  # said the same way
_SYNONYM_ZH = re.compile("(" + "|".join(map(re.escape, SYNONYMS_ZH)) + ")")
_SYMBOL_PRODUCT = re.compile(r"(?<![a-z])([0-9]+|[a-z][0-9]*)\s*\*\s*(?=[a-z](?![a-z]))")
_ENTITY = re.compile(r"^(?=.*[a-z])(?=.*[0-9])[a-z0-9]{2,8}$")  # fp16, bf16, k3, a100: what a statement is about

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
            for word in COMPOUNDS:
                jieba.add_word(word, freq=100000)
            _jieba = jieba
    return _jieba


# -- normalisation -----------------------------------------------------------------------------


def normalise(text: str) -> str:
    """Lower-case, width- and symbol-folded text with Greek letters spelled out (spaces kept)."""
    s = unicodedata.normalize("NFKC", text).casefold()
    s = re.sub(r"\\([a-z]+)", lambda m: " " + LATEX_ALIAS.get(m.group(1), m.group(1)) + " ", s)
    s = "".join(f" {GREEK[c]} " if c in GREEK else c for c in s)
    s = s.translate(SYMBOL_MAP)
    s = re.sub(r"\s*(\^|\*\*)\s*", "", s)  # powers: s^2 -> s2, as NFKC makes s² of s² (5as²b = 5as^2b)
    s = _FRACTIONS.sub(lambda m: FRACTIONS[m.group(0)], s)  # a third -> 1/3, 七成 -> 70%
    s = "".join(SYNONYMS_ZH.get(w, w) for w in _SYNONYM_ZH.split(s))
    s = _SYMBOL_PRODUCT.sub(r"\1", s)  # 5*a*s2*b -> 5as2b: products of one-letter symbols (not gamma*c)
    s = _SYMBOL_PRODUCT.sub(r"\1", s)
    s = re.sub(r"(?<=[a-z])-(?=[a-z])", "", s)  # non-empty -> nonempty, worst-case -> worstcase
    s = re.sub(r"(?<=\d),(?=\d{3}\b)", "", s)  # 1,000 -> 1000
    s = re.sub(r"(?<=\d)\.0+(?![\d])", "", s)  # 1.0 -> 1
    s = re.sub(r"\b([a-z]{3,}?)is(e|es|ed|ing|ation|ations)\b", r"\1iz\2", s)  # amortised -> amortized
    s = re.sub(r"\b([a-z]+)\b", lambda m: WORD_ALIAS.get(m.group(1), m.group(1)), s)
    return re.sub(r"\s+", " ", s).strip()


def compact(text: str) -> str:
    return re.sub(r"\s+", "", text)


_SUFFIXES = (("ically", "ic"), ("ally", "al"), ("ally", ""), ("ional", "ion"), ("ies", "y"), ("ied", "y"), ("ations", ""),
             ("ation", ""), ("ation", "ate"), ("ings", ""), ("ing", ""), ("edly", ""), ("ed", ""), ("es", ""),
             ("ly", ""), ("s", ""))


@lru_cache(maxsize=65536)
def _stems(tok: str) -> frozenset[str]:
    """The word and what it may be an inflection of (epochs -> epoch, quadratically -> quadratic)."""
    out = {tok}
    if tok.isascii() and tok.isalpha():
        for suf, rep in _SUFFIXES:
            if tok.endswith(suf) and len(tok) - len(suf) >= 3:
                out.add(tok[: -len(suf)] + rep)
        out |= {w[:-1] for w in list(out) if w.endswith("e") and len(w) > 4}
    return frozenset(out)


def _stem(tok: str) -> str:
    return min(_stems(tok), key=len)


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


_parsed = lru_cache(maxsize=4096)(parse)  # key point texts and claims, parsed once


# -- finding a term ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Hit:
    term: str
    sentence: int
    token: int  # index of the first token of the match
    how: str  # exact | words | stem
    end: int = -1  # index of its last token
    at: int = -1  # compact offset of a verbatim match

    def gap(self, other: "Hit") -> int:
        """Tokens between the two matches (0 when they touch or overlap)."""
        a_end = self.end if self.end >= 0 else self.token
        b_end = other.end if other.end >= 0 else other.token
        return max(0, other.token - a_end, self.token - b_end)


def _is_word(tok: str) -> bool:
    return any(ch.isalnum() for ch in tok)


def _is_neg(tok: str) -> bool:
    return tok in NEGATIONS_EN or tok in NEGATIONS_ZH or (tok.endswith("n't") and tok.isascii())


def _negating_prefix(a: str, b: str) -> bool:
    """``a`` is ``b`` with a negating prefix, or the other way round (noncontiguous / contiguous)."""
    short, long_ = sorted((a, b), key=len)
    return 0 < len(long_) - len(short) <= 4 and long_.endswith(short) and long_[: -len(short)] in NEGATING_PREFIXES


def _same_word(a: _Tok, b: _Tok) -> bool:
    return a.text == b.text or _same_text(a.text, b.text)


@lru_cache(maxsize=262144)
def _same_text(a: str, b: str) -> bool:
    """Two words that mean the same: equal, one inflection of the other, or (long words) a typo apart."""
    if _is_neg(a) or _is_neg(b):
        return _is_neg(a) and _is_neg(b)
    if _negating_prefix(a, b):
        return False
    sa, sb = _stems(a), _stems(b)
    if sa & sb:
        return True
    if len(a) >= 5 and len(b) >= 5 and a.isascii() and b.isascii() and a[0] == b[0] \
            and not any(_negating_prefix(x, y) for x in sa for y in sb):
        from rapidfuzz import fuzz

        return fuzz.ratio(a, b) >= 86
    return False


def _inside_compound(ans: Parsed, start: int, end: int) -> bool:
    """The match [start, end) of the compact text lies strictly inside one of the COMPOUNDS."""
    for i in (ans.token_at[start], ans.token_at[end - 1]):
        if i < 0:
            continue
        t = ans.tokens[i]
        if t.text in COMPOUNDS and (start > t.start or end < t.start + len(t.text)):
            return True
    return False


def find(term: str, ans: Parsed) -> list[Hit]:
    """Every place ``term`` is found in the answer."""
    nt = normalise(term)
    ct = compact(nt)
    if not ct:
        return []
    hits: list[Hit] = []
    # 1. verbatim (compact), with word boundaries at ASCII-alphanumeric ends and outside longer Chinese compounds
    start = ans.compact.find(ct)
    while start != -1:
        end = start + len(ct)
        c = ans.compact
        # at ASCII-alphanumeric ends the match must begin/end a word: a token boundary or a non-alnum neighbour
        ok_left = not (_ALNUM.match(ct[0]) and start > 0 and _ALNUM.match(c[start - 1])
                       and ans.token_at[start - 1] == ans.token_at[start])
        ok_right = not (_ALNUM.match(ct[-1]) and end < len(c) and _ALNUM.match(c[end])
                        and ans.token_at[end] == ans.token_at[end - 1])
        ti, tj = ans.token_at[start], ans.token_at[end - 1]
        if (ok_left and ok_right and ans.sentence_of[start] >= 0 and not _inside_compound(ans, start, end)
                and not _in_en_compound(ans.tokens, ti, tj)):
            hits.append(Hit(term, ans.sentence_of[start], ans.token_at[start], "exact", ans.token_at[end - 1], start))
        start = ans.compact.find(ct, start + 1)
    if hits:
        return hits
    # 2. its words in order, close together (stems, long words fuzzily; negations as one word)
    pieces = [x.strip() for x in _segmenter().lcut(nt)]
    if any(w and not _is_word(w) for w in pieces):
        return []  # a term with symbols (p/q, k3+, A>0) is found verbatim or not at all
    words = [_Tok(w, _stem(w), 0, 0) for w in pieces if w]
    content = [w for w in words if w.text not in IGNORABLE] or words
    if not content:
        return []
    toks = ans.tokens
    window = len(content) + 2
    for i, t in enumerate(toks):
        if not _same_word(content[0], t):
            continue
        j, k = i, 1
        while k < len(content):
            nxt = None
            for x in range(j + 1, min(len(toks), i + window + 1)):
                if toks[x].sentence != t.sentence or toks[x].text in CLAUSE_BREAKS:
                    break
                if _same_word(content[k], toks[x]):
                    nxt = x
                    break
            if nxt is None:
                break
            j, k = nxt, k + 1
        if k == len(content) and not _in_en_compound(toks, i, j):
            hits.append(Hit(term, t.sentence, i, "words" if len(content) > 1 else "stem", j))
    return hits


def _in_en_compound(toks: list[_Tok], i: int, j: int) -> bool:
    """A one-word match that is half of a compound of EN_COMPOUNDS ("precision" in "mixed precision")."""
    if i != j:
        return False
    w = toks[i].text
    before = toks[i - 1].text if i > 0 else ""
    after = toks[i + 1].text if i + 1 < len(toks) else ""
    return (before, w) in EN_COMPOUNDS or (w, after) in EN_COMPOUNDS


# -- polarity ----------------------------------------------------------------------------------


def negated(hit: Hit, ans: Parsed) -> bool:
    """A negation next to the match in its clause: up to four words before it (``not``, ``不是``, ``rather
    than``...), glued to its first word (``不截断``), or right after it (``X is not used``, ``X 没有``)."""
    toks = ans.tokens
    for x in range(hit.token - 1, max(-1, hit.token - 5), -1):
        t = toks[x]
        if t.sentence != hit.sentence or t.text in CLAUSE_BREAKS:
            break
        nxt = toks[x + 1].text if x + 1 < len(toks) else ""
        if (t.text, nxt) in NEGATING_PAIRS:
            return True
        if _is_neg(t.text) and (t.text, nxt) not in NOT_NEGATION:
            return True
    first = toks[hit.token]
    if hit.at > first.start and _CJK.match(first.text):  # the match begins inside a word: 不截断 for 截断
        if first.text[: hit.at - first.start] in NEGATIONS_ZH:
            return True
    end = hit.end if hit.end >= 0 else hit.token
    for x in range(end + 1, min(len(toks), end + 4)):
        t = toks[x]
        if t.sentence != hit.sentence or t.text in CLAUSE_BREAKS:
            break
        if _is_neg(t.text):
            return True
        if t.text not in COPULA:
            break
    return False


def _polarity(point: KeyPoint, term: str) -> bool:
    """Does the key point's own text negate ``term``? (Looked up in both of its texts; False if absent.)"""
    for text in (point.zh, point.en):
        hits = find(term, _parsed(text))
        if hits:
            return all(negated(h, _parsed(text)) for h in hits)
    return False


def _subject(toks: list[_Tok], i: int) -> str:
    """The nearest entity (fp16, bf16, k3...) before token ``i`` in its clause, or ''."""
    a = i
    while a >= 0 and toks[a].sentence == toks[i].sentence and toks[a].text not in CLAUSE_BREAKS:
        if _ENTITY.match(toks[a].text):
            return toks[a].text
        a -= 1
    return ""


def _swapped(point: KeyPoint, hit: Hit, ans: Parsed) -> bool:
    """A figure of the key point said of another of its entities: "BF16 tops out at 65504" where the point
    says FP16 does. Only for terms with digits, found in the point's own text with an entity in their clause."""
    if not any(ch.isdigit() for ch in hit.term):
        return False
    said = _subject(ans.tokens, hit.token)
    if not said:
        return False
    for text in (point.en, point.zh):
        kp = _parsed(text)
        entities = {t.text for t in kp.tokens if _ENTITY.match(t.text)}
        subjects = {_subject(kp.tokens, h.token) for h in find(hit.term, kp)} - {""}
        if subjects and said in entities and said not in subjects:
            return True
    return False


def _clause_negations(tokens: list[_Tok]) -> int:
    """Negations in a sentence, for comparing it with a claim: "not just truncates" denies "only truncates"."""
    n = 0
    for i, t in enumerate(tokens):
        nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
        if ((t.text, nxt) in NEGATING_PAIRS) or (_is_neg(t.text) and (t.text, nxt) != ("no", "matter")):
            n += 1
    return n


# -- a key point ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class PointResult:
    covered: bool
    contradicted: bool = False
    evidence: str = ""  # the term found, or why the point is contradicted
    sentences: frozenset = frozenset()  # the answer's sentences the point was found in


def _terms(group, lang: str) -> list[str]:
    other = "en" if lang == "zh" else "zh"
    return list(group.get(lang)) + list(group.get(other))  # a Chinese answer may use English terms


def judge_point(point: KeyPoint, ans: Parsed, lang: str) -> PointResult:
    match = point.match
    hits, reversed_ = [], []
    for t in _terms(match, lang):
        expected = _polarity(point, t)
        for h in find(t, ans):
            (hits if negated(h, ans) == expected else reversed_).append(h)
    swapped = [h for h in hits if _swapped(point, h, ans)]
    if swapped:
        h = swapped[0]
        return PointResult(False, True, f"'{h.term}' said of {_subject(ans.tokens, h.token)}")
    if not hits:
        if reversed_:
            h = reversed_[0]
            return PointResult(False, True, f"'{h.term}' said the other way round")
        return PointResult(False)
    near = list(getattr(match, "near", []) or [])
    opposite = list(getattr(match, "opposite", []) or [])
    if not near and not opposite:
        return PointResult(True, evidence=hits[0].term, sentences=frozenset(h.sentence for h in hits))
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
            return PointResult(True, evidence=h.term, sentences=frozenset({h.sentence}))
    if contradiction:
        return PointResult(False, True, contradiction)
    return PointResult(False)


# -- misconceptions: the entry's refuted claims ----------------------------------------------------

ASSERT_AT = 0.6  # share of a claim's (weighted) content words a sentence must state


def _content(tokens: list[_Tok]) -> list[_Tok]:
    """Content words, with big-O notation kept whole (``o(1)``, ``o(h)``: not ``o`` and ``1``)."""
    out, i = [], 0
    while i < len(tokens):
        t = tokens[i]
        if t.text == "o" and i + 3 < len(tokens) and tokens[i + 1].text == "(":
            close = next((k for k in range(i + 2, min(len(tokens), i + 8)) if tokens[k].text == ")"), None)
            if close is not None:
                merged = "o(" + "".join(x.text for x in tokens[i + 2:close]) + ")"
                out.append(_Tok(merged, merged, t.sentence, t.start))
                i = close + 1
                continue
        if _is_word(t.text) and t.text not in IGNORABLE and not _is_neg(t.text):
            out.append(t)
        i += 1
    return out


class _Bag:
    """Content words for comparing statements: by stem, and Chinese words also by containment (需 / 需要 aside)."""

    def __init__(self, tokens: list[_Tok]):
        self.words = list(dict.fromkeys(t.text for t in tokens))
        self.stems = set().union(*(_stems(w) for w in self.words)) if self.words else set()
        self.cjk = [w for w in self.words if _CJK.match(w)]

    def has(self, word: str) -> bool:
        if _stems(word) & self.stems:
            return True
        return bool(_CJK.match(word)) and any((word in w or w in word) and min(len(w), len(word)) >= 2 for w in self.cjk)


def _share(sentence: _Bag, claim: _Bag, other: _Bag) -> float:
    """Weighted share of ``claim``'s content words the sentence has; words not in ``other`` count double."""
    total = got = 0.0
    for w in claim.words:
        weight = (1.0 if other.has(w) else 2.0) * (1.5 if any(ch.isdigit() for ch in w) else 1.0)
        total += weight
        got += weight if sentence.has(w) else 0.0
    return got / total if total else 0.0


@dataclass(frozen=True)
class _Claim:
    statement: dict  # lang -> _Bag of its content words
    correction: dict
    negations: dict  # lang -> negations in the statement


@lru_cache(maxsize=1024)
def _claim(statement_zh: str, statement_en: str, correction_zh: str, correction_en: str) -> _Claim:
    st = {"zh": _parsed(statement_zh), "en": _parsed(statement_en)}
    co = {"zh": _parsed(correction_zh), "en": _parsed(correction_en)}
    return _Claim({k: _Bag(_content(v.tokens)) for k, v in st.items()},
                  {k: _Bag(_content(v.tokens)) for k, v in co.items()},
                  {k: _clause_negations(v.tokens) for k, v in st.items()})


def _refuted(entry) -> list[_Claim]:
    out = []
    for c in getattr(entry, "claims", None) or []:
        if str(getattr(c, "verdict", "")).split(".")[-1] != "refuted" or c.correction is None:
            continue
        out.append(_claim(c.statement.zh, c.statement.en, c.correction.zh, c.correction.en))
    return out


def asserts(ans: Parsed, claim: _Claim) -> tuple[int, str] | None:
    """The answer sentence (index, text) that states the refuted claim, or None."""
    sentences: dict[int, list[_Tok]] = {}
    for t in ans.tokens:
        sentences.setdefault(t.sentence, []).append(t)
    for si, toks in sentences.items():
        raw = " ".join(t.text for t in toks)
        if any(cue in raw for cue in REFUTING):
            continue
        content = _Bag(_content(toks))
        for lang in ("zh", "en"):
            st, co = claim.statement[lang], claim.correction[lang]
            share = _share(content, st, co)
            # its own words against the correction's: which of the two does the sentence say?
            said = {w for w in st.words if not co.has(w) and content.has(w)}
            corrected = {w for w in co.words if not st.has(w) and content.has(w)}
            same_polarity = _clause_negations(toks) % 2 == claim.negations[lang] % 2
            if share >= ASSERT_AT and len(said) > len(corrected) and same_polarity:
                return si, "".join(t.text for t in toks)[:80]
    return None


def _nearest_point(claim: _Claim, points) -> int | None:
    """The key point that shares the most content words with the claim (statement and correction)."""
    best, best_i = 0.0, None
    for i, kp in enumerate(points):
        score = 0.0
        for lang in ("zh", "en"):
            kp_words = _Bag(_content(_parsed(kp.get(lang)).tokens)).words
            hit = sum(1 for w in kp_words if claim.statement[lang].has(w) or claim.correction[lang].has(w))
            score += hit / (len(kp_words) or 1)
        if score > best:
            best, best_i = score, i
    return best_i


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
    misconceptions: list[str] = field(default_factory=list)  # refuted claims the answer states (its sentences)

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
        wrong = len(self.contradicted) + len([m for m in self.misconceptions if m])
        if wrong:
            s = min(s, HARD)
            if wrong >= 2 or wrong >= len(self.covered):
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
    points = list(entry.key_points)
    results = [judge_point(kp, ans, lang) for kp in points]
    misconceptions = []
    for claim in _refuted(entry):
        said = asserts(ans, claim)
        if said is None:
            continue
        si, text = said
        misconceptions.append(text)
        wrong = PointResult(False, True, f"states a refuted claim: '{text}'")
        found_there = [i for i, r in enumerate(results) if r.covered and r.sentences <= {si}]
        nearest = _nearest_point(claim, points)
        for i in found_there or ([nearest] if nearest is not None else []):
            results[i] = wrong
    covered = [kp for kp, r in zip(points, results) if r.covered]
    missed = [kp for kp, r in zip(points, results) if not r.covered]
    contradicted = [kp for kp, r in zip(points, results) if r.contradicted]
    evidence = {kp.en: r.evidence for kp, r in zip(points, results) if r.evidence}
    found = [r.evidence for r in results if r.covered]
    for kp in missed:  # terms of missed points count as keywords too
        found += [t for t in _terms(kp.match, lang) if find(t, ans)]
    if keyword_only(ans, found):
        # naming a term is not stating the point: nothing is covered, the terms are shown as mentioned
        mentioned = {kp.en: f"mentioned '{evidence[kp.en]}' without saying anything about it"
                     for kp in covered if kp.en in evidence}
        return Grade([], points, contradicted, True, False, False, {**evidence, **mentioned}, misconceptions)
    return Grade(covered, missed, contradicted, False, False, False, evidence, misconceptions)
