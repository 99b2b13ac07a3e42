"""Candidate files for the ML katas (issue 26): a correct solution per kata, written the way a candidate
would (standalone: the judge runs the file alone), and the realistic wrong answers, each a small edit of a
correct one. ``variant`` refuses an edit that does not apply exactly once, so a wrong answer cannot silently
turn into the correct solution when the latter is reformatted."""

from __future__ import annotations


def variant(code: str, old: str, new: str) -> str:
    assert code.count(old) == 1, f"the edit must apply exactly once: {old!r} occurs {code.count(old)} times"
    return code.replace(old, new)


# ------------------------------------------------------------------------------------------------- MHA
MHA_OK = '''
import math
import torch


def mha(x, wq, wk, wv, wo, heads, causal=False, key_padding_mask=None):
    B, T, D = x.shape
    if D % heads != 0:
        raise ValueError(f"D={D} is not divisible by heads={heads}")
    d = D // heads

    def split(y):                                   # [B, T, D] -> [B, H, T, d]
        return y.view(B, T, heads, d).transpose(1, 2)

    q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    allowed = torch.ones(T, T, dtype=torch.bool)
    if causal:
        allowed = torch.tril(allowed)
    allowed = allowed.expand(B, 1, T, T)
    if key_padding_mask is not None:
        allowed = allowed & key_padding_mask[:, None, None, :]
    s = s.masked_fill(~allowed, float("-inf"))
    m = s.amax(dim=-1, keepdim=True)
    m = torch.where(torch.isinf(m), torch.zeros_like(m), m)
    e = torch.exp(s - m)
    p = e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)
    o = (p @ v).transpose(1, 2).reshape(B, T, D)
    return o @ wo
'''

MHA_NO_TRANSPOSE = variant(variant(MHA_OK, "return y.view(B, T, heads, d).transpose(1, 2)", "return y.reshape(B, heads, T, d)"),
                           "o = (p @ v).transpose(1, 2).reshape(B, T, D)", "o = (p @ v).reshape(B, T, D)")
MHA_SOFTMAX_WITHOUT_MAX = variant(MHA_OK, "e = torch.exp(s - m)", "e = torch.exp(s)")
MHA_SCALE_BY_MODEL_WIDTH = variant(MHA_OK, "/ math.sqrt(d)", "/ math.sqrt(D)")
MHA_MASK_AFTER_SOFTMAX = variant(variant(MHA_OK, 's = s.masked_fill(~allowed, float("-inf"))', "pass"),
                                 "p = e / e.sum(dim=-1, keepdim=True).clamp_min(1e-30)",
                                 "p = e / e.sum(dim=-1, keepdim=True) * allowed")
MHA_NAN_ON_FULLY_MASKED = variant(MHA_OK, "m = torch.where(torch.isinf(m), torch.zeros_like(m), m)", "pass")
MHA_TRUNCATES_WIDTH = variant(variant(MHA_OK, 'raise ValueError(f"D={D} is not divisible by heads={heads}")',
                                      "D = heads * (D // heads)"),
                              "q, k, v = split(x @ wq), split(x @ wk), split(x @ wv)",
                              "q, k, v = split((x @ wq)[..., :D]), split((x @ wk)[..., :D]), split((x @ wv)[..., :D])\n"
                              "    wo = wo[:D]")
MHA_PADDING_ON_QUERIES = variant(MHA_OK, "key_padding_mask[:, None, None, :]", "key_padding_mask[:, None, :, None]")

