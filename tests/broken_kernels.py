"""Mutants of the Triton kernels (and of the PyTorch online-softmax loop) for fault-injection tests.

Each mutant is the real module's source with exactly one line changed, written to a temporary file
and imported from there (Triton reads a kernel's source from its file), so the mutant differs from
the shipped code by that line only. ``tests/faults.py`` reads the attributes named below, e.g.
``impls.scale.fused_logprobs_triton:chunk_forward=tests.broken_kernels:logprob_fwd_no_rescale``.
Import this module only in a process where ``TRITON_INTERPRET=1`` was set first (on CPU).
"""

from __future__ import annotations

import atexit
import importlib.util
import shutil
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# name: (file, the line as shipped, the broken line, the function the mutant replaces)
MUTANTS = {
    # the online softmax forgets to rescale the running sum when the maximum grows
    "logprob_fwd_no_rescale": ("impls/scale/fused_logprobs_triton.py",
                               "s = alpha * s + tl.sum(e, axis=0)", "s = s + tl.sum(e, axis=0)", "chunk_forward"),
    # the last vocabulary column of every row falls off the end of the last block
    "logprob_fwd_block_edge": ("impls/scale/fused_logprobs_triton.py",
                               "valid = offs < V\n            x = tl.load(z_row + offs, mask=valid, other=-float(\"inf\"))",
                               "valid = offs < V - 1\n            x = tl.load(z_row + offs, mask=valid, other=-float(\"inf\"))",
                               "chunk_forward"),
    # the PyTorch loop rescales the entropy accumulator without the s (m - m') term
    "online_entropy_rescale": ("impls/scale/fused_logprobs.py",
                               "a = alpha * (a + s * shift) + torch.where(e > 0, e * d, 0.0).sum(-1)",
                               "a = alpha * a + torch.where(e > 0, e * d, 0.0).sum(-1)",
                               "online_logprobs"),
    # GAE: the carry handed to the previous tile is read one column off the tile's edge
    "gae_tile_edge": ("impls/rl/gae_triton.py",
                      "last = (j == BLOCK_T - 1)[None, :]", "last = (j == BLOCK_T - 2)[None, :]", "gae_triton"),
    # FlashAttention: the output accumulator is not rescaled when the row maximum grows
    "flash_no_rescale": ("impls/inference/flash_attention_triton.py",
                         "acc = acc * alpha[:, None] + tl.dot", "acc = acc + tl.dot", "flash_attention_triton"),
}

_DIR: Path | None = None
_LOADED: dict[str, object] = {}


def _mutant_module(name: str):
    global _DIR
    if name in _LOADED:
        return _LOADED[name]
    path, shipped, broken, _ = MUTANTS[name]
    src = (ROOT / path).read_text(encoding="utf-8")
    if src.count(shipped) != 1:
        raise AssertionError(f"mutant {name}: expected the line {shipped!r} exactly once in {path}; update MUTANTS")
    if _DIR is None:
        _DIR = Path(tempfile.mkdtemp(prefix="mianjing-mutants-"))
        atexit.register(shutil.rmtree, _DIR, True)
    file = _DIR / f"_mutant_{name}.py"
    file.write_text(src.replace(shipped, broken), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"_mutant_{name}", file)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    _LOADED[name] = mod
    return mod


def __getattr__(name: str):
    if name in MUTANTS:
        return getattr(_mutant_module(name), MUTANTS[name][3])
    raise AttributeError(name)
