"""How well does the quiz grader find key points?  Precision and recall on a labelled set, per answer kind.

tests/quiz/grading/answers.yaml: answers written for nine entries (paraphrases in Chinese and English,
partial answers, wrong answers that use the right keywords or assert an entry's refuted claim, answers
that deny a key point in its own words, bare keyword lists, empty answers), each labelled with the key
points a careful interviewer would tick for it. tests/quiz/grading/entries.yaml holds the key points and
the refuted claims of those entries as they were. Every (answer, key point) pair is a decision;
precision = ticked correctly / ticked, recall = ticked correctly / should be ticked. The baseline is the
grader before issue 14 (substring of the match terms after NFKC, case folding and removing spaces), run
on the same set in the same process.

    .venv/bin/python benchmarks/grading_set.py
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path
from types import SimpleNamespace

import yaml

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "tests" / "quiz" / "grading"
KINDS = ("paraphrase", "partial", "wrong", "negation", "keywords", "empty")


def load_set():
    from mianjing.schema import KeyPoint, Text

    data = yaml.safe_load((SET / "entries.yaml").read_text(encoding="utf-8"))
    points = {eid: [KeyPoint.model_validate(kp) for kp in kps] for eid, kps in data["entries"].items()}
    claims = {eid: [SimpleNamespace(verdict="refuted", statement=Text.model_validate(c["statement"]),
                                    correction=Text.model_validate(c["correction"])) for c in cs]
              for eid, cs in (data.get("refuted") or {}).items()}
    answers = yaml.safe_load((SET / "answers.yaml").read_text(encoding="utf-8"))["answers"]
    return points, claims, answers


class _Entry:
    def __init__(self, key_points, claims):
        self.key_points = key_points
        self.claims = claims


def baseline_covers(point, answer: str, lang: str) -> bool:
    """The grader before issue 14: a match term as a substring of the answer (NFKC, casefold, no spaces)."""
    norm = lambda t: re.sub(r"\s+", "", unicodedata.normalize("NFKC", t).casefold())  # noqa: E731
    a = norm(answer)
    terms = point.match.get(lang) + point.match.get("en" if lang == "zh" else "zh")
    return any(norm(t) and norm(t) in a for t in terms)


def _ratio(tp: int, n: int) -> float | None:
    return tp / n if n else None


def evaluate() -> dict:
    from mianjing.quiz import grading

    points, claims, answers = load_set()
    out = {}
    for name in ("baseline", "grader"):
        counts = {k: [0, 0, 0] for k in ("all", *KINDS)}  # tp, fp, fn
        bad_suggestions = []
        for a in answers:
            kps = points[a["entry"]]
            if name == "grader":
                g = grading.grade(_Entry(kps, claims.get(a["entry"], [])), a["text"], a["lang"])
                got = [kp in g.covered for kp in kps]
                suggested = g.suggested
            else:
                got = [baseline_covers(kp, a["text"], a["lang"]) for kp in kps]
                suggested = grading.suggest(sum(got) / len(got))
            if (a["wrong"] or a["kind"] in ("keywords", "empty")) and suggested >= grading.GOOD:
                bad_suggestions.append(a["text"][:60])
            want = [i in a["covers"] for i in range(len(kps))]
            for k in ("all", a["kind"]):
                counts[k][0] += sum(g_ and w for g_, w in zip(got, want))
                counts[k][1] += sum(g_ and not w for g_, w in zip(got, want))
                counts[k][2] += sum(w and not g_ for g_, w in zip(got, want))
        tp, fp, fn = counts["all"]
        out[name] = {"precision": _ratio(tp, tp + fp) or 0.0, "recall": _ratio(tp, tp + fn) or 0.0,
                     "tp": tp, "fp": fp, "fn": fn, "wrong_or_keywords_suggested_good": bad_suggestions,
                     "by_kind": {k: {"precision": _ratio(c[0], c[0] + c[1]), "recall": _ratio(c[0], c[0] + c[2]),
                                     "tp": c[0], "fp": c[1], "fn": c[2]} for k, c in counts.items() if k != "all"}}
    out["answers"] = len(answers)
    out["by_kind"] = {}
    for a in answers:
        out["by_kind"][a["kind"]] = out["by_kind"].get(a["kind"], 0) + 1
    return out


def _fmt(x: float | None) -> str:
    return "  -  " if x is None else f"{x:.3f}"


def main() -> int:
    res = evaluate()
    print(f"labelled answers: {res['answers']} {res['by_kind']}")
    for name in ("baseline", "grader"):
        r = res[name]
        print(f"  {name:8s}: precision {r['precision']:.3f}  recall {r['recall']:.3f}  (tp {r['tp']}, fp {r['fp']}, "
              f"fn {r['fn']}); wrong or keyword-list answers suggested Good/Easy: "
              f"{len(r['wrong_or_keywords_suggested_good'])}")
    print(f"  {'kind':10s} {'answers':>7s}   baseline P / R     grader P / R    (tp, fp, fn of the grader)")
    for k in KINDS:
        b, g = res["baseline"]["by_kind"][k], res["grader"]["by_kind"][k]
        print(f"  {k:10s} {res['by_kind'].get(k, 0):7d}   {_fmt(b['precision'])} / {_fmt(b['recall'])}    "
              f"{_fmt(g['precision'])} / {_fmt(g['recall'])}   ({g['tp']}, {g['fp']}, {g['fn']})")
    for text in res["grader"]["wrong_or_keywords_suggested_good"]:
        print(f"  suggested Good/Easy: {text}")
    out = ROOT / "benchmarks" / "results" / "grading_set.json"
    out.write_text(json.dumps(res, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