# ------------------------------------------------------------------------------------- KV-cached decoding
CACHED_OK = '''
import math
import torch


def cached_attention(x, wq, wk, wv, wo, heads, cache_k, cache_v, base=10000.0):
    B, T, D = x.shape
    d = D // heads
    S = cache_k.shape[2]
    pos = torch.arange(S, S + T, dtype=torch.float64)
    inv_freq = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    ang = pos[:, None] * inv_freq[None, :]
    cos = torch.cat([ang.cos(), ang.cos()], dim=-1).to(x.dtype)
    sin = torch.cat([ang.sin(), ang.sin()], dim=-1).to(x.dtype)

    def rotate(t):                                   # pairs (i, i + d/2), Llama's rotate-half
        return t * cos + torch.cat([-t[..., d // 2:], t[..., : d // 2]], dim=-1) * sin

    def split(y):
        return y.view(B, T, heads, d).transpose(1, 2)

    q, k, v = rotate(split(x @ wq)), rotate(split(x @ wk)), split(x @ wv)
    keys = torch.cat([cache_k, k], dim=2)
    values = torch.cat([cache_v, v], dim=2)
    s = q @ keys.transpose(-1, -2) / math.sqrt(d)
    allowed = torch.arange(S + T)[None, :] <= torch.arange(S, S + T)[:, None]
    s = s.masked_fill(~allowed, float("-inf"))
    o = torch.softmax(s, dim=-1) @ values
    return o.transpose(1, 2).reshape(B, T, D) @ wo, keys, values
'''

CACHED_ROPE_AT_ZERO = variant(CACHED_OK, "pos = torch.arange(S, S + T, dtype=torch.float64)",
                              "pos = torch.arange(0, T, dtype=torch.float64)")
CACHED_NO_MASK = variant(CACHED_OK, 's = s.masked_fill(~allowed, float("-inf"))', "pass")
CACHED_TOP_LEFT_MASK = variant(CACHED_OK, "allowed = torch.arange(S + T)[None, :] <= torch.arange(S, S + T)[:, None]",
                               "allowed = torch.tril(torch.ones(T, S + T, dtype=torch.bool))")
CACHED_ROTATES_V = variant(CACHED_OK, "q, k, v = rotate(split(x @ wq)), rotate(split(x @ wk)), split(x @ wv)",
                           "q, k, v = rotate(split(x @ wq)), rotate(split(x @ wk)), rotate(split(x @ wv))")
# Stores rotated keys but rotates the whole key cache again at 0..S+T-1 on every call: the cached keys turn twice.
CACHED_ROTATES_THE_CACHE_AGAIN = variant(CACHED_OK, "    keys = torch.cat([cache_k, k], dim=2)\n", """    keys = torch.cat([cache_k, split(x @ wk)], dim=2)
    every = torch.arange(0, S + T, dtype=torch.float64)[:, None] * inv_freq[None, :]
    c, s_ = torch.cat([every.cos()] * 2, -1).to(x.dtype), torch.cat([every.sin()] * 2, -1).to(x.dtype)
    keys = keys * c + torch.cat([-keys[..., d // 2:], keys[..., : d // 2]], dim=-1) * s_
""")
# Keeps every token it has seen on the side and recomputes the whole sequence, returning caches it built
# itself: right on its own caches, blind to the ones it is given.
CACHED_STASHES_TOKENS = variant(CACHED_OK, "def cached_attention(x, wq, wk, wv, wo, heads, cache_k, cache_v, base=10000.0):\n"
                                "    B, T, D = x.shape",
                                "_SEEN = []\n\n\n"
                                "def cached_attention(x, wq, wk, wv, wo, heads, cache_k, cache_v, base=10000.0):\n"
                                "    if cache_k.shape[2] == 0:\n"
                                "        _SEEN.clear()\n"
                                "    _SEEN.append(x)\n"
                                "    full = torch.cat(_SEEN, dim=1)\n"
                                "    T_new = x.shape[1]\n"
                                "    x = full\n"
                                "    cache_k, cache_v = cache_k[:, :, :0], cache_v[:, :, :0]\n"
                                "    B, T, D = x.shape")
CACHED_STASHES_TOKENS = variant(CACHED_STASHES_TOKENS, "    return o.transpose(1, 2).reshape(B, T, D) @ wo, keys, values",
                                "    return (o.transpose(1, 2).reshape(B, T, D) @ wo)[:, T - T_new:], keys, values")

