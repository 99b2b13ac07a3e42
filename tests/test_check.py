"""`mianjing check` catches every kind of problem, naming the file and line."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from mianjing.check import check
from tests.minirepo import entry_yaml, make_repo


def run_check(root):
    return check(root, root.parent / "shared" / "catalog" / "claims.yaml")


def lines_of(text: str, needle: str) -> int:
    """1-based line of the first line containing needle."""
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_clean_repo_passes(tmp_path):
    res = run_check(make_repo(tmp_path))
    assert res.problems == []
    assert len(res.kb) == 1 and len(res.markers) == 2


@pytest.mark.parametrize(
    "mutate, needle, field, message",
    [
        (lambda t: t.replace("difficulty: 1", "difficulty: seven"), "difficulty:", "difficulty", "integer"),
        (lambda t: t.replace("difficulty: 1", "difficulty: 1\nauthor: me"), "author:", "author", "unknown field"),
        (lambda t: t.replace("topic: maths/arith\n", ""), "id: adding", "topic", "required field is missing"),
        (lambda t: t.replace('    correction: {zh: "a−b = −(b−a)", en: "a−b = −(b−a)"}\n', ""),
         "- id: sub.commutative", "claims[1]", "needs a correction"),
        (lambda t: t.replace("method: numeric", "method: vibes"), "method: vibes", "claims[1].method", "Input should be"),
        (lambda t: t.replace("verdict: holds", "verdict: true"), "verdict: true", "claims[0].verdict", "Input should be"),
    ],
)
def test_schema_errors_name_file_line_field(tmp_path, mutate, needle, field, message):
    text = mutate(entry_yaml())
    root = make_repo(tmp_path, entry=text)
    res = run_check(root)
    [p] = [p for p in res.problems if p.field == field]
    assert p.path == "qa/maths/adding.yaml"
    assert p.line == lines_of(text, needle)
    assert message in p.message
    assert str(p).startswith(f"qa/maths/adding.yaml:{p.line}: {field}: ")


def test_citation_needs_locator(tmp_path):
    claims = """\
    - id: add.paper
      verdict: holds
      method: citation
      cite: {title: "Peano 1889"}
      statement: {zh: "见论文", en: "see the paper"}
    """
    text = entry_yaml(claims=claims).replace("catalog: t.sum\n", "")
    res = run_check(make_repo(tmp_path, entry=text, verifier="\n"))
    [p] = res.problems
    assert p.field == "claims[0]" and "locator" in p.message and p.line == lines_of(text, "- id: add.paper")


def test_tab_indentation_is_one_line(tmp_path):
    text = entry_yaml().replace("  short:", "\tshort:")
    res = run_check(make_repo(tmp_path, entry=text))
    [p] = res.problems
    assert p.field == "(yaml)" and "tab" in p.message and "\n" not in p.message
    assert p.line == lines_of(text, "\tshort:")


def test_duplicate_key_is_one_line(tmp_path):
    text = entry_yaml().replace("difficulty: 1", "difficulty: 1\ndifficulty: 2")
    [p] = run_check(make_repo(tmp_path, entry=text)).problems
    assert p.line == lines_of(text, "difficulty: 2") and "duplicate key 'difficulty'" in p.message
    assert f"first on line {lines_of(text, 'difficulty: 1')}" in p.message


def test_not_a_mapping(tmp_path):
    [p] = run_check(make_repo(tmp_path, entry="- just\n- a list\n", verifier="\n")).problems
    assert p.line == 1 and "mapping" in p.message


def test_duplicate_entry_id(tmp_path):
    root = make_repo(tmp_path)
    (root / "qa" / "other").mkdir()
    (root / "qa" / "other" / "adding.yaml").write_text(entry_yaml())
    probs = run_check(root).problems
    dup = [p for p in probs if "duplicate entry id" in p.message]
    assert len(dup) == 1 and dup[0].path == "qa/other/adding.yaml" and dup[0].line == 2


def test_file_name_must_match_id(tmp_path):
    text = entry_yaml("summing")
    [p] = run_check(make_repo(tmp_path, entry=text)).problems
    assert p.field == "id" and "summing.yaml" in p.message


def test_duplicate_claim_id_across_entries(tmp_path):
    root = make_repo(tmp_path)
    claims = """\
    - id: add.commutative
      verdict: holds
      method: property
      statement: {zh: "又一次", en: "again"}
    """
    text = entry_yaml("again", claims=claims).replace("catalog: t.sum\n", "")
    (root / "qa" / "maths" / "again.yaml").write_text(text)
    [p] = run_check(root).problems
    assert p.path == "qa/maths/again.yaml" and p.line == lines_of(text, "- id: add.commutative")
    assert "duplicate claim id 'add.commutative'" in p.message and "qa/maths/adding.yaml" in p.message


def test_claim_without_verifier_and_marker_without_claim(tmp_path):
    verifier = textwrap.dedent("""\
        import pytest

        @pytest.mark.claim("add.commutative")
        def test_a():
            assert 1 + 2 == 2 + 1

        @pytest.mark.claim("add.associative")
        def test_b():
            assert True
        """)
    root = make_repo(tmp_path, verifier=verifier)
    probs = run_check(root).problems
    no_verifier = [p for p in probs if "has no verifier" in p.message]
    assert [(p.path, p.line) for p in no_verifier] == [
        ("qa/maths/adding.yaml", lines_of(entry_yaml(), "- id: sub.commutative"))]
    orphan = [p for p in probs if "marker names no claim" in p.message]
    assert [(p.path, p.line) for p in orphan] == [("verifiers/test_arith.py", lines_of(verifier, "add.associative"))]


def test_opinion_and_citation_need_no_verifier(tmp_path):
    claims = """\
    - id: style.opinion
      verdict: opinion
      method: empirical
      statement: {zh: "喜欢加法", en: "addition is nicer"}
      correction: {zh: "个人偏好", en: "a matter of taste"}
    - id: style.cited
      verdict: holds
      method: citation
      cite: {title: "Peano 1889", locator: "§1"}
      statement: {zh: "见论文", en: "see the paper"}
    """
    text = entry_yaml(claims=claims).replace("catalog: t.sum\n", "")
    assert run_check(make_repo(tmp_path, entry=text, verifier="\n")).problems == []


def test_missing_implementation_follow_up_and_symbol(tmp_path):
    extra = "implementations: [impls/arith.py::add, impls/arith.py::mul, impls/nope.py]\nfollow_ups: [adding, subtracting]\n"
    text = entry_yaml(extra=extra)
    probs = run_check(make_repo(tmp_path, entry=text)).problems
    msgs = {(p.field, p.message) for p in probs}
    line = lines_of(text, "implementations:")
    assert ("implementations[1]", "impls/arith.py defines no 'mul'") in msgs
    assert ("implementations[2]", "no such file: impls/nope.py") in msgs
    assert ("follow_ups[1]", "no entry with id 'subtracting'") in msgs
    assert ("follow_ups[0]", "an entry cannot follow itself") in msgs
    assert all(p.line == line or p.field.startswith("follow_ups") for p in probs)


def test_catalog_unknown_and_settled_twice_and_unsettled(tmp_path):
    root = make_repo(tmp_path)
    claims = """\
    - id: add.again
      catalog: t-01
      verdict: holds
      method: property
      statement: {zh: "又一次", en: "again"}
    - id: add.ghost
      catalog: t-99
      verdict: holds
      method: property
      statement: {zh: "无", en: "none"}
    """
    text = entry_yaml("again", claims=claims).replace("catalog: t.sum\n", "catalog: t.nope\n")
    (root / "qa" / "maths" / "again.yaml").write_text(text)
    (root / "verifiers" / "test_more.py").write_text(
        "import pytest\n\n@pytest.mark.claim('add.again', 'add.ghost')\ndef test_x():\n    assert 2 + 2 == 4\n")
    probs = [p for p in run_check(root).problems if p.path == "qa/maths/again.yaml"]
    by_msg = {p.message: p.line for p in probs}
    assert by_msg["catalog id 't-99' is not in the catalog"] == lines_of(text, "catalog: t-99")
    twice = [m for m in by_msg if "settled twice" in m]
    assert len(twice) == 1 and by_msg[twice[0]] in (lines_of(text, "catalog: t-01"),)
    assert by_msg["catalog question 't.nope' is not in the catalog"] == lines_of(text, "catalog: t.nope")


def test_unsettled_catalog_claim(tmp_path):
    claims = """\
    - id: add.commutative
      catalog: t-01
      verdict: holds
      method: property
      statement: {zh: "加法交换律成立", en: "addition commutes"}
    """
    text = entry_yaml(claims=claims)
    verifier = "import pytest\n\n@pytest.mark.claim('add.commutative')\ndef test_a():\n    assert 1 + 2 == 2 + 1\n"
    [p] = run_check(make_repo(tmp_path, entry=text, verifier=verifier)).problems
    assert p.field == "catalog" and "t-02" in p.message and p.line == lines_of(text, "catalog: t.sum")


def test_cli_reports_all_problems_without_traceback(tmp_path):
    root = make_repo(tmp_path, entry=entry_yaml().replace("difficulty: 1", "difficulty: 9\nwho: x"))
    (root / "qa" / "maths" / "broken.yaml").write_text("id: broken\n\tnope: 1\n")
    env = {"MIANJING_ROOT": str(root), "MIANJING_CATALOG": str(tmp_path / "shared/catalog/claims.yaml"),
           "PATH": "/usr/bin:/bin"}
    proc = subprocess.run([sys.executable, "-m", "mianjing.cli", "check"], env=env, capture_output=True, text=True)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stdout + proc.stderr
    out = proc.stdout.splitlines()
    assert "qa/maths/adding.yaml:5: difficulty: Input should be less than or equal to 3" in out
    assert "qa/maths/adding.yaml:6: who: unknown field" in out
    assert any(line.startswith("qa/maths/broken.yaml:2: (yaml): ") for line in out)
    assert out[-1].startswith("3 problem(s)")


def test_missing_figure_file_or_function(tmp_path):
    extra = textwrap.dedent("""\
        figures:
          - ref: figures/arith.py::sum_plot
            caption: {zh: "和", en: "sums"}
          - ref: figures/arith.py::nope
            caption: {zh: "无", en: "none"}
          - ref: figures/gone.py::plot
            caption: {zh: "无", en: "none"}
        """)
    text = entry_yaml(extra=extra)
    root = make_repo(tmp_path, entry=text)
    (root / "figures").mkdir()
    (root / "figures" / "arith.py").write_text("def sum_plot(lang):\n    return None\n")
    probs = {(p.field, p.line, p.message) for p in run_check(root).problems}
    assert probs == {
        ("figures[1].ref", lines_of(text, "figures/arith.py::nope"), "figures/arith.py defines no 'nope'"),
        ("figures[2].ref", lines_of(text, "figures/gone.py"), "no such file: figures/gone.py"),
    }


VERIFIER_QUOTE = """\
import pytest
import impls.arith as A


