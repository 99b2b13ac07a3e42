"""Interface strings of the generated pages, in both languages (Chinese is the default).

Names of topics, companies and teams are data, not interface: they live in ``qa/names.yaml``.
"""

from __future__ import annotations

LANGS = ("zh", "en")

_T: dict[str, tuple[str, str]] = {
    # entry pages
    "short": ("简答", "Short answer"),
    "full": ("详解", "Full answer"),
    "figures": ("图示", "Figures"),
    "figure_n": ("图 {n}", "Figure {n}"),
    "figure_open": ("查看原图", "Full size"),
    "figure_note": ("图由 `{ref}` 在构建时调用仓库里的代码画出。", "Drawn at build time by `{ref}`, from the code in this repository."),
    "impl": ("参考实现", "Reference implementation"),
    "impl_note": ("以下代码在构建时从仓库中的文件直接读取，与验证器运行的是同一份代码。",
                  "Read from the repository at build time: the same code the verifiers run."),
    "key_points": ("面试官关注的要点", "What the interviewer listens for"),
    "claims": ("论断与验证", "Claims and their checks"),
    "claims_summary": ("{n} 个论断：", "{n} claims: "),
    "benchmarks": ("基准测试", "Benchmarks"),
    "follow_ups": ("追问", "Follow-up questions"),
    "references": ("参考文献", "References"),
    "number": ("第 {n} 题", "No. {n}"),
    "topic": ("主题", "Topic"),
    "difficulty": ("难度", "Difficulty"),
    "asked_at": ("出现于", "Asked at"),
    "kind": ("类型", "Kind"),
    "round": ("第 {n} 轮", "round {n}"),
    "correction": ("实际上", "In fact"),
    "conditions": ("成立的条件", "Only when"),
    "whose": ("谁的观点，为什么", "Whose view, and why"),
    "method": ("方法", "Method"),
    "details": ("证据、运行环境与验证代码", "Evidence, environment and verifier source"),
    "evidence": ("验证器记录的证据", "Evidence recorded by the verifier"),
    "counterexample": ("反例", "Counterexample"),
    "no_evidence": ("验证器没有记录数据。", "The verifier recorded no figures."),
    "environment": ("运行环境", "Environment"),
    "verifier": ("验证代码", "Verifier source"),
    "open_file": ("打开文件", "open the file"),
    "impl_loading": ("滚动到这里时载入代码；标题链接到完整的文件页。", "The code loads as you scroll to it; the title links to the whole file."),
    "show_code": ("展开后加载代码。", "The code loads when this section is opened."),
    "tests": ("测试", "Tests"),
    "no_verifier_found": ("没有找到验证这个论断的测试。", "No test names this claim."),
    "stale_note": ("代码在这次运行之后改过：以下结果已过期，请重新运行 `mianjing verify`。",
                   "The code changed after this run: the results below are out of date; run `mianjing verify` again."),
    "not_run_note": ("这个论断还没有被验证过：运行 `mianjing verify` 生成 `build/verification.json`。",
                     "This claim has not been verified yet: run `mianjing verify` to write `build/verification.json`."),
    "failed_note": ("验证失败：这个论断目前不被代码支持。", "Verification failed: the code does not currently support this claim."),
    "cite_source": ("出处：", "Source:"),
    "quoted_head": ("论断里的数字，和代码测得的数字", "The figures the claim quotes, and what the code measures"),
    "quoted_says": ("论断原文", "Where the claim says it"),
    "quoted_measured": ("代码测得", "Measured"),
    "quoted_precision": ("断言精度", "Asserted"),
    "prec_digits": ("保留 {n} 位小数", "to {n} decimal places"),
    "prec_digit": ("保留 1 位小数", "to 1 decimal place"),
    "prec_tens": ("精确到 {x}", "to the nearest {x}"),
    "prec_rel": ("相对误差 ≤ {x}", "within {x} (relative)"),
    "prec_abs": ("绝对误差 ≤ {x}", "within ±{x}"),
    "the_claim": ("说法", "The claim"),
    "claim_link": ("这个论断的链接", "Link to this claim"),
    "machine": ("机器", "Machine"),
    "date": ("日期", "Date"),
    "command": ("命令", "Command"),
    "notes": ("说明", "Notes"),
    "source_at": ("源码位置", "Source"),
    # claim headlines: verdict, then how it is settled
    "hl_opinion": ("一种判断或习惯，不是可以检验的事实", "A judgement or a habit, not a checkable fact"),
    "hl_citation": ("依据文献：这是论文报告的结果，没有代码能离线检验它", "From the literature: what a paper reports, which no code can check offline"),
    "hl_passed": ("已由代码验证：{how}", "Checked by code: {how}"),
    "hl_passed_refuted": ("代码跑出了反例：{how}", "Code runs a counterexample: {how}"),
    "hl_failed": ("验证失败：代码目前不支持这个结论", "Its check fails: the code does not support this now"),
    "hl_stale": ("验证结果已过期：代码在上次运行后改过", "Its check is out of date: the code changed after the last run"),
    "hl_not-run": ("尚未验证：验证器还没有运行", "Not checked yet: the verifiers have not run"),
    "hl_skipped": ("验证被跳过（{why}）", "Its check was skipped ({why})"),
    "hl_sep": ("；", "; "),
    "how_symbolic": ("符号推导", "a symbolic derivation"),
    "how_property": ("在生成的输入上检验性质", "a property tested on generated inputs"),
    "how_numeric": ("数值计算", "a numeric computation"),
    "how_empirical": ("实验测量", "an experiment that measures it"),
    # lists and indexes
    "questions": ("题目", "Questions"),
    "indexes": ("索引", "Indexes"),
    "by_topic": ("按主题", "By topic"),
    "by_company": ("按公司与团队", "By company and team"),
    "by_difficulty": ("按难度", "By difficulty"),
    "misconceptions": ("常见误区", "Common misconceptions"),
    "report": ("验证报告", "Verification report"),
    "guides": ("使用指南", "Guides"),
    "home": ("首页", "Home"),
    "all_questions": ("全部题目", "All questions"),
    "col_no": ("#", "#"),
    "col_question": ("题目", "Question"),
    "col_topic": ("主题", "Topic"),
    "col_difficulty": ("难度", "Difficulty"),
    "col_company": ("公司", "Company"),
    "col_team": ("团队", "Team"),
    "col_round": ("轮次", "Round"),
    "col_verdicts": ("论断", "Claims"),
    "filter_all": ("全部", "all"),
    "filter_any_area": ("全部领域", "every area"),
    "filter_reset": ("清除筛选", "Clear filters"),
    "filter_shown": ("显示 {n} / {total} 道题", "{n} of {total} questions shown"),
    "filter_none": ("没有符合所有条件的题目。", "No question matches every filter."),
    "filter_has_refuted": ("含错误说法", "has a refuted claim"),
    "no_company": ("未注明公司", "Company not named"),
    "no_team": ("未注明团队", "Team not named"),
    "teams": ("按团队", "By team"),
    "companies": ("按公司", "By company"),
    "topic_intro": ("按主题浏览所有题目。", "Every question, by topic."),
    "company_intro": ("按公司和团队浏览（来自面经记录）。同一道题在不同公司或轮次被问到时，会出现在每一处。",
                      "Every question by company and by team (from interview reports). A question asked at several places appears under each."),
    "difficulty_intro": ("按难度浏览：1 热身，2 核心，3 深入。", "By difficulty: 1 warm-up, 2 core, 3 deep."),
    "none_yet": ("目前还没有。", "None yet."),
    # misconceptions
    "misc_intro": ("知识库中所有被判定为**错误**或**有条件成立**的论断及其更正，按主题分组。面试官常用这些说法来试探候选人。先看下面的速查表，再按主题展开。",
                   "Every claim in the knowledge base judged **refuted** or **qualified**, with its correction, grouped by topic. Interviewers like to probe with exactly these statements. The lookup table comes first; the cards follow by topic."),
    "lookup": ("速查", "Lookup"),
    "lookup_claim": ("说法", "Statement"),
    "lookup_verdict": ("结论", "Verdict"),
    "lookup_where": ("出处题目", "Question"),
    # report
    "report_intro": ("知识库中每个论断的验证结果，按题目分组。绿色只表示代码与报告一致时的通过；代码改动后的旧结果显示为“已过期”。可以按结论、方法和结果筛选。",
                     "The outcome of every claim in the knowledge base, grouped by question. Green only means a pass for the code as it is now; a result from before a code change shows as stale. Filter by verdict, method and outcome."),
    "no_report": ("还没有验证报告（`build/verification.json` 不存在）：所有论断都显示为“未运行”。运行 `mianjing verify` 生成它。",
                  "There is no verification report yet (`build/verification.json` is missing): every claim shows as not run. Run `mianjing verify` to write it."),
    "bad_report": ("验证报告无法读取：", "The verification report cannot be read: "),
    "report_created": ("报告生成于", "Report written"),
    "summary": ("汇总", "Summary"),
    "by_entry": ("按题目", "By question"),
    "entry": ("题目", "Question"),
    "claim": ("论断", "Claim"),
    "verdict": ("结论", "Verdict"),
    "outcome": ("验证结果", "Outcome"),
    "duration": ("耗时", "Duration"),
    "env_key": ("项目", "Item"),
    "env_value": ("值", "Value"),
    "yes": ("是", "yes"),
    "no": ("否", "no"),
    # home
    "kb_summary": ("当前知识库：{entries} 道题，{claims} 个论断，其中 {verified} 个已由代码验证；{refuted} 个常见错误说法，{runnable} 个附有可运行的反例，其余 {cited} 个依据文献。",
                   "The knowledge base holds {entries} questions and {claims} claims, {verified} of them verified by code; {refuted} common wrong statements, {runnable} of them with a counterexample that runs and {cited} settled by citation."),
}