# ----------------------------------------------------------------------------------------------- sampler
SAMPLER_OK = '''
import torch


def distribution(logits, temperature=1.0, top_k=None, top_p=None):
    z = logits.double() if logits.dtype == torch.float64 else logits.float()
    if temperature == 0:
        return torch.zeros_like(z).scatter(-1, z.argmax(dim=-1, keepdim=True), 1.0)
    z = z / temperature
    if top_k is not None and top_k < z.shape[-1]:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    if top_p is not None and top_p < 1:
        p = torch.softmax(z, dim=-1)
        ps, idx = torch.sort(p, dim=-1, descending=True)
        before = torch.cumsum(ps, dim=-1) - ps
        drop = torch.zeros_like(before, dtype=torch.bool).scatter(-1, idx, before >= top_p)
        z = z.masked_fill(drop, float("-inf"))
    return torch.softmax(z, dim=-1)
'''

# Hugging Face's TopPLogitsWarper rule: sort ascending, drop while the cumulative mass is <= 1 - p. Which of two
# tokens tied at the boundary it keeps differs from the descending sort; the kata accepts either.
SAMPLER_HF_STYLE = variant(SAMPLER_OK, '''        p = torch.softmax(z, dim=-1)
        ps, idx = torch.sort(p, dim=-1, descending=True)
        before = torch.cumsum(ps, dim=-1) - ps
        drop = torch.zeros_like(before, dtype=torch.bool).scatter(-1, idx, before >= top_p)''', '''        zs, idx = torch.sort(z, dim=-1, descending=False)
        cum = torch.softmax(zs, dim=-1).cumsum(dim=-1)
        remove = cum <= (1 - top_p)
        remove[..., -1:] = False
        drop = torch.zeros_like(remove).scatter(-1, idx, remove)''')

SAMPLER_CUMSUM_AT_MOST_P = variant(SAMPLER_OK, "before >= top_p", "torch.cumsum(ps, dim=-1) > top_p")
SAMPLER_TOPK_ABOVE_VOCAB = variant(SAMPLER_OK, "if top_k is not None and top_k < z.shape[-1]:", "if top_k is not None:")
SAMPLER_ZERO_TEMPERATURE_DIVIDES = variant(SAMPLER_OK, "    if temperature == 0:\n", "    if False:\n")
SAMPLER_EXACTLY_K = variant(SAMPLER_OK, '''        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))''', '''        keep = torch.topk(z, top_k, dim=-1).indices
        z = torch.full_like(z, float("-inf")).scatter(-1, keep, z.gather(-1, keep))''')
SAMPLER_SHIFTED_GREATER = variant(SAMPLER_OK, "before >= top_p",
                                  "torch.cat([torch.zeros_like(ps[..., :1]), torch.cumsum(ps, dim=-1)[..., :-1]], -1) > top_p")
SAMPLER_KEEPS_TIES_AT_THE_BOUNDARY = variant(SAMPLER_OK, "        z = z.masked_fill(drop, float(\"-inf\"))", '''        edge = torch.where(drop, torch.full_like(p, 2.0), p).amin(dim=-1, keepdim=True)
        z = z.masked_fill(p < edge, float("-inf"))''')
SAMPLER_TOP_P_FIRST = variant(variant(SAMPLER_OK, '''    if top_k is not None and top_k < z.shape[-1]:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
''', ""), "    return torch.softmax(z, dim=-1)", '''    if top_k is not None and top_k < z.shape[-1]:
        kth = torch.topk(z, top_k, dim=-1).values[..., -1:]
        z = z.masked_fill(z < kth, float("-inf"))
    return torch.softmax(z, dim=-1)''')
SAMPLER_IN_THE_LOGITS_DTYPE = variant(SAMPLER_OK, "z = logits.double() if logits.dtype == torch.float64 else logits.float()",
                                      "z = logits")
SAMPLER_TEMPERATURE_ON_PROBABILITIES = variant(SAMPLER_OK, "    z = z / temperature\n",
                                               "    z = torch.log(torch.softmax(z, dim=-1) / temperature)\n")

