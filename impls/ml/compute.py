"""Training arithmetic: FLOPs, time, MFU and HFU of a run, checked against published runs.

For a decoder ``cfg`` (``impls/ml/transformer.py``) trained on D tokens of sequence length T:

    model FLOPs   C = D·(6·N_mm + 12·L·H·d_h·T)                 (PaLM, Appendix B; ``flops_per_token``)
    time          t = C / (n_gpu · peak · MFU)                   GPU-hours = n_gpu · t / 3600
    MFU           = achieved model FLOPs/s ÷ peak FLOPs/s        (recomputation excluded)
    HFU           = executed FLOPs/s ÷ peak = MFU · (hardware FLOPs / model FLOPs)   (Korthikanti et al. §6)

``implied_mfu`` inverts a published GPU-hour figure into the MFU it implies, which is how the estimate is
tested: the published runs in ``PUBLISHED_RUNS`` must fall inside the range an MFU assumption spans.
Peak FLOP/s are dense BF16 from NVIDIA's datasheets (``impls/inference/roofline.GPUS``; the 2:4-sparsity
figure is twice as large and no training run uses it).

``conv2d_flops`` and ``conv2d_params`` count a 2-D convolution (stride and padding only change H_out, W_out):
FLOPs = 2·(C_in/g)·K_h·K_w·C_out·H_out·W_out (a multiply and an add per weight per output position, plus
C_out·H_out·W_out for a bias), params = C_out·(C_in/g)·K_h·K_w (+ C_out).
"""

from __future__ import annotations

from dataclasses import dataclass

from impls.inference.roofline import GPUS, GPU
from impls.ml.counting import Decoder, flops_per_token, hardware_flops_per_token, model, param_counts

GPU_NAMES = {"h100": "H100-SXM", "h200": "H200-SXM", "a100": "A100-SXM-80GB", "a100-40gb": "A100-SXM-40GB"}


def gpu(name: str) -> GPU:
    """``h100``, ``h200``, ``a100``, ``a100-40gb`` (or a full name of ``roofline.GPUS``), case-insensitive."""
    key = name.strip().lower()
    full = GPU_NAMES.get(key) or next((g for g in GPUS if g.lower() == key), None)
    if full is None:
        raise KeyError(f"unknown GPU {name!r}; known: {', '.join(GPU_NAMES)}")
    return GPUS[full]


@dataclass(frozen=True)
class TrainCost:
    model: Decoder
    gpu: GPU
    tokens: float
    gpus: int
    mfu: float
    seq: int
    recompute: str
    params: int                   # all parameters
    matmul_params: int            # N of 6·N·D
    dense_flops_per_token: float  # 6·N_mm
    attention_flops_per_token: float  # 12·L·H·d_h·T
    model_flops: float            # C
    hardware_flops: float         # C plus recomputation
    seconds: float

    @property
    def gpu_hours(self) -> float:
        return self.seconds * self.gpus / 3600

    @property
    def days(self) -> float:
        return self.seconds / 86400

    @property
    def hfu(self) -> float:
        return self.mfu * self.hardware_flops / self.model_flops

    @property
    def tokens_per_gpu_second(self) -> float:
        return self.tokens / (self.seconds * self.gpus)


def train_cost(cfg: Decoder, tokens: float, gpus: int, device: GPU, mfu: float, seq: int | None = None,
               recompute: str = "none") -> TrainCost:
    """Wall-clock time of training ``cfg`` on ``tokens`` with ``gpus`` devices running at ``mfu``."""
    if tokens <= 0 or gpus < 1 or not 0 < mfu <= 1:
        raise ValueError("tokens > 0, gpus >= 1 and 0 < mfu <= 1 are required")
    t = cfg.context if seq is None else seq
    per_token = flops_per_token(cfg, t)
    c = per_token["total"] * tokens
    hw = hardware_flops_per_token(cfg, t, recompute) * tokens
    seconds = c / (gpus * device.peak_flops * mfu)
    return TrainCost(cfg, device, tokens, gpus, mfu, t, recompute, param_counts(cfg)["total"],
                     param_counts(cfg)["matmul"], per_token["dense"], per_token["attention"], c, hw, seconds)


def implied_mfu(model_flops: float, gpu_hours: float, device: GPU) -> float:
    """The MFU at which ``gpu_hours`` of ``device`` deliver ``model_flops``."""
    return model_flops / (gpu_hours * 3600 * device.peak_flops)


@dataclass(frozen=True)
class PublishedRun:
    model: str                    # a key of transformer.MODELS
    gpu: str
    tokens: float
    gpu_hours: float
    source: str


LLAMA2 = "Touvron et al. 2023, Llama 2, Table 1 (2.0T tokens, 4k context) and Table 2 (A100-80GB GPU hours)"
LLAMA31_CARD = ("Llama 3.1 model card, Hardware and Software: training time in H100-80GB GPU hours; "
                "Dubey et al. 2024, The Llama 3 Herd of Models, §3 (15.6T tokens for the 405B)")
LLAMA3_CARD = "Llama 3 model card (April 2024), Hardware and Software: H100-80GB GPU hours, 15T+ tokens"
PUBLISHED_RUNS: list[PublishedRun] = [
    PublishedRun("llama-2-7b", "a100", 2.0e12, 184_320, LLAMA2),
    PublishedRun("llama-2-13b", "a100", 2.0e12, 368_640, LLAMA2),
    PublishedRun("llama-2-70b", "a100", 2.0e12, 1_720_320, LLAMA2),
    PublishedRun("llama-3.1-405b", "h100", 15.6e12, 30.84e6, LLAMA31_CARD),
    PublishedRun("llama-3-8b", "h100", 15e12, 1.3e6, LLAMA3_CARD),
    PublishedRun("llama-3-70b", "h100", 15e12, 6.4e6, LLAMA3_CARD),
]


def published_mfu(run: PublishedRun) -> float:
    """The MFU a published run's GPU-hours imply under our FLOP count (6·N_mm + attention at the paper's T)."""
    cfg = model(run.model)
    return implied_mfu(flops_per_token(cfg)["total"] * run.tokens, run.gpu_hours, gpu(run.gpu))


# ------------------------------------------------------------------------------------ convolution
def conv2d_flops(c_in: int, c_out: int, k: int | tuple[int, int], h_out: int, w_out: int, groups: int = 1,
                 bias: bool = False) -> int:
    kh, kw = (k, k) if isinstance(k, int) else k
    return 2 * (c_in // groups) * kh * kw * c_out * h_out * w_out + (c_out * h_out * w_out if bias else 0)


def conv2d_params(c_in: int, c_out: int, k: int | tuple[int, int], groups: int = 1, bias: bool = True) -> int:
    kh, kw = (k, k) if isinstance(k, int) else k
    return c_out * (c_in // groups) * kh * kw + (c_out if bias else 0)
