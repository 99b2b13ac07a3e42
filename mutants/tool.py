"""Mutants of the tool's own code in src/mianjing -- calculators, the incremental verify, the import
graph, the figures' font (their tests are in tests/).

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

ZERO = "src/mianjing/calculators/zero_cli.py"
VERIFY = "src/mianjing/verify.py"
IMPORTS = "src/mianjing/imports.py"
FIGURES = "src/mianjing/site/figures.py"
TRAIN = "src/mianjing/calculators/train_cost_cli.py"
PLAN = "src/mianjing/calculators/plan_cli.py"

MUTANTS = [
    M("zero-cli.ring-column-in-elements", ZERO, "_fmt_gb(r.ring_bytes_sent_per_rank / 1e9),", "_fmt_gb(r.comm_elements_per_rank / 1e9),"),
    M("zero-cli.vs-dp-inverted", ZERO, 'f"{r.reduction_vs_dp:.3g}×",', 'f"{1 / r.reduction_vs_dp:.3g}×",'),
    M("zero-cli.optimizer-bytes-ignored", ZERO, "rows = stage_table(float(params), int(gpus), k=optimizer_bytes)", "rows = stage_table(float(params), int(gpus))"),
    M("zero-cli.accepts-zero-gpus", ZERO, "or gpus < 1:", "or gpus < 0:"),
    M("imports.closure-one-level", IMPORTS, "        todo.extend(graph.get(mod, ()))\n", "",
      why="only the modules a file imports directly, not what they import"),
    M("verify.reuses-a-failure", VERIFY, 'rec.get("outcome") in ("passed", "skipped"))',
      'rec.get("outcome") in ("passed", "skipped", "failed"))', why="a failed claim is never run again"),
    M("verify.key-ignores-claim-text", VERIFY, 'text = json.dumps({"entry": entry.id, "claim": claim.model_dump(mode="json")}',
      'text = json.dumps({"entry": entry.id}'),
    M("verify.key-ignores-settings", VERIFY, "common = json.dumps(setting(device), sort_keys=True)", 'common = ""',
      why="versions, device and hypothesis settings left out of the key"),
    M("verify.key-ignores-conftest", VERIFY, "                    start.add(module_name((folder / \"conftest.py\")",
      "                    (module_name((folder / \"conftest.py\")"),
    M("verify.key-ignores-data-files", VERIFY, "for f in (*code, *data_files(root, code, memo))}", "for f in code}"),
    M("figures.font-not-registered", FIGURES, "    fm.addfont(str(path))  # clears the font lookup cache too",
      "    pass", why="the bundled font is found but never given to matplotlib"),
    M("figures.no-claims", FIGURES, "        if claims is not None and not _claim(claims, file):", "        if False:",
      why="every drawing process draws every missing figure"),
    M("train-cost-cli.mfu-as-percent", TRAIN, "    if not 0 < u <= 1:", "    if not 0 < u <= 100:"),
    M("train-cost-cli.seq-ignored", TRAIN, "    t = cfg.context if seq is None else _number(\"--seq\", seq, integer=True)", "    t = cfg.context"),
    M("train-cost-cli.rule-of-thumb-with-attention", TRAIN, "    dense_only = c.seconds * c.dense_flops_per_token / (c.dense_flops_per_token + c.attention_flops_per_token)", "    dense_only = c.seconds"),
    M("plan-cli.gb-as-gib", PLAN, '    return f"{x / 1e9:,.1f}"', '    return f"{x / 2**30:,.1f}"'),
    M("plan-cli.zero-ignored", PLAN, "replace(base, gpus_per_node=per_node), n, s, b, int(z)",
      "replace(base, gpus_per_node=per_node), n, s, b, 1"),
    M("plan-cli.node-size-ignored", PLAN, "replace(base, gpus_per_node=per_node), n, s, b, int(z)", "base, n, s, b, int(z)"),
    M("plan-cli.top-ignored", PLAN, "    for i, pl in enumerate(fits[:k], start=1):", "    for i, pl in enumerate(fits[:8], start=1):"),
    M("plan-cli.partial-nodes-accepted", PLAN, "    if n > per_node and n % per_node:", "    if False:"),
    M("train-cost-cli.gpus-zero-accepted", TRAIN, "    if not 1 <= n <= MAX_GPUS:", "    if not 0 <= n <= MAX_GPUS:"),
]