# ------------------------------------------------------------------------------------------- beam search
BEAM_OK = '''
import math
from dataclasses import dataclass


@dataclass
class Hyp:
    tokens: tuple
    logprob: float
    score: float


def beam_search_table(table, beam_width, eos_id=None, length_penalty=0.0, bos=0):
    T, V = table.shape[0], table.shape[1]
    lp = table.tolist()
    active = [((), 0.0)]                              # one live empty prefix
    finished = []
    steps = 0
    for t in range(T):
        steps += 1
        cands = []
        for b, (toks, s) in enumerate(active):
            prev = toks[-1] if toks else bos
            for v in range(V):
                cands.append((s + lp[t][prev][v], b, v))
        cands.sort(key=lambda c: (-c[0], c[1], c[2]))
        nxt = []
        for rank, (s, b, v) in enumerate(cands[: 2 * beam_width]):
            if s == -math.inf:
                break
            toks = active[b][0] + (v,)
            if v == eos_id:
                if rank < beam_width:
                    finished.append(Hyp(toks, s, s / len(toks) ** length_penalty))
            else:
                nxt.append((toks, s))
            if len(nxt) == beam_width:
                break
        active = nxt
        if len(finished) >= beam_width or not active:
            break
    if steps == T and active and len(finished) < beam_width:
        finished += [Hyp(toks, s, s / len(toks) ** length_penalty) for toks, s in active]
    finished.sort(key=lambda h: -h.score)
    return finished[:beam_width]
'''

BEAM_TUPLES_OK = variant(variant(variant(variant(BEAM_OK, "finished.append(Hyp(toks, s, s / len(toks) ** length_penalty))",
                                                 "finished.append((toks, s, s / len(toks) ** length_penalty))"),
                                         "finished += [Hyp(toks, s, s / len(toks) ** length_penalty) for toks, s in active]",
                                         "finished += [(toks, s, s / len(toks) ** length_penalty) for toks, s in active]"),
                                 "finished.sort(key=lambda h: -h.score)", "finished.sort(key=lambda h: -h[2])"),
                         "    return finished[:beam_width]", "    return [tuple(h) for h in finished[:beam_width]]")
BEAM_MULTIPLIES_PROBABILITIES = variant(variant(variant(BEAM_OK, "active = [((), 0.0)]", "active = [((), 1.0)]"),
                                                "cands.append((s + lp[t][prev][v], b, v))",
                                                "cands.append((s * math.exp(lp[t][prev][v]), b, v))"),
                                        "    finished.sort(key=lambda h: -h.score)",
                                        "    finished = [Hyp(h.tokens, math.log(h.logprob) if h.logprob > 0 else -math.inf,\n"
                                        "                    (math.log(h.logprob) if h.logprob > 0 else -math.inf) / len(h.tokens) ** length_penalty)\n"
                                        "                for h in finished]\n"
                                        "    finished.sort(key=lambda h: -h.score)")
BEAM_K_COPIES = variant(BEAM_OK, "active = [((), 0.0)]", "active = [((), 0.0)] * beam_width")
BEAM_FINISHED_STAY_IN_THE_BEAM = variant(BEAM_OK, '''            if v == eos_id:
                if rank < beam_width:
                    finished.append(Hyp(toks, s, s / len(toks) ** length_penalty))
            else:
                nxt.append((toks, s))''', '''            if v == eos_id and rank < beam_width:
                finished.append(Hyp(toks, s, s / len(toks) ** length_penalty))
            nxt.append((toks, s))''')
BEAM_NO_LENGTH_PENALTY = variant(variant(BEAM_OK, "finished.append(Hyp(toks, s, s / len(toks) ** length_penalty))",
                                         "finished.append(Hyp(toks, s, s))"),
                                 "finished += [Hyp(toks, s, s / len(toks) ** length_penalty) for toks, s in active]",
                                 "finished += [Hyp(toks, s, s) for toks, s in active]")

