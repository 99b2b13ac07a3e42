"""One correct solution per kata, by kata name: what benchmarks/quiz_startup.py judges to time each track (LeetCode
under 1 s, ML under 5 s; the kernel katas run in Triton's interpreter and are timed, not held to a budget). A kata
that lands adds its accepted file here; a track's katas without one are listed as untimed by the benchmark."""

from __future__ import annotations

from tests.quiz import leetcode_solutions as L
from tests.quiz import solutions as S
from verifiers.kernels import wrong_kernels as K

ACCEPTED: dict[str, str] = {
    **L.OK,
    "level_order_with_depth": S.LEVEL_ORDER_OK,
    "BSTIterator": S.BST_STACK,
    "gae": S.GAE_OK,
    "ppo_clip_loss": S.PPO_OK,
    "grpo_advantages": S.GRPO_OK,
    "kl_estimate": S.KL_OK,
    "dpo_loss": S.DPO_OK,
    "online_logprobs": S.ONLINE_LOGPROBS_OK,
    "fused_logprob_backward": S.FUSED_BACKWARD_OK,
    **{name: K.submission(name, kernel) for name, kernel in K.RIGHT.items()},
}
