"""How well does the quiz grader find key points?  Precision and recall on a labelled set.

tests/quiz/grading/answers.yaml: answers written for four entries (paraphrases in Chinese and English,
partial answers, wrong answers that use the right keywords, bare keyword lists, empty answers), each
labelled with the key points a careful interviewer would tick. Every (answer, key point) pair is a
decision; precision = ticked correctly / ticked, recall = ticked correctly / should be ticked. The
baseline is the previous grader (substring of the match terms after NFKC, case folding and removing
spaces), run on the same set in the same process.

    .venv/bin/python benchmarks/grading_set.py
"""

from __future__ import annotations

import json
import re
import sys
import unicodedata
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
SET = ROOT / "tests" / "quiz" / "grading"


def load_set():
    from mianjing.schema import KeyPoint

    entries = yaml.safe_load((SET / "entries.yaml").read_text(encoding="utf-8"))["entries"]
    points = {eid: [KeyPoint.model_validate(kp) for kp in kps] for eid, kps in entries.items()}
    answers = yaml.safe_load((SET / "answers.yaml").read_text(encoding="utf-8"))["answers"]
    return points, answers


class _Entry:
    def __init__(self, key_points):
        self.key_points = key_points


def baseline_covers(point, answer: str, lang: str) -> bool:
    """The grader before issue 14: a match term as a substring of the answer (NFKC, casefold, no spaces)."""
    norm = lambda t: re.sub(r"\s+", "", unicodedata.normalize("NFKC", t).casefold())  # noqa: E731
    a = norm(answer)
    terms = point.match.get(lang) + point.match.get("en" if lang == "zh" else "zh")
    return any(norm(t) and norm(t) in a for t in terms)


def evaluate() -> dict:
    from mianjing.quiz import grading

    points, answers = load_set()
    out = {}
    for name in ("baseline", "grader"):
        tp = fp = fn = 0
        bad_suggestions = []
        for a in answers:
            kps = points[a["entry"]]
            if name == "grader":
                g = grading.grade(_Entry(kps), a["text"], a["lang"])
                got = [kp in g.covered for kp in kps]
                if (a["wrong"] or a["kind"] in ("keywords", "empty")) and g.suggested >= grading.GOOD:
                    bad_suggestions.append(a["text"][:60])
            else:
                got = [baseline_covers(kp, a["text"], a["lang"]) for kp in kps]
                if a["wrong"] or a["kind"] in ("keywords", "empty"):
                    frac = sum(got) / len(got)
                    if grading.suggest(frac) >= grading.GOOD:
                        bad_suggestions.append(a["text"][:60])
            want = [i in a["covers"] for i in range(len(kps))]
            tp += sum(g and w for g, w in zip(got, want))
            fp += sum(g and not w for g, w in zip(got, want))
            fn += sum(w and not g for g, w in zip(got, want))
        out[name] = {"precision": tp / (tp + fp) if tp + fp else 1.0, "recall": tp / (tp + fn) if tp + fn else 1.0,
                     "tp": tp, "fp": fp, "fn": fn, "wrong_or_keywords_suggested_good": bad_suggestions}
    out["answers"] = len(answers)
    out["by_kind"] = {}
    for a in answers:
        out["by_kind"][a["kind"]] = out["by_kind"].get(a["kind"], 0) + 1
    return out


def main() -> int:
    res = evaluate()
    print(f"labelled answers: {res['answers']} {res['by_kind']}")
    for name in ("baseline", "grader"):
        r = res[name]
        print(f"  {name:8s}: precision {r['precision']:.3f}  recall {r['recall']:.3f}  (tp {r['tp']}, fp {r['fp']}, "
              f"fn {r['fn']}); wrong or keyword-list answers suggested Good/Easy: "
              f"{len(r['wrong_or_keywords_suggested_good'])}")
    out = ROOT / "benchmarks" / "results" / "grading_set.json"
    out.write_text(json.dumps(res, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