# ---------------------------------------------------------------------------------------------- norms
LAYER_NORM_OK = '''
import torch


def layer_norm(x, weight=None, bias=None, eps=1e-6):
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    mean = xf.mean(dim=-1, keepdim=True)
    var = ((xf - mean) ** 2).mean(dim=-1, keepdim=True)
    y = (xf - mean) / torch.sqrt(var + eps)
    if weight is not None:
        y = y * weight
    if bias is not None:
        y = y + bias
    return y.to(x.dtype)
'''

LAYER_NORM_ONE_PASS = variant(LAYER_NORM_OK, "var = ((xf - mean) ** 2).mean(dim=-1, keepdim=True)",
                              "var = (xf * xf).mean(dim=-1, keepdim=True) - mean * mean")
LAYER_NORM_UNBIASED = variant(LAYER_NORM_OK, "var = ((xf - mean) ** 2).mean(dim=-1, keepdim=True)",
                              "var = ((xf - mean) ** 2).sum(dim=-1, keepdim=True) / max(x.shape[-1] - 1, 1)")
LAYER_NORM_EPS_OUTSIDE = variant(LAYER_NORM_OK, "y = (xf - mean) / torch.sqrt(var + eps)",
                                 "y = (xf - mean) / (torch.sqrt(var) + eps)")
LAYER_NORM_IN_BF16 = variant(LAYER_NORM_OK, "xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x", "xf = x")

RMS_NORM_OK = '''
import torch


def rms_norm(x, weight=None, eps=1e-6):
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = xf / torch.sqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)
    if weight is not None:
        y = y * weight
    return y.to(x.dtype)
'''

RMS_NORM_NO_EPS = variant(RMS_NORM_OK, "torch.sqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)",
                          "torch.sqrt((xf * xf).mean(dim=-1, keepdim=True))")
RMS_NORM_EPS_OUTSIDE = variant(RMS_NORM_OK, "torch.sqrt((xf * xf).mean(dim=-1, keepdim=True) + eps)",
                               "(torch.sqrt((xf * xf).mean(dim=-1, keepdim=True)) + eps)")
RMS_NORM_SUBTRACTS_THE_MEAN = variant(RMS_NORM_OK, "    y = xf / torch.sqrt",
                                      "    xf = xf - xf.mean(dim=-1, keepdim=True)\n    y = xf / torch.sqrt")
RMS_NORM_IN_FP16 = variant(RMS_NORM_OK, "xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x", "xf = x")

# ----------------------------------------------------------------------------------------------- RoPE
ROPE_OK = '''
import torch


def rope(x, positions, base=10000.0, layout="interleaved"):
    d = x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions.to(torch.float64)[:, None] * theta[None, :]
    cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
    if layout == "interleaved":
        a, b = x[..., 0::2], x[..., 1::2]
        return torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2)
    a, b = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)
'''

ROPE_WRONG_FREQUENCIES = variant(ROPE_OK, "theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)",
                                 "theta = base ** (-torch.arange(0, d // 2, dtype=torch.float64) / d)")
ROPE_IGNORES_POSITIONS = variant(ROPE_OK, "angle = positions.to(torch.float64)[:, None]",
                                 "angle = torch.arange(x.shape[-2], dtype=torch.float64)[:, None]")
ROPE_ANGLES_IN_X_DTYPE = variant(variant(ROPE_OK, "theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)",
                                         "theta = base ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)\n"
                                         "    theta = theta.to(x.dtype)"),
                                 "angle = positions.to(torch.float64)[:, None]", "angle = positions.to(x.dtype)[:, None]")
ROPE_ONE_LAYOUT = variant(ROPE_OK, 'if layout == "interleaved":', "if False:")

