"""The LLaMA/Qwen block against the 2017 Transformer: SwiGLU's width, what biases cost.

Oracles: sympy for the parameter identity, the published config.json MLP widths for Meta's width formula
(reproduced from each model's params.json: multiple_of and ffn_dim_multiplier), and module counts.
"""

from __future__ import annotations

import math
from dataclasses import replace

import pytest
import sympy as sp

from impls.ml.counting import ARCHS, model, param_counts

# Meta's llama reference code (model.py, FeedForward): hidden = int(2·4d/3); hidden = int(m·hidden) if a
# multiplier m is set; then round up to a multiple of `multiple_of`. Values from each release's params.json.
PARAMS_JSON = {
    "llama-2-7b": (256, None), "llama-2-13b": (256, None), "llama-2-70b": (4096, 1.3),
    "llama-3-8b": (1024, 1.3), "llama-3-70b": (4096, 1.3), "llama-3.1-405b": (4096, 1.2),
}


def meta_ffn_width(d: int, multiple_of: int, multiplier: float | None) -> int:
    hidden = int(2 * 4 * d / 3)
    if multiplier is not None:
        hidden = int(multiplier * hidden)
    return multiple_of * math.ceil(hidden / multiple_of)


@pytest.mark.claim("arch.swiglu-width")
def test_swiglu_two_thirds_width(evidence):
    d = sp.symbols("d", positive=True)
    assert sp.simplify(3 * d * sp.Rational(8, 3) * d - 2 * d * (4 * d)) == 0      # 3 matrices at 8d/3 = 2 at 4d
    ratios = {}
    for name, (multiple_of, mult) in PARAMS_JSON.items():
        cfg = model(name)
        assert meta_ffn_width(cfg.d, multiple_of, mult) == cfg.ffn, name      # the formula gives config.json's width
        ratios[name] = cfg.ffn / cfg.d
    ratios["qwen2.5-7b"] = model("qwen2.5-7b").ffn / model("qwen2.5-7b").d
    ratios["qwen3-8b"] = model("qwen3-8b").ffn / model("qwen3-8b").d
    assert abs(ratios["llama-2-7b"] - 8 / 3) < 0.03             # 11008: 8/3·4096 rounded up to 256
    evidence.quote("Llama-2-7B f/d", quoted=2.69, measured=ratios["llama-2-7b"], abs=0.005)
    evidence.quote("Llama-3-8B f/d", quoted=3.5, measured=ratios["llama-3-8b"], abs=0)
    evidence.quote("Qwen2.5-7B f/d", quoted=5.29, measured=ratios["qwen2.5-7b"], abs=0.005)
    evidence["f / d"] = ratios


@pytest.mark.claim("arch.no-bias-reason")
def test_biases_are_a_negligible_share_of_the_weights(evidence):
    llama = model("llama-2-7b")
    with_bias = param_counts(replace(llama, arch=replace(ARCHS["llama"], bias=True)))
    extra = with_bias["total"] - param_counts(llama)["total"]
    # every linear layer's bias: q, k, v, o (4·4096) + gate, up (2·11008) + down (4096), 32 layers
    assert extra == 32 * (4 * 4096 + 2 * 11008 + 4096)
    share = extra / param_counts(llama)["total"]
    evidence.quote("bias share of Llama-2-7B if every linear layer had one, %", quoted=0.02, measured=100 * share,
                   abs=0.005)
    # Qwen2 keeps only the q, k, v biases: 28 layers · (3584 + 2·512)
    q = param_counts(model("qwen2.5-7b"))["attention_per_layer"]
    no_bias = replace(model("qwen2.5-7b"), arch=ARCHS["llama"])
    assert q - param_counts(no_bias)["attention_per_layer"] == 3584 + 2 * 512
