"""Candidate solutions for the judge tests: correct ones and the typical wrong ones."""

# A correct GAE written out (importing the reference from impls/ is refused: tests/quiz/attacks.py).
GAE_OK = '''
import torch

def gae(rewards, values, mask, gamma, lam):
    r, v, m = rewards.double(), values.double(), mask.double()
    B, T = r.shape
    adv = torch.zeros_like(r)
    next_v = torch.zeros(B, dtype=r.dtype)    # the value and advantage of the next trained token,
    next_a = torch.zeros(B, dtype=r.dtype)    # carried across masked (observation) tokens
    for t in reversed(range(T)):
        a = r[:, t] + gamma * next_v - v[:, t] + gamma * lam * next_a
        keep = m[:, t] > 0
        adv[:, t] = torch.where(keep, a, torch.zeros_like(a))
        next_v = torch.where(keep, v[:, t], next_v)
        next_a = torch.where(keep, a, next_a)
    return adv, (adv + v) * m
'''

# A correct PPO clip loss (token mean over the mask); its gradient travels back through the judge.
PPO_OK = '''
import torch

def ppo_clip_loss(logp, logp_old, advantages, mask, clip_low=0.2, clip_high=None, dual_clip=None,
                  agg="token-mean"):
    clip_high = clip_low if clip_high is None else clip_high
    ratio = torch.exp(logp.double() - logp_old.double().detach())
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    a = advantages.double()
    m = mask.double()
    per = -torch.minimum(ratio * a, clipped * a)
    if dual_clip is not None:                  # negative advantages: the loss is capped at -c A
        per = torch.where(a < 0, torch.minimum(per, -dual_clip * a), per)
    per = torch.where(m > 0, per, torch.zeros_like(per))
    return (per * m).sum() / m.sum().clamp(min=1), {"clipfrac": 0.0}
'''

# Off-by-one bootstrap: bootstraps from V_{t+1} even at the last response token.
GAE_OFF_BY_ONE = '''
import torch

def gae(rewards, values, mask, gamma, lam):
    r, v, m = rewards.double(), values.double(), mask.double()
    B, T = r.shape
    adv = torch.zeros_like(r)
    last = torch.zeros(B, dtype=r.dtype)
    for t in reversed(range(T)):
        nv = v[:, t + 1] if t + 1 < T else torch.zeros(B, dtype=r.dtype)
        delta = r[:, t] + gamma * nv - v[:, t]
        last = (delta + gamma * lam * last) * m[:, t]
        adv[:, t] = last
    return adv, (adv + v) * m
'''

# Ignores the mask: runs the recursion over padding as if it were part of the response.
GAE_NO_MASK = '''
import torch

def gae(rewards, values, mask, gamma, lam):
    r, v = rewards.double(), values.double()
    B, T = r.shape
    adv = torch.zeros_like(r)
    last = torch.zeros(B, dtype=r.dtype)
    nv = torch.zeros(B, dtype=r.dtype)
    for t in reversed(range(T)):
        delta = r[:, t] + gamma * nv - v[:, t]
        last = delta + gamma * lam * last
        adv[:, t] = last
        nv = v[:, t]
    return adv, adv + v
'''

# Wrong case of the clip: max instead of min (optimistic instead of pessimistic bound).
PPO_WRONG_SIGN = '''
import torch

def ppo_clip_loss(logp, logp_old, advantages, mask, clip_low=0.2, clip_high=None, dual_clip=None,
                  agg="token-mean"):
    clip_high = clip_low if clip_high is None else clip_high
    ratio = torch.exp(logp.double() - logp_old.double().detach())
    clipped = torch.clamp(ratio, 1 - clip_low, 1 + clip_high)
    a = advantages.double()
    per = -torch.maximum(ratio * a, clipped * a)
    m = mask.double()
    return (per * m).sum() / m.sum().clamp(min=1), {}
'''

# Population (biased, /G) std where the convention is the unbiased (G-1) one.
GRPO_POPULATION_STD = '''
import torch

def grpo_advantages(scores, group_size, scale_by_std=True, eps=1e-6):
    r = scores.double().view(-1, group_size)
    adv = r - r.mean(dim=1, keepdim=True)
    if scale_by_std:
        adv = adv / (r.std(dim=1, unbiased=False, keepdim=True) + eps)
    return adv.reshape(-1)
'''

