"""The ML coding-round katas (issue 26) through the real judge: a correct solution of each is accepted, and
every wrong answer in the catalogue is rejected by the property named for it, while it still passes another
property (so the rejection comes from the named property, not from a crash or a wrong signature)."""

from __future__ import annotations

import pytest

from mianjing.quiz.judge import judge
from mianjing.quiz.katas import find
from tests.quiz import ml_solutions as S
from tests.quiz.kb import CHECKOUT

CORRECT = [
    ("mha", S.MHA_OK),
    ("cached_attention", S.CACHED_OK),
    ("sampler", S.SAMPLER_OK),
    ("sampler", S.SAMPLER_HF_STYLE),
    ("beam_search", S.BEAM_OK),
    ("beam_search", S.BEAM_TUPLES_OK),
    ("layer_norm", S.LAYER_NORM_OK),
    ("rms_norm", S.RMS_NORM_OK),
    ("rope", S.ROPE_OK),
    ("quantize_int8", S.INT8_OK),
    ("BPETokenizer", S.BPE_OK),
    ("gpt_forward", S.GPT_OK),
]

WRONG = [
    # (id, kata, code, a property it passes (None: it passes none worth naming), the property that rejects it,
    #  what the rejection says)
    ("mha-reshape-without-transpose", "mha", S.MHA_NO_TRANSPOSE, "prop_rejects_width_not_divisible",
     "prop_each_head_uses_its_own_columns", "one softmax per head"),
    ("mha-softmax-without-max", "mha", S.MHA_SOFTMAX_WITHOUT_MAX, "prop_each_head_uses_its_own_columns",
     "prop_stable_softmax_in_fp32", "non-finite"),
    ("mha-scale-by-model-width", "mha", S.MHA_SCALE_BY_MODEL_WIDTH, "prop_hidden_tokens_do_not_leak",
     "prop_scale_is_one_over_sqrt_head_width", "q·k/sqrt(2)"),
    ("mha-mask-after-softmax", "mha", S.MHA_MASK_AFTER_SOFTMAX, "prop_each_head_uses_its_own_columns",
     "prop_hidden_tokens_do_not_leak", "after changing the hidden tokens"),
    ("mha-nan-on-fully-masked-row", "mha", S.MHA_NAN_ON_FULLY_MASKED, "prop_each_head_uses_its_own_columns",
     "prop_fully_masked_rows_are_zero", "nan"),
    ("mha-truncates-width", "mha", S.MHA_TRUNCATES_WIDTH, "prop_matches_sdpa",
     "prop_rejects_width_not_divisible", "returned normally"),
    ("mha-padding-masks-queries", "mha", S.MHA_PADDING_ON_QUERIES, "prop_each_head_uses_its_own_columns",
     "prop_hidden_tokens_do_not_leak", "after changing the hidden tokens"),
    ("kv-rope-at-position-zero", "cached_attention", S.CACHED_ROPE_AT_ZERO, "prop_prefill_matches_the_full_forward",
     "prop_rope_at_the_absolute_position", "rotated at position"),
    ("kv-no-mask-in-a-chunk", "cached_attention", S.CACHED_NO_MASK, "prop_rope_at_the_absolute_position",
     "prop_chunk_after_a_cache_uses_an_offset_mask", "the chunk's output"),
    ("kv-top-left-causal-mask", "cached_attention", S.CACHED_TOP_LEFT_MASK, "prop_prefill_matches_the_full_forward",
     "prop_chunk_after_a_cache_uses_an_offset_mask", "the chunk's output"),
    ("kv-rotates-v", "cached_attention", S.CACHED_ROTATES_V, None,
     "prop_decode_token_by_token_matches_the_full_forward", "expected"),
    ("kv-rotates-the-cache-again", "cached_attention", S.CACHED_ROTATES_THE_CACHE_AGAIN,
     "prop_prefill_matches_the_full_forward", "prop_attends_to_the_cache_it_is_given", "returned keys"),
    ("kv-stashes-tokens", "cached_attention", S.CACHED_STASHES_TOKENS,
     "prop_decode_token_by_token_matches_the_full_forward", "prop_attends_to_the_cache_it_is_given", "given cache"),
    ("top-p-drops-the-crossing-token", "sampler", S.SAMPLER_CUMSUM_AT_MOST_P, "prop_top_k_keeps_ties_with_the_kth",
     "prop_top_p_keeps_the_token_that_crosses_p", "expected to keep tokens [0, 1], kept [0]"),
    ("top-k-above-the-vocabulary", "sampler", S.SAMPLER_TOPK_ABOVE_VOCAB, "prop_top_p_keeps_the_token_that_crosses_p",
     "prop_top_k_larger_than_the_vocabulary", "RuntimeError"),
    ("temperature-zero-divides", "sampler", S.SAMPLER_ZERO_TEMPERATURE_DIVIDES, "prop_matches_the_definition",
     "prop_temperature_zero_is_greedy", "T=0"),
    ("top-k-exactly-k-indices", "sampler", S.SAMPLER_EXACTLY_K, "prop_top_p_keeps_the_token_that_crosses_p",
     "prop_top_k_keeps_ties_with_the_kth", "expected to keep tokens [0, 1, 2]"),
    ("top-p-shift-of-greater", "sampler", S.SAMPLER_SHIFTED_GREATER, "prop_top_k_keeps_ties_with_the_kth",
     "prop_top_p_boundary_is_exact", "2 of the tied tokens [0, 1, 2, 3]"),
    ("top-p-keeps-both-tied", "sampler", S.SAMPLER_KEEPS_TIES_AT_THE_BOUNDARY, "prop_top_p_keeps_the_token_that_crosses_p",
     "prop_top_p_ties_at_the_boundary", "1 of the tied tokens [1, 2]"),
    ("top-p-before-top-k", "sampler", S.SAMPLER_TOP_P_FIRST, "prop_top_p_keeps_the_token_that_crosses_p",
     "prop_filters_apply_in_order", "top_k=2, top_p=0.5: expected to keep tokens [0]"),
    ("softmax-in-bf16", "sampler", S.SAMPLER_IN_THE_LOGITS_DTYPE, "prop_matches_the_definition",
     "prop_realistic_vocabulary", "bfloat16"),
    ("temperature-on-probabilities", "sampler", S.SAMPLER_TEMPERATURE_ON_PROBABILITIES, "prop_top_k_keeps_ties_with_the_kth",
     "prop_temperature_divides_logits", "T=2"),
    ("beam-multiplies-probabilities", "beam_search", S.BEAM_MULTIPLIES_PROBABILITIES, "prop_width_one_is_greedy",
     "prop_long_sequences_keep_log_space", "lanes_table"),
    ("beam-k-copies-of-the-empty-prefix", "beam_search", S.BEAM_K_COPIES, "prop_width_one_is_greedy",
     "prop_hypotheses_are_distinct", "duplicates"),
    ("beam-finished-stay-in-the-beam", "beam_search", S.BEAM_FINISHED_STAY_IN_THE_BEAM, "prop_width_one_is_greedy",
     "prop_finished_hypotheses_leave_the_beam", "finished_table"),
    ("beam-no-length-normalisation", "beam_search", S.BEAM_NO_LENGTH_PENALTY, "prop_width_one_is_greedy",
     "prop_length_penalty_changes_the_winner", "length_penalty 1"),
    ("layer-norm-one-pass-variance", "layer_norm", S.LAYER_NORM_ONE_PASS, "prop_biased_variance",
     "prop_large_mean_in_fp32", "fp32 output"),
    ("layer-norm-unbiased-variance", "layer_norm", S.LAYER_NORM_UNBIASED, "prop_constant_row_gives_the_bias",
     "prop_biased_variance", "1/sqrt(1.00001)"),
    ("layer-norm-eps-outside-the-sqrt", "layer_norm", S.LAYER_NORM_EPS_OUTSIDE, "prop_constant_row_gives_the_bias",
     "prop_eps_inside_the_sqrt", "0.3015"),
    ("layer-norm-in-bf16", "layer_norm", S.LAYER_NORM_IN_BF16, "prop_matches_torch_layer_norm",
     "prop_bf16_activations", "bf16 output"),
    ("rms-norm-without-eps", "rms_norm", S.RMS_NORM_NO_EPS, "prop_bf16_activations",
     "prop_zero_row_gives_zero", "nan"),
    ("rms-norm-eps-outside-the-sqrt", "rms_norm", S.RMS_NORM_EPS_OUTSIDE, "prop_zero_row_gives_zero",
     "prop_eps_inside_the_sqrt", "0.3015"),
    ("rms-norm-subtracts-the-mean", "rms_norm", S.RMS_NORM_SUBTRACTS_THE_MEAN, "prop_zero_row_gives_zero",
     "prop_matches_torch_rms_norm", "the output"),
    ("rms-norm-in-fp16", "rms_norm", S.RMS_NORM_IN_FP16, "prop_matches_torch_rms_norm",
     "prop_fp16_small_and_large_rows", "fp16 rows"),
    ("rope-frequencies-without-the-2", "rope", S.ROPE_WRONG_FREQUENCIES, "prop_norm_of_each_pair_is_kept",
     "prop_pair_i_turns_by_theta_i", "should turn by"),
    ("rope-ignores-positions", "rope", S.ROPE_IGNORES_POSITIONS, "prop_norm_of_each_pair_is_kept",
     "prop_positions_are_absolute", "cached tokens"),
    ("rope-angles-in-bf16", "rope", S.ROPE_ANGLES_IN_X_DTYPE, "prop_matches_complex_rotation",
     "prop_bf16_at_long_positions", "position 30000"),
    ("rope-one-layout-for-both", "rope", S.ROPE_ONE_LAYOUT, None,
     "prop_matches_complex_rotation", "interleaved"),
    ("int8-truncates", "quantize_int8", S.INT8_TRUNCATES, "prop_all_zero_rows",
     "prop_rounds_to_nearest", "expected the nearest code"),
    ("int8-zero-scale", "quantize_int8", S.INT8_ZERO_SCALE, "prop_rounds_to_nearest",
     "prop_all_zero_rows", "positive and finite"),
    ("int8-scale-over-128", "quantize_int8", S.INT8_SCALE_OVER_128, None,
     "prop_extremes_map_to_127", "codes outside [-127, 127]: -128"),
    ("int8-always-per-tensor", "quantize_int8", S.INT8_ALWAYS_PER_TENSOR, "prop_rounds_to_nearest",
     "prop_one_scale_per_output_row", "expected scale"),
    ("bpe-encode-by-frequency", "BPETokenizer", S.BPE_ENCODE_BY_FREQUENCY, "prop_training_matches_the_definition",
     "prop_rank_not_frequency", "a|bc|a|bc|ab"),
    ("bpe-longest-match", "BPETokenizer", S.BPE_LONGEST_MATCH, "prop_training_matches_the_definition",
     "prop_rank_not_frequency", "a|bc|a|bc|ab"),
    ("bpe-decodes-token-by-token", "BPETokenizer", S.BPE_DECODES_TOKEN_BY_TOKEN, "prop_training_matches_the_definition",
     "prop_decode_joins_bytes_first", "decode(encode("),
    ("bpe-counts-without-overlap", "BPETokenizer", S.BPE_COUNTS_WITHOUT_OVERLAP, "prop_decode_joins_bytes_first",
     "prop_overlapping_pair_merges_once", "aaabcbc"),
    ("bpe-merge-overlaps", "BPETokenizer", S.BPE_MERGE_OVERLAPS, "prop_decode_joins_bytes_first",
     "prop_overlapping_pair_merges_once", "encode('aaa')"),
    ("gpt-no-label-shift", "gpt_forward", S.GPT_NO_SHIFT, "prop_causal",
     "prop_labels_are_shifted", "without the shift"),
    ("gpt-residual-on-the-normed-input", "gpt_forward", S.GPT_RESIDUAL_ON_THE_NORMED_INPUT, "prop_causal",
     "prop_residual_adds_the_unnormalised_input", "sub-layers silenced"),
    ("gpt-post-norm", "gpt_forward", S.GPT_POST_NORM, "prop_causal",
     "prop_residual_adds_the_unnormalised_input", "sub-layers silenced"),
    ("gpt-log-of-softmax", "gpt_forward", S.GPT_LOG_OF_SOFTMAX, "prop_matches_pytorch_encoder_layer",
     "prop_confident_logits_in_fp32", "finite loss"),
    ("gpt-not-causal", "gpt_forward", S.GPT_NOT_CAUSAL, "prop_residual_adds_the_unnormalised_input",
     "prop_causal", "after changing the later tokens"),
]


