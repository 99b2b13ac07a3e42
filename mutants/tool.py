"""Mutants of the tool's own calculators in src/mianjing (their tests are in tests/).

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

ZERO = "src/mianjing/zero_cli.py"

MUTANTS = [
    M("zero-cli.ring-column-in-elements", ZERO, "_fmt_gb(r.ring_bytes_sent_per_rank / 1e9),", "_fmt_gb(r.comm_elements_per_rank / 1e9),"),
    M("zero-cli.vs-dp-inverted", ZERO, 'f"{r.reduction_vs_dp:.3g}×",', 'f"{1 / r.reduction_vs_dp:.3g}×",'),
    M("zero-cli.optimizer-bytes-ignored", ZERO, "rows = stage_table(float(params), int(gpus), k=optimizer_bytes)", "rows = stage_table(float(params), int(gpus))"),
    M("zero-cli.accepts-zero-gpus", ZERO, "or gpus < 1:", "or gpus < 0:"),
]