# ----------------------------------------------------------------------------------------------- INT8
INT8_OK = '''
import torch


def quantize_int8(x, per_channel=True):
    amax = x.abs().amax(dim=-1, keepdim=True) if per_channel else x.abs().amax().reshape(1, 1)
    scale = (amax / 127).clamp_min(1e-12)
    q = torch.clamp(torch.round(x / scale), -127, 127).to(torch.int8)
    return q, scale
'''

INT8_TRUNCATES = variant(INT8_OK, "torch.clamp(torch.round(x / scale), -127, 127)", "torch.clamp(x / scale, -127, 127)")
INT8_ZERO_SCALE = variant(INT8_OK, "scale = (amax / 127).clamp_min(1e-12)", "scale = amax / 127")
INT8_SCALE_OVER_128 = variant(INT8_OK, "scale = (amax / 127).clamp_min(1e-12)\n"
                              "    q = torch.clamp(torch.round(x / scale), -127, 127).to(torch.int8)",
                              "scale = (amax / 128).clamp_min(1e-12)\n"
                              "    q = torch.round(x / scale).to(torch.int8)\n"
                              "    scale = scale * 128 / 127")
INT8_ALWAYS_PER_TENSOR = variant(INT8_OK, "if per_channel else", "if False else")

# ------------------------------------------------------------------------------------------------ BPE
BPE_OK = '''
class BPETokenizer:
    def __init__(self):
        self.merges = []
        self.vocab = {i: bytes([i]) for i in range(256)}

    @staticmethod
    def _merge(ids, pair, new):
        out, i = [], 0
        while i < len(ids):
            if i + 1 < len(ids) and (ids[i], ids[i + 1]) == pair:
                out.append(new)
                i += 2
            else:
                out.append(ids[i])
                i += 1
        return out

    def train(self, text, num_merges):
        ids = list(text.encode("utf-8"))
        self.merges = []
        self.vocab = {i: bytes([i]) for i in range(256)}
        for k in range(num_merges):
            counts = {}
            for pair in zip(ids, ids[1:]):
                counts[pair] = counts.get(pair, 0) + 1
            if not counts:
                break
            best = max(counts, key=counts.get)
            ids = self._merge(ids, best, 256 + k)
            self.merges.append(best)
            self.vocab[256 + k] = self.vocab[best[0]] + self.vocab[best[1]]
        return list(self.merges)

    def encode(self, text):
        ids = list(text.encode("utf-8"))
        for k, pair in enumerate(self.merges):
            ids = self._merge(ids, pair, 256 + k)
        return ids

    def decode(self, ids):
        return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")
'''

BPE_ENCODE_BY_FREQUENCY = variant(BPE_OK, '''        ids = list(text.encode("utf-8"))
        for k, pair in enumerate(self.merges):
            ids = self._merge(ids, pair, 256 + k)
        return ids''', '''        ids = list(text.encode("utf-8"))
        rank = {pair: k for k, pair in enumerate(self.merges)}
        while True:
            counts = {}
            for pair in zip(ids, ids[1:]):
                if pair in rank:
                    counts[pair] = counts.get(pair, 0) + 1
            if not counts:
                return ids
            best = max(counts, key=counts.get)          # the most frequent known pair of this text
            ids = self._merge(ids, best, 256 + rank[best])''')
BPE_LONGEST_MATCH = variant(BPE_OK, '''        ids = list(text.encode("utf-8"))
        for k, pair in enumerate(self.merges):
            ids = self._merge(ids, pair, 256 + k)
        return ids''', '''        data, out, i = text.encode("utf-8"), [], 0
        by_bytes = {}
        for k in sorted(self.vocab):
            by_bytes.setdefault(self.vocab[k], k)
        longest = max(len(b) for b in by_bytes)
        while i < len(data):
            for n in range(min(longest, len(data) - i), 0, -1):
                if data[i:i + n] in by_bytes:
                    out.append(by_bytes[data[i:i + n]])
                    i += n
                    break
        return out''')
BPE_DECODES_TOKEN_BY_TOKEN = variant(BPE_OK, 'return b"".join(self.vocab[i] for i in ids).decode("utf-8", errors="replace")',
                                     'return "".join(self.vocab[i].decode("utf-8", errors="replace") for i in ids)')