@pytest.fixture(autouse=True)
def _few_examples(monkeypatch):
    monkeypatch.setenv("MIANJING_MAX_EXAMPLES", "15")


def run(tmp_path, kata: str, code: str, only: list[str] | None = None):
    k = find(CHECKOUT, kata)
    if k is None:
        pytest.skip(f"kata {kata} has not landed in this checkout")
    f = tmp_path / f"{kata}_candidate.py"
    f.write_text(code)
    return judge(CHECKOUT, k, f, only=only, timeout=60)


@pytest.mark.parametrize("kata, code", CORRECT, ids=[f"{k}-{i}" for i, (k, _) in enumerate(CORRECT)])
def test_a_correct_solution_is_accepted(tmp_path, kata, code):
    res = run(tmp_path, kata, code)
    assert res.ok, [(p.name, p.reason, p.message[:600]) for p in res.props if not p.passed] or res.fatal


@pytest.mark.parametrize("kata, code, passes, rejects, says", [w[1:] for w in WRONG], ids=[w[0] for w in WRONG])
def test_the_wrong_answer_is_rejected_by_its_property(tmp_path, kata, code, passes, rejects, says):
    res = run(tmp_path, kata, code, only=[rejects] + ([passes] if passes else []))
    assert res.fatal is None, (res.fatal, res.fatal_detail)
    by_name = {p.name: p for p in res.props}
    if passes:
        assert by_name[passes].passed, (passes, by_name[passes].reason, by_name[passes].message[:600])
    bad = by_name[rejects]
    assert bad.passed is False, f"{rejects} accepted the wrong answer"
    assert says in (bad.reason + " " + bad.message), (bad.reason, bad.message[:1200])