BST_STACK = '''
class BSTIterator:
    def __init__(self, root):
        self.stack = []
        self._left(root)

    def _left(self, node):
        while node is not None:
            self.stack.append(node)
            node = node.left

    def hasNext(self):
        return bool(self.stack)

    def next(self):
        node = self.stack.pop()
        self._left(node.right)
        return node.val
'''

# Flattens the whole tree in the constructor: right order, but O(n) work and memory up front.
BST_FLATTEN = '''
class BSTIterator:
    def __init__(self, root):
        self.items, stack, node = [], [], root
        while stack or node is not None:
            while node is not None:
                stack.append(node)
                node = node.left
            node = stack.pop()
            self.items.append(node.val)
            node = node.right
        self.i = 0

    def hasNext(self):
        return self.i < len(self.items)

    def next(self):
        self.i += 1
        return self.items[self.i - 1]
'''

# Morris threading: O(1) memory, rewires the tree while it runs and restores it by the end.
BST_MORRIS = '''
class BSTIterator:
    def __init__(self, root):
        self._cur = root

    def hasNext(self):
        return self._cur is not None

    def next(self):
        cur = self._cur
        while cur is not None:
            left = cur.left
            if left is None:
                self._cur = cur.right
                return cur.val
            pred, nxt = left, left.right
            while nxt is not None and nxt is not cur:
                pred, nxt = nxt, nxt.right
            if nxt is None:
                pred.right = cur
                cur = left
            else:
                pred.right = None
                self._cur = cur.right
                return cur.val
'''

# Morris that forgets to remove its threads: the right order, but the tree is left rewired.
BST_MORRIS_NO_RESTORE = BST_MORRIS.replace("                pred.right = None\n", "")

LEVEL_ORDER_OK = '''
def level_order_with_depth(root, stats=None):
    out, level = [], [root] if root is not None else []
    while level:
        out.append([n.val for n in level])
        level = [c for n in level for c in (n.left, n.right) if c is not None]
    return out
'''

LEVEL_ORDER_INFINITE = '''
def level_order_with_depth(root, stats=None):
    while True:
        pass
'''

LEVEL_ORDER_HUGE = '''
def level_order_with_depth(root, stats=None):
    block = bytearray(10 * 1024 ** 3)  # 10 GB
    return [[len(block)]]
'''

LEVEL_ORDER_EXIT = '''
import sys

def level_order_with_depth(root, stats=None):
    sys.exit(3)
'''

LEVEL_ORDER_OS_EXIT = '''
import os

def level_order_with_depth(root, stats=None):
    os._exit(7)
'''

IMPORT_ERROR = "import numpyy_not_a_module\n\ndef level_order_with_depth(root, stats=None):\n    return []\n"

WRONG_SIGNATURE = "def level_order_with_depth():\n    return []\n"

MISSING_SYMBOL = "def level_order(root):\n    return []\n"

ONLINE_LOGPROBS_OK = '''
import torch


def online_logprobs(logits, targets, *, block_size=4096, temperature=1.0, ignore_index=-100):
    n, v = logits.shape
    m = torch.full((n,), float("-inf"), dtype=torch.float64)
    s = torch.zeros(n, dtype=torch.float64)
    a = torch.zeros(n, dtype=torch.float64)
    x_y = torch.zeros(n, dtype=torch.float64)
    y = targets.clamp(min=0)
    for j in range(0, v, block_size):
        b = logits[:, j:j + block_size].double() / temperature  # one block at a time, read once
        m_new = torch.maximum(m, b.max(1).values)
        shift = torch.where(torch.isinf(m), torch.zeros_like(m), m - m_new)
        e = torch.exp(b - m_new[:, None])
        a = torch.exp(shift) * (a + s * shift) + (e * (b - m_new[:, None])).sum(1)
        s = torch.exp(shift) * s + e.sum(1)
        m = m_new
        inside = (y >= j) & (y < j + b.shape[1])
        x_y = torch.where(inside, b.gather(1, (y - j).clamp(0, b.shape[1] - 1)[:, None])[:, 0], x_y)
    logp = x_y - m - torch.log(s)
    logp = torch.where(targets == ignore_index, torch.zeros_like(logp), logp)
    return logp, torch.log(s) - a / s
'''

