"""Interface strings of the generated pages, in both languages (Chinese is the default)."""

from __future__ import annotations

LANGS = ("zh", "en")

_T: dict[str, tuple[str, str]] = {
    "short": ("简答", "Short answer"),
    "full": ("详解", "Full answer"),
    "impl": ("参考实现", "Reference implementation"),
    "impl_note": ("以下代码在构建时从仓库中的文件直接读取，与验证器运行的是同一份代码。",
                  "Read from the repository at build time: the same code the verifiers run."),
    "key_points": ("面试官关注的要点", "What the interviewer listens for"),
    "claims": ("论断与验证", "Claims and their checks"),
    "benchmarks": ("基准测试", "Benchmarks"),
    "follow_ups": ("追问", "Follow-up questions"),
    "references": ("参考文献", "References"),
    "topic": ("主题", "Topic"),
    "difficulty": ("难度", "Difficulty"),
    "asked_at": ("出现于", "Asked at"),
    "kind": ("类型", "Kind"),
    "round": ("第 {n} 轮", "round {n}"),
    "correction": ("更正", "Correction"),
    "conditions": ("成立条件", "Conditions"),
    "whose": ("谁的观点，为什么", "Whose view, and why"),
    "method": ("方法", "Method"),
    "details": ("证据、运行环境与验证代码", "Evidence, environment and verifier source"),
    "evidence": ("验证器记录的证据", "Evidence recorded by the verifier"),
    "counterexample": ("反例", "Counterexample"),
    "no_evidence": ("验证器没有记录数据。", "The verifier recorded no figures."),
    "environment": ("运行环境", "Environment"),
    "verifier": ("验证代码", "Verifier source"),
    "tests": ("测试", "Tests"),
    "no_verifier_found": ("没有找到验证这个论断的测试。", "No test names this claim."),
    "stale_note": ("代码在这次运行之后改过：以下结果已过期，请重新运行 `mianjing verify`。",
                   "The code changed after this run: the results below are out of date; run `mianjing verify` again."),
    "not_run_note": ("这个论断还没有被验证过：运行 `mianjing verify` 生成 `build/verification.json`。",
                     "This claim has not been verified yet: run `mianjing verify` to write `build/verification.json`."),
    "failed_note": ("验证失败：这个论断目前不被代码支持。", "Verification failed: the code does not currently support this claim."),
    "cite_note": ("这是论文中的事实，无法离线执行验证；出处：", "A fact from a paper that no code can check offline; source:"),
    "opinion_note": ("这是观点或习惯，不是可以验证的事实。", "A judgement or habit, not a checkable fact."),
    "machine": ("机器", "Machine"),
    "date": ("日期", "Date"),
    "command": ("命令", "Command"),
    "notes": ("说明", "Notes"),
    "entry": ("题目", "Question"),
    "claim": ("论断", "Claim"),
    "verdict": ("结论", "Verdict"),
    "outcome": ("验证结果", "Outcome"),
    "duration": ("耗时", "Duration"),
    "statement": ("表述", "Statement"),
    "questions": ("题目", "Questions"),
    "indexes": ("索引", "Indexes"),
    "by_topic": ("按主题", "By topic"),
    "by_company": ("按公司与轮次", "By company and round"),
    "by_difficulty": ("按难度", "By difficulty"),
    "misconceptions": ("常见误区", "Common misconceptions"),
    "report": ("验证报告", "Verification report"),
    "guides": ("使用指南", "Guides"),
    "home": ("首页", "Home"),
    "no_report": ("还没有验证报告（`build/verification.json` 不存在）：所有论断都显示为“未运行”。运行 `mianjing verify` 生成它。",
                  "There is no verification report yet (`build/verification.json` is missing): every claim shows as not run. Run `mianjing verify` to write it."),
    "bad_report": ("验证报告无法读取：", "The verification report cannot be read: "),
    "report_created": ("报告生成于", "Report written"),
    "summary": ("汇总", "Summary"),
    "misc_intro": ("下面列出知识库中所有被判定为**错误**或**有条件成立**的论断及其更正。面试官常用这些说法来试探候选人。",
                   "Every claim in the knowledge base judged **refuted** or **qualified**, with its correction. Interviewers like to probe with exactly these statements."),
    "report_intro": ("知识库中每个论断的验证结果。绿色只表示代码与报告一致时的通过；代码改动后的旧结果显示为“已过期”。",
                     "The outcome of every claim in the knowledge base. Green only means a pass for the code as it is now; a result from before a code change shows as stale."),
    "topic_intro": ("按主题浏览所有题目。", "Every question, by topic."),
    "company_intro": ("按公司与面试轮次浏览（来自面经记录）。", "Every question by company and interview round (from interview reports)."),
    "difficulty_intro": ("按难度浏览：1 热身，2 核心，3 深入。", "By difficulty: 1 warm-up, 2 core, 3 deep."),
    "none_yet": ("目前还没有。", "None yet."),
    "all_claims": ("全部论断", "All claims"),
    "kb_summary": ("当前知识库：{entries} 道题，{claims} 个论断（{verified} 个已通过验证，{refuted} 个错误说法附反例）。",
                   "The knowledge base now holds {entries} questions and {claims} claims ({verified} verified, {refuted} refuted statements with counterexamples)."),
    "env_key": ("项目", "Item"),
    "env_value": ("值", "Value"),
    "source_at": ("源码位置", "Source"),
}

VERDICT = {
    "holds": ("成立", "holds"),
    "qualified": ("有条件成立", "qualified"),
    "refuted": ("错误", "refuted"),
    "opinion": ("观点", "opinion"),
}

OUTCOME = {
    "passed": ("已验证", "verified"),
    "failed": ("验证失败", "failed"),
    "stale": ("已过期", "stale"),
    "not-run": ("未运行", "not run"),
    "skipped": ("已跳过", "skipped"),
    "citation": ("文献", "citation"),
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