def test_every_ml_kata_has_a_correct_solution_and_wrong_answers():
    ml = {k.name for k in __import__("mianjing.quiz.katas", fromlist=["REGISTRY"]).REGISTRY if k.track == "ml"}
    new = ml - {"online_logprobs", "fused_logprob_backward"}
    assert new <= {k for k, _ in CORRECT}
    assert new <= {w[1] for w in WRONG}


# -- the new katas do not reopen an escape: what the candidate returns arrives as plain data -----------------

MHA_LIAR = '''
import torch

class Liar(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        if getattr(func, "__name__", "") in ("allclose", "equal", "isclose", "eq", "__eq__", "all", "any", "__bool__",
                                             "le", "__le__", "gt", "__gt__", "isfinite", "isnan"):
            return True
        return super().__torch_function__(func, types, args, kwargs or {})

def mha(x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None):
    return torch.zeros_like(x).as_subclass(Liar)
'''

BEAM_LIARS = '''
class Always(tuple):
    def __eq__(self, other):
        return True
    def __ne__(self, other):
        return False
    __hash__ = tuple.__hash__

class Close(float):
    def __sub__(self, other):
        return 0.0
    def __rsub__(self, other):
        return 0.0
    def __lt__(self, other):
        return False
    def __gt__(self, other):
        return False

class Hyp:
    def __init__(self):
        self.tokens = Always((1, 2))
        self.logprob = Close(0.0)
        self.score = Close(0.0)

def beam_search_table(table, beam_width, eos_id=None, length_penalty=0.0, bos=0):
    return [Hyp()]
'''


@pytest.mark.parametrize("kata, code, only", [
    ("mha", MHA_LIAR, ["prop_scale_is_one_over_sqrt_head_width"]),
    ("beam_search", BEAM_LIARS, ["prop_wider_beam_can_be_worse", "prop_long_sequences_keep_log_space"]),
], ids=["mha-tensor-subclass", "beam-fields-equal-to-everything"])
def test_values_that_claim_equality_arrive_plain_and_are_rejected(tmp_path, kata, code, only):
    res = run(tmp_path, kata, code, only=only)
    assert res.fatal is None, (res.fatal, res.fatal_detail)
    assert res.props and all(p.passed is False for p in res.props), [(p.name, p.passed, p.reason) for p in res.props]
    assert all(p.reason == "wrong result" for p in res.props), [(p.name, p.reason, p.message[:300]) for p in res.props]