# the classic slip: a new block's maximum is used without rescaling the running sums
ONLINE_LOGPROBS_NO_RESCALE = ONLINE_LOGPROBS_OK.replace(
    "a = torch.exp(shift) * (a + s * shift) + ", "a = a + ").replace("s = torch.exp(shift) * s + ", "s = s + ")

FUSED_BACKWARD_OK = '''
import torch


def fused_logprob_backward(hidden, weight, targets, grad_logp, grad_entropy, *, temperature=1.0,
                           ignore_index=-100, chunk_size=1024):
    dh = torch.zeros_like(hidden)
    dw = torch.zeros_like(weight)
    for i in range(0, hidden.shape[0], chunk_size):
        h, y = hidden[i:i + chunk_size], targets[i:i + chunk_size]
        g, gh = grad_logp[i:i + chunk_size], grad_entropy[i:i + chunk_size]
        logp = torch.log_softmax(h @ weight.T / temperature, -1)
        p = logp.exp()
        ent = -(p * logp).sum(-1)
        g = torch.where(y == ignore_index, torch.zeros_like(g), g)
        onehot = torch.zeros_like(p)
        onehot.scatter_(1, y.clamp(min=0)[:, None], 1.0)
        dz = (onehot * g[:, None] - p * (g[:, None] + gh[:, None] * (logp + ent[:, None]))) / temperature
        dh[i:i + chunk_size] = dz @ weight
        dw += dz.T @ h
    return dh, dw
'''

# forgets the chain rule through x = z / temperature
FUSED_BACKWARD_NO_TEMPERATURE = FUSED_BACKWARD_OK.replace(") / temperature\n", ")\n")


# -- shortcuts that used to be accepted (issue 22): each is rejected by one named property -----------

# k2 left out: an empty tensor, which a zip without strict compared with nothing (prop_closed_forms)
KL_EMPTY_K2 = '''
import torch

def kl_estimate(logp, logp_ref, kind="k1"):
    lr = logp - logp_ref
    if kind == "k1":
        return lr
    if kind == "k2":
        return torch.empty(0, dtype=lr.dtype)
    return torch.expm1(-lr) + lr
'''

# the std of the first eight samples only: right for every group the old properties drew (G <= 8)
GRPO_FIRST_EIGHT = '''
import torch

def grpo_advantages(scores, group_size, scale_by_std=True, eps=1e-6):
    r = scores.double().view(-1, group_size)
    adv = r - r.mean(dim=1, keepdim=True)
    if scale_by_std:
        adv = adv / (r[:, :8].std(dim=1, keepdim=True) + eps)
    return adv.reshape(-1)
'''

# the ratio of probabilities instead of the exponential of the log difference: 0/0 below -88 in fp32
PPO_PROBABILITY_RATIO = PPO_OK.replace("ratio = torch.exp(logp.double() - logp_old.double().detach())",
                                       "ratio = (torch.exp(logp) / torch.exp(logp_old.detach())).double()")

# -log(sigmoid(m)) instead of logsigmoid: inf once sigmoid underflows
DPO_LOG_OF_SIGMOID = '''
import torch

def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta):
    m = beta * ((policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps))
    return -torch.log(torch.sigmoid(m)).mean()
'''

# the two-pass softmax of whole rows: right values, not online
ONLINE_FULL_ROWS = '''
import torch

def online_logprobs(logits, targets, *, block_size=4096, temperature=1.0, ignore_index=-100):
    ls = torch.log_softmax(logits.double() / temperature, -1)
    logp = ls.gather(1, targets.clamp(min=0)[:, None])[:, 0]
    logp = torch.where(targets == ignore_index, torch.zeros_like(logp), logp)
    return logp, -(ls.exp() * ls).sum(-1)
'''