BPE_COUNTS_WITHOUT_OVERLAP = variant(BPE_OK, '''            counts = {}
            for pair in zip(ids, ids[1:]):
                counts[pair] = counts.get(pair, 0) + 1''', '''            counts, last = {}, {}
            for j, pair in enumerate(zip(ids, ids[1:])):
                if last.get(pair) == j - 1:              # overlaps the previous occurrence: not counted
                    continue
                last[pair] = j
                counts[pair] = counts.get(pair, 0) + 1''')
BPE_MERGE_OVERLAPS = variant(BPE_OK, '''                out.append(new)
                i += 2''', '''                out.append(new)
                i += 1
                if i + 1 >= len(ids) or (ids[i], ids[i + 1]) != pair:
                    i += 1''')

# ----------------------------------------------------------------------------------------- GPT block
GPT_OK = '''
import math
import torch
import torch.nn.functional as F


def _ln(x, w, b):
    mean = x.mean(dim=-1, keepdim=True)
    var = ((x - mean) ** 2).mean(dim=-1, keepdim=True)
    return (x - mean) / torch.sqrt(var + 1e-5) * w + b


def _attn(x, p, heads):
    B, T, D = x.shape
    d = D // heads

    def split(y):
        return y.view(B, T, heads, d).transpose(1, 2)

    q, k, v = split(x @ p["wq"]), split(x @ p["wk"]), split(x @ p["wv"])
    s = q @ k.transpose(-1, -2) / math.sqrt(d)
    s = s.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))
    o = torch.softmax(s, dim=-1) @ v
    return o.transpose(1, 2).reshape(B, T, D) @ p["wo"]


def gpt_forward(tokens, params, heads):
    p = params
    T = tokens.shape[1]
    h = p["wte"][tokens] + p["wpe"][:T]
    h = h + _attn(_ln(h, p["ln1_w"], p["ln1_b"]), p, heads)
    m = _ln(h, p["ln2_w"], p["ln2_b"])
    h = h + F.gelu(m @ p["w1"] + p["b1"]) @ p["w2"] + p["b2"]
    logits = _ln(h, p["lnf_w"], p["lnf_b"]) @ p["wte"].T
    z = logits[:, :-1].reshape(-1, logits.shape[-1])
    loss = F.cross_entropy(z, tokens[:, 1:].reshape(-1))
    return logits, loss
'''

GPT_NO_SHIFT = variant(variant(GPT_OK, "z = logits[:, :-1].reshape(-1, logits.shape[-1])", "z = logits.reshape(-1, logits.shape[-1])"),
                       "tokens[:, 1:].reshape(-1)", "tokens.reshape(-1)")
GPT_RESIDUAL_ON_THE_NORMED_INPUT = variant(GPT_OK, "    h = h + _attn(_ln(h, p[\"ln1_w\"], p[\"ln1_b\"]), p, heads)\n",
                                           "    a = _ln(h, p[\"ln1_w\"], p[\"ln1_b\"])\n    h = a + _attn(a, p, heads)\n")
GPT_POST_NORM = variant(GPT_OK, "    h = h + _attn(_ln(h, p[\"ln1_w\"], p[\"ln1_b\"]), p, heads)\n",
                        "    h = _ln(h + _attn(h, p, heads), p[\"ln1_w\"], p[\"ln1_b\"])\n")
GPT_LOG_OF_SOFTMAX = variant(GPT_OK, "    loss = F.cross_entropy(z, tokens[:, 1:].reshape(-1))",
                             "    probs = torch.softmax(z, dim=-1)\n"
                             "    loss = -torch.log(probs.gather(1, tokens[:, 1:].reshape(-1, 1))).mean()")
GPT_NOT_CAUSAL = variant(GPT_OK, '    s = s.masked_fill(~torch.tril(torch.ones(T, T, dtype=torch.bool)), float("-inf"))\n', "")