ENV_KEYS = {
    "torch": ("torch", "torch"),
    "device": ("设备", "device"),
    "cuda": ("CUDA", "CUDA"),
    "gpu": ("GPU", "GPU"),
    "python": ("Python", "Python"),
    "platform": ("平台", "platform"),
    "hypothesis": ("hypothesis", "hypothesis"),
    "date": ("日期", "date"),
    "commit": ("提交", "commit"),
    "dirty": ("有未提交改动", "uncommitted changes"),
}

VERDICT = {
    "holds": ("成立", "true"),
    "qualified": ("有条件成立", "true only under conditions"),
    "refuted": ("错误说法", "misconception"),
    "opinion": ("观点", "opinion"),
}
VERDICT_MARK = {"holds": "✓", "qualified": "◐", "refuted": "✗", "opinion": "◇"}  # so that colour is never the only cue

OUTCOME = {
    "passed": ("已验证", "verified"),
    "failed": ("验证失败", "failed"),
    "stale": ("已过期", "stale"),
    "not-run": ("未运行", "not run"),
    "skipped": ("已跳过", "skipped"),
    "citation": ("仅文献", "citation only"),
    "opinion": ("观点", "opinion"),
}

METHOD = {
    "symbolic": ("符号推导", "symbolic"),
    "property": ("性质测试", "property"),
    "numeric": ("数值检验", "numeric"),
    "empirical": ("实验", "empirical"),
    "citation": ("文献", "citation"),
}

KIND = {"question": ("问答", "question"), "coding": ("手写代码", "coding"), "follow-up": ("追问", "follow-up")}

DIFFICULTY = {1: ("热身", "warm-up"), 2: ("核心", "core"), 3: ("深入", "deep")}


def t(key: str, lang: str, **fmt) -> str:
    zh, en = _T[key]
    s = zh if lang == "zh" else en
    return s.format(**fmt) if fmt else s


def pick(table: dict, key, lang: str) -> str:
    zh, en = table[key]
    return zh if lang == "zh" else en
