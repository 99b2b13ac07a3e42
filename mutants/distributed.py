"""Mutants of impls/distributed: ZeRO memory and communication formulas, the measured probes.

One mutant per line: Mutant(name, file, exact original snippet, replacement[, why=...][, equivalent=...]).
"""

from mianjing.mutation import Mutant as M

MEM = "impls/distributed/memory.py"
MP = "impls/distributed/mixed_precision.py"
ACT = "impls/distributed/activations.py"
PR = "impls/distributed/probes.py"

MUTANTS = [
    M("zero.stage1-does-not-shard-optimizer", MEM, 'shard_os = stage in ("zero1", "zero2", "zero3")', 'shard_os = stage in ("zero2", "zero3")'),
    M("zero.stage2-does-not-shard-grads", MEM, 'shard_g = stage in ("zero2", "zero3")', 'shard_g = stage in ("zero3",)'),
    M("zero.stage3-shards-nothing-more", MEM, 'shard_p = stage == "zero3"', "shard_p = False"),
    M("zero.optimizer-term-uses-p", MEM, '"optimizer": K * Psi / (N if shard_os else 1),', '"optimizer": (K - p) * Psi / (N if shard_os else 1),'),
    M("zero.reduction-inverted", MEM, 'return sp.simplify(model_state_bytes("dp") / model_state_bytes(stage))', 'return sp.simplify(model_state_bytes(stage) / model_state_bytes("dp"))'),
    M("zero.default-fp32-params", MEM, "def model_state_bytes_num(stage: str, psi: float, n: int, k: float = 12, param_bytes: float = 2,", "def model_state_bytes_num(stage: str, psi: float, n: int, k: float = 12, param_bytes: float = 4,"),
    M("zero.stage3-gathers-once", MEM, 'return {"all_gather(params, fwd)": Psi, "all_gather(params, bwd)": Psi, "reduce_scatter(grads)": Psi}', 'return {"all_gather(params)": Psi, "reduce_scatter(grads)": Psi}'),
    M("zero.stage1-all-reduce-plus-gather", MEM, '    if stage == "zero1":\n        return {"reduce_scatter(grads)": Psi, "all_gather(params)": Psi}', '    if stage == "zero1":\n        return {"all_reduce(grads)": 2 * Psi, "all_gather(params)": Psi}', why="the catalog's 'ZeRO-1 = all-reduce + gather'"),
    M("ring.all-reduce-one-pass", MEM, '"all_reduce": 2 * (n - 1) / n * size,', '"all_reduce": (n - 1) / n * size,'),
    M("ring.gather-full-buffer", MEM, '"all_gather": (n - 1) / n * size,', '"all_gather": size,'),
    M("ring.all-reduce-steps", MEM, 'steps = {"all_reduce": 2 * (n - 1),', 'steps = {"all_reduce": n - 1,'),
    M("ring.time-ignores-bandwidth", MEM, "return steps * latency + sent / bandwidth", "return steps * latency + sent"),
    M("zero-table.ring-without-fraction", MEM, "rows.append(StageRow(st, total / psi, total / 1e9, dp / total, vol, vol * comm_bytes * (n - 1) / n))", "rows.append(StageRow(st, total / psi, total / 1e9, dp / total, vol, vol * comm_bytes))", why="issue 17 hole 6"),
    M("zero-table.gib", MEM, "rows.append(StageRow(st, total / psi, total / 1e9,", "rows.append(StageRow(st, total / psi, total / 2**30,"),
    M("act.gelu-input-4h", MEM, '"mlp.gelu_input": 8 * s * b * h,', '"mlp.gelu_input": 4 * s * b * h,'),
    M("act.softmax-mask-2-bytes", MEM, '"attn.softmax_dropout_mask": md * a * s**2 * b,', '"attn.softmax_dropout_mask": a * s**2 * b,', why="mask bytes fixed at 1: right on CUDA, wrong where dropout keeps 2"),
    M("act.selective-keeps-mask", MEM, 'core = terms["attn.softmax_output"] + terms["attn.softmax_dropout_mask"] + terms["attn.dropout_output (for ·V)"]', 'core = terms["attn.softmax_output"] + terms["attn.dropout_output (for ·V)"]'),
    M("act.tensor-parallel-splits-layernorm", MEM, 'replicated = (terms["layernorm_inputs"] + terms["attn.qkv_input"] + terms["mlp.fc1_input"]', 'replicated = (terms["attn.qkv_input"] + terms["mlp.fc1_input"]'),
    M("act.full-recompute-keeps-nothing", MEM, "return 2 * s * b * h / (t if parallel == \"tensor+sequence\" else 1)", "return s * b * h / (t if parallel == \"tensor+sequence\" else 1)"),
    M("mixed.grads-kept-between-steps", MP, "            p16.grad = None\n            p32.grad = None", "            p32.grad = None"),
    M("mixed.master-not-copied-back", MP, "            p16.copy_(p32)\n", ""),
    M("mixed.no-upcast", MP, "p32.grad = None if p16.grad is None else p16.grad.float()", "p32.grad = None if p16.grad is None else p16.grad.to(p32.dtype).clone().bfloat16().float()", why="gradients rounded through bf16 even for fp16 models"),
    M("mixed.moments-not-counted", MP, 'if k in ("exp_avg", "exp_avg_sq")]', 'if k in ("exp_avg",)]'),
    M("act-probe.parameters-counted", ACT, "if st.data_ptr() not in params and st.data_ptr() not in seen:", "if st.data_ptr() not in seen:"),
    M("act-probe.scalars-in-main", ACT, "main = sum(nb for nb, n in seen.values() if n > 1 and n != n_tokens)", "main = sum(nb for nb, n in seen.values() if n != n_tokens)"),
    M("act-layer.no-softmax-dropout", ACT, "        probs = F.dropout(probs, self.p, self.training)\n", ""),
    M("probe.reduce-scatter-counts-output", PR, '"reduce_scatter_tensor": 1, "reduce_scatter_single": 1,', '"reduce_scatter_tensor": 0, "reduce_scatter_single": 0,'),
    M("probe.optimizer-scalars-as-moments", PR, "                if v.dim() == 0:\n                    scalars += local_bytes(v)", "                if v.dim() < 0:\n                    scalars += local_bytes(v)"),
    M("probe.flat-zero1-no-mean", PR, "self.master.grad = mine / self.world", "self.master.grad = mine"),
    M("probe.shard-rows-floor", PR, "    c = math.ceil(dim0 / world)\n", "    c = dim0 // world\n"),
]
