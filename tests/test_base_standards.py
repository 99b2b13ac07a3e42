"""Standards the knowledge base itself must meet (not the tool): measured on the checkout, not claimed."""

from __future__ import annotations

from mianjing.check import check
from mianjing.paths import repo_root

# refuted claims whose counterexample is a historical or documentary fact no code can exhibit
NO_RUNNABLE_COUNTEREXAMPLE = {
    "rlhf.rm.architecture",  # what reward models are initialised from in practice
    "rlhf.pytorch-tutorial",  # the title of a tutorial
    "pg.history.actor-critic-predates-reinforce",  # publication dates
    "pg.reinforce.has-baseline",  # what Williams' 1992 update rule contains
    "pg.history.ppo-did-not-introduce-is-kl",  # which paper introduced what
    "gqa.mqa-perplexity",  # the quality gap the MQA and GQA papers measured at scale; a toy run cannot speak for it
    "rope.alibi-glm",  # which position encoding a published model uses
    "rope-scaling.qwen-attention-sink",  # what a published model's long-context recipe is
    "arch.swiglu-smoother",
    "decoder-only.always-better",  # which architecture wins at scale is T5's and Wang et al.'s experiments  # why a block variant wins is Shazeer's table at scale; a toy run cannot speak for it
}


def test_at_least_85_percent_of_factual_claims_are_executable():
    res = check(repo_root())
    run, factual = res.executable_share
    assert run / factual >= 0.85, f"{run}/{factual} = {run / factual:.1%} of non-opinion claims are executable"


def test_every_refuted_claim_that_can_have_a_runnable_counterexample_has_one():
    res = check(repo_root())
    assert set(res.citation_only_refuted) <= NO_RUNNABLE_COUNTEREXAMPLE, (
        "refuted by citation only: " + ", ".join(sorted(set(res.citation_only_refuted) - NO_RUNNABLE_COUNTEREXAMPLE))
        + " -- give it a verifier that exhibits the counterexample, or add it here with the reason none can exist")