# blocks, but two passes: the maximum over every block first, then the sums
ONLINE_TWO_PASS_BLOCKS = '''
import torch

def online_logprobs(logits, targets, *, block_size=4096, temperature=1.0, ignore_index=-100):
    n, v = logits.shape
    m = torch.full((n,), float("-inf"), dtype=torch.float64)
    for j in range(0, v, block_size):
        m = torch.maximum(m, (logits[:, j:j + block_size].double() / temperature).max(1).values)
    s = torch.zeros(n, dtype=torch.float64)
    a = torch.zeros(n, dtype=torch.float64)
    x_y = torch.zeros(n, dtype=torch.float64)
    y = targets.clamp(min=0)
    for j in range(0, v, block_size):
        d = logits[:, j:j + block_size].double() / temperature - m[:, None]
        e = torch.exp(d)
        s = s + e.sum(1)
        a = a + (e * d).sum(1)
        inside = (y >= j) & (y < j + d.shape[1])
        x_y = torch.where(inside, d.gather(1, (y - j).clamp(0, d.shape[1] - 1)[:, None])[:, 0], x_y)
    logp = torch.where(targets == ignore_index, torch.zeros_like(x_y), x_y - torch.log(s))
    return logp, torch.log(s) - a / s
'''

# autograd through the full [N, V] logits: right gradients, the memory the kata exists to avoid
FUSED_FULL_AUTOGRAD = '''
import torch

def fused_logprob_backward(hidden, weight, targets, grad_logp, grad_entropy, *, temperature=1.0,
                           ignore_index=-100, chunk_size=1024):
    h = hidden.detach().clone().requires_grad_(True)
    w = weight.detach().clone().requires_grad_(True)
    ls = torch.log_softmax(h @ w.T / temperature, -1)
    lp = torch.where(targets == ignore_index, torch.zeros_like(ls[:, 0]), ls.gather(1, targets.clamp(min=0)[:, None])[:, 0])
    ent = -(ls.exp() * ls).sum(-1)
    return torch.autograd.grad((lp * grad_logp + ent * grad_entropy).sum(), [h, w])
'''

# a recursive DFS that raises the recursion limit to get through the 5000-deep chain
LEVEL_ORDER_DEEP_RECURSION = '''
import sys

sys.setrecursionlimit(100000)

def level_order_with_depth(root, stats=None):
    out = []

    def visit(node, depth):
        if node is None:
            return
        if depth == len(out):
            out.append([])
        out[depth].append(node.val)
        visit(node.left, depth + 1)
        visit(node.right, depth + 1)

    visit(root, 0)
    return out
'''

# Correct GRPO advantages: unbiased group std, eps in the denominator, equal groups exactly 0, fp32 kept.
GRPO_OK = '''
import torch

def grpo_advantages(scores, group_size, scale_by_std=True, eps=1e-6):
    r = scores.reshape(-1, group_size)
    adv = r - r.mean(dim=1, keepdim=True)
    if scale_by_std:
        adv = adv / (r.std(dim=1, unbiased=True, keepdim=True) + eps)
    flat = r.amax(dim=1, keepdim=True) == r.amin(dim=1, keepdim=True)
    return torch.where(flat, torch.zeros_like(adv), adv).reshape(-1)
'''

# Correct per-token KL estimators; k3 through expm1, exact for small log-ratios in fp32.
KL_OK = '''
import torch

def kl_estimate(logp, logp_ref, kind):
    lr = logp - logp_ref
    if kind == "k1":
        return lr
    if kind == "k2":
        return 0.5 * lr * lr
    if kind == "k3":
        return torch.expm1(-lr) + lr
    raise ValueError(kind)
'''

# Correct DPO loss: softplus(-margin), finite at any margin.
DPO_OK = '''
import torch

def dpo_loss(policy_chosen_logps, policy_rejected_logps, ref_chosen_logps, ref_rejected_logps, beta):
    margin = beta * ((policy_chosen_logps - ref_chosen_logps) - (policy_rejected_logps - ref_rejected_logps))
    return torch.nn.functional.softplus(-margin).mean()
'''
