"""Candidate solutions for the judge tests: correct ones and the typical wrong ones."""

# A correct GAE written out (importing the reference from impls/ is refused: tests/quiz/attacks.py).
GAE_OK = '''
import torch

def gae(rewards, values, mask, gamma, lam):
    r, v, m = rewards.double(), values.double(), mask.double()
    B, T = r.shape
    adv = torch.zeros_like(r)
    last = torch.zeros(B, dtype=r.dtype)
    for t in reversed(range(T)):
        nv = v[:, t + 1] * m[:, t + 1] if t + 1 < T else torch.zeros(B, dtype=r.dtype)
        delta = (r[:, t] + gamma * nv - v[:, t]) * m[:, t]
        last = (delta + gamma * lam * last) * m[:, t]
        adv[:, t] = last
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
    x = logits.double() / temperature
    n, v = x.shape
    m = torch.full((n,), float("-inf"), dtype=x.dtype)
    s = torch.zeros(n, dtype=x.dtype)
    a = torch.zeros(n, dtype=x.dtype)
    for j in range(0, v, block_size):
        b = x[:, j:j + block_size]
        m_new = torch.maximum(m, b.max(1).values)
        shift = torch.where(torch.isinf(m), torch.zeros_like(m), m - m_new)
        e = torch.exp(b - m_new[:, None])
        a = torch.exp(shift) * (a + s * shift) + (e * (b - m_new[:, None])).sum(1)
        s = torch.exp(shift) * s + e.sum(1)
        m = m_new
    y = targets.clamp(min=0)
    logp = x.gather(1, y[:, None])[:, 0] - m - torch.log(s)
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