@pytest.mark.claim("add.commutative")
def test_add(evidence):
    evidence.quote("pairs that commute", quoted=0.25, measured=A.add(0.125, 0.125), digits=2)
    for n, q in ((1, 1.5), (2, 2.5)):
        evidence.quote(f"{n} + 0.5", quoted=q, measured=A.add(n, 0.5), digits=1)


@pytest.mark.claim("sub.commutative")
def test_sub(evidence):
    assert A.sub(1, 0) != A.sub(0, 1)
"""


def _figures_entry(holds_en: str, holds_zh: str, refuted_en: str = "subtraction commutes 0.7 of the time") -> str:
    return entry_yaml(claims=f"""\
    - id: add.commutative
      catalog: t-01
      verdict: holds
      method: property
      statement: {{zh: "{holds_zh}", en: "{holds_en}"}}
    - id: sub.commutative
      catalog: t-02
      verdict: refuted
      method: numeric
      statement: {{zh: "减法交换 0.7", en: "{refuted_en}"}}
      correction: {{zh: "a−b = −(b−a)", en: "a−b = −(b−a)"}}
    """)


def test_quoted_figures_must_be_pinned_and_bilingual(tmp_path):
    # pinned: 25% (quoted as 0.25), 1.5 and 2.5 (loop over a literal table); the refuted statement's 0.7 is the
    # misconception's figure and needs no pin
    ok = _figures_entry("25% of pairs; 1.5 and 2.5× by example", "25% 的对；例子 1.5 和 2.5 倍")
    root = make_repo(tmp_path / "a", entry=ok, verifier=VERIFIER_QUOTE)
    assert run_check(root).problems == []
    # an unpinned figure, and a figure only one language quotes
    bad = _figures_entry("25% of pairs; 1.5, 2.5 and 3.75 by example", "25% 的对；例子 1.5 和 2.5，§3.1")
    text_root = make_repo(tmp_path / "b", entry=bad, verifier=VERIFIER_QUOTE)
    msgs = sorted(p.message for p in run_check(text_root).problems)
    assert len(msgs) == 2, msgs
    assert "add.commutative quotes 3.75 but no verifier of it asserts it with evidence.quote" in msgs[0]
    assert "zh and en texts quote different figures (en only: 3.75; zh only: none)" in msgs[1]


def _facts_entry(holds_facts: str, refuted_facts: str) -> str:
    return entry_yaml(claims=f"""\
    - id: add.commutative
      catalog: t-01
      verdict: holds
      method: property
      statement: {{zh: "加法交换", en: "addition commutes"}}
      facts: {holds_facts}
    - id: sub.commutative
      catalog: t-02
      verdict: refuted
      method: numeric
      statement: {{zh: "减法交换", en: "subtraction commutes"}}
      correction: {{zh: "a−b = −(b−a)", en: "a−b = −(b−a)"}}
      facts: {refuted_facts}
    """)


def test_a_fact_with_two_values_is_a_contradiction(tmp_path):
    # the simplest contradiction: a recommendation (holds) relying on what a refuted claim refutes
    text = _facts_entry("{arith.sub-commutes: true}", "{arith.sub-commutes: false}")
    res = run_check(make_repo(tmp_path / "a", entry=text))
    [p] = res.problems
    assert p.field == "claims.facts" and p.line == lines_of(text, "facts: {arith.sub-commutes: false}")
    assert "sub.commutative says arith.sub-commutes = False, but add.commutative" in p.message
    # numbers agree at the coarser precision: 0.25 and 0.250 are one value, 0.25 and 0.26 are two
    verifier = VERIFIER_QUOTE.replace(
        "    assert A.sub(1, 0) != A.sub(0, 1)",
        "    assert A.sub(1, 0) != A.sub(0, 1)\n"
        "    evidence.quote('share', quoted=0.25, measured=A.sub(0.5, 0.25), digits=2)\n"
        "    evidence.quote('share', quoted=0.26, measured=A.sub(0.51, 0.25), digits=2)")
    same = _facts_entry("{arith.share: 0.25}", "{arith.share: 0.250}")
    assert run_check(make_repo(tmp_path / "b", entry=same, verifier=verifier)).problems == []
    differ = _facts_entry("{arith.share: 0.25}", "{arith.share: 0.26}")
    [p] = run_check(make_repo(tmp_path / "c", entry=differ, verifier=verifier)).problems
    assert "sub.commutative says arith.share = 0.26, but add.commutative" in p.message


def test_a_numeric_fact_must_be_measured(tmp_path):
    # add.commutative's verifier quotes 0.25: that fact is pinned; 0.3 is not
    text = _facts_entry("{arith.share: 0.3}", "{}")
    [p] = run_check(make_repo(tmp_path, entry=text, verifier=VERIFIER_QUOTE)).problems
    assert "add.commutative states arith.share = 0.3 but no verifier of it asserts it" in p.message
    assert run_check(make_repo(tmp_path / "ok", entry=_facts_entry("{arith.share: 0.25}", "{}"),
                               verifier=VERIFIER_QUOTE)).problems == []
def test_every_topic_company_and_team_needs_a_name(tmp_path):
    """The site shows names, not slugs: a topic (or its area), company or team missing from qa/names.yaml fails."""
    text = (entry_yaml().replace("topic: maths/arith", "topic: maths/algebra")
            .replace("difficulty: 1", "asked_at: [{company: Baidu, team: AI Infra}, {company: Acme}, {team: Skunkworks}]\ndifficulty: 1"))
    root = make_repo(tmp_path, entry=text)
    problems = {p.field: p for p in run_check(root).problems}
    assert set(problems) == {"topic", "asked_at[1].company", "asked_at[2].team"}, problems
    assert "'maths/algebra' has no name in qa/names.yaml" in problems["topic"].message
    assert problems["topic"].line == lines_of(text, "topic:")
    assert "'Acme'" in problems["asked_at[1].company"].message and "companies:" in problems["asked_at[1].company"].message
    assert "'Skunkworks'" in problems["asked_at[2].team"].message
    # a new area needs its own name too
    (root / "qa" / "maths" / "adding.yaml").write_text(entry_yaml().replace("topic: maths/arith", "topic: physics/arith"))
    msgs = [p.message for p in run_check(root).problems]
    assert any("'physics' has no name" in m for m in msgs) and any("'physics/arith' has no name" in m for m in msgs)


def test_a_bad_names_file_is_one_line(tmp_path):
    root = make_repo(tmp_path)
    (root / "qa" / "names.yaml").write_text("topics:\n  maths: {zh: 数学}\n")
    probs = run_check(root).problems
    assert any(p.path == "qa/names.yaml" and p.line == 2 and "en" in p.field for p in probs), probs


def test_the_real_names_table_covers_the_agreed_slugs():
    """The topic slugs agreed for new entries (inference, numerics, architecture, parallelism, kernels) have names."""
    from pathlib import Path

    from mianjing.loader import load

    repo = Path(__file__).resolve().parents[1]
    names = load(repo).kb.names
    agreed = ["inference/attention", "inference/kv-cache", "inference/serving", "inference/decoding",
              "numerics/precision", "numerics/quantization", "arch/attention", "arch/moe", "arch/position-norm",
              "parallel/tensor", "parallel/pipeline", "parallel/sequence", "parallel/memory", "scale/kernels"]
    for slug in agreed:
        for s in (slug.split("/")[0], slug):
            assert s in names.topics, s
            assert names.topic(s, "zh") != s and names.topic(s, "en") != s, s


def test_what_counts_as_a_quoted_figure():
    from mianjing.quoted import figures

    assert figures("Llama-3.1-8B at 4.29 GB, GPT-3.5 is 2× slower") == [4.29, 2.0]
    assert figures("§3.1, 10^{-3}, x_{0.5}, 44%, (-0.5) and 3 倍") == [44.0, 0.5, 3.0]


# --------------------------------------------------------------------------- answers (issue 23)


def test_spoken_length_counts_words_characters_and_formulas():
    from mianjing.check import spoken_length

    assert spoken_length("The ratio r corrects the shift.", "en") == 6
    assert spoken_length("用比值 r 修正", "zh") == 6  # five characters and one word
    assert spoken_length("clip at $1+\\epsilon$ and $\\frac{a}{b}$", "en") == 2 + 2 + 1 + 3  # numbers, names, spoken symbols
    assert spoken_length("`ratio = exp(x)` works", "en") == 4


@pytest.mark.parametrize("lang, text, n", [("en", " ".join(["word"] * 71), 71), ("zh", "字" * 201, 201)])
def test_a_short_answer_longer_than_30_seconds_is_a_problem(tmp_path, lang, text, n):
    other = "zh" if lang == "en" else "en"
    entry = entry_yaml().replace('short: {zh: "按位加", en: "digit by digit"}',
                                 f'short: {{{lang}: "{text}", {other}: "ok"}}')
    res = run_check(make_repo(tmp_path, entry=entry))
    [p] = res.problems
    assert p.field == f"answer.short.{lang}" and p.line == lines_of(entry, "short:")
    assert f"{n} {'words' if lang == 'en' else 'characters'} spoken" in p.message


def test_a_short_answer_at_the_limit_passes(tmp_path):
    entry = entry_yaml().replace('short: {zh: "按位加", en: "digit by digit"}',
                                 'short: {zh: "%s", en: "%s"}' % ("字" * 200, " ".join(["word"] * 70)))
    assert run_check(make_repo(tmp_path, entry=entry)).problems == []


def test_full_answers_whose_headings_do_not_pair_up(tmp_path):
    entry = entry_yaml().replace('full: {zh: "$a+b$", en: "$a+b$"}',
                                 'full: {zh: "## 一\\n\\n正文\\n\\n## 二\\n\\n正文", en: "## One\\n\\nText"}')
    [p] = run_check(make_repo(tmp_path, entry=entry)).problems
    assert p.field == "answer.full" and "2 headings" in p.message and "en one 1" in p.message
