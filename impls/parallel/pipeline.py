"""Pipeline-parallel schedules and an exact simulator of their timelines (no torch needed).

A schedule gives each of the ``p`` devices the ordered list of operations it runs:
``F`` (forward of one micro-batch through one model chunk), ``B`` (its backward) and, for the
zero-bubble schedules, ``W`` (the weight-gradient half of the backward, split off ``B``).
With ``v`` chunks per device (interleaved 1F1B) chunk ``c`` of device ``d`` is virtual stage
``c·p + d`` (Megatron's assignment), so a micro-batch visits the devices ``v`` times.

``simulate`` places every operation as early as its device and its dependencies allow:

    F(mb, s) after F(mb, s-1);   B(mb, s) after B(mb, s+1) (the last stage: after its F);
    W(mb, s) after B(mb, s);     one operation at a time per device, in the schedule's order.

A chunk operation takes ``t/v`` (a chunk holds 1/v of the device's layers). Point-to-point
latency is taken as zero. Times are exact fractions, so bubble fractions compare exactly with
the closed forms (p devices, m micro-batches, equal stages):

    GPipe, 1F1B        bubble / iteration = (p-1)/(m+p-1),   bubble / ideal = (p-1)/m
    interleaved (v)    bubble / ideal = (p-1)/(v·m)          (Narayanan et al. 2021, §2.2.2)
    ZB-H1 (t_F=t_B=t_W) bubble time (p-1)(t_F+t_B-t_W): a third of 1F1B's (Qi et al. 2024, §2.1)

Peak in-flight micro-batches per device: forwards started whose backward has not finished -- with the
backward split, whose W has not finished, since W still needs the stage's saved inputs (GPipe: m; 1F1B:
p - d on device d; ZB-H1: p on every device, 1F1B's peak but reached everywhere; interleaved: in chunks).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from math import gcd
from typing import Callable


@dataclass(frozen=True, order=True)
class Op:
    kind: str       # "F", "B" or "W"
    micro: int
    chunk: int = 0  # model chunk on this device (0..v-1)

    def label(self, chunks: int = 1) -> str:
        return f"{self.kind}{self.micro}" + ("" if chunks == 1 else "abcdefghijklmnopqrstuvwxyz"[self.chunk])


Schedule = list[list[Op]]  # one ordered list per device


def _check(p: int, m: int, v: int = 1) -> None:
    if p < 1:
        raise ValueError(f"--stages must be at least 1, got {p}")
    if m < 1:
        raise ValueError(f"--micro must be at least 1, got {m}")
    if v < 1:
        raise ValueError(f"--chunks must be at least 1, got {v}")


# ------------------------------------------------------------------------------ schedules
def gpipe(p: int, m: int) -> Schedule:
    """GPipe (Huang et al. 2019): every forward, then every backward."""
    _check(p, m)
    return [[Op("F", i) for i in range(m)] + [Op("B", i) for i in range(m)] for _ in range(p)]


def one_f_one_b(p: int, m: int) -> Schedule:
    """1F1B (PipeDream-Flush): p-d-1 warm-up forwards on device d, then alternate F and B."""
    _check(p, m)
    out = []
    for d in range(p):
        warm = min(p - d - 1, m)
        ops = [Op("F", i) for i in range(warm)]
        for i in range(m - warm):
            ops += [Op("F", warm + i), Op("B", i)]
        ops += [Op("B", i) for i in range(m - warm, m)]
        out.append(ops)
    return out


def interleaved(p: int, m: int, v: int = 2) -> Schedule:
    """Interleaved 1F1B (Narayanan et al. 2021, §2.2.2; Megatron-LM's schedule).

    Micro-batches go through the chunks in groups of p; device d warms up with
    2(p-d-1) + (v-1)p chunk forwards. Megatron requires m to be a multiple of p.
    """
    _check(p, m, v)
    if m % p:
        raise ValueError(f"interleaved 1F1B needs --micro to be a multiple of --stages ({m} is not a multiple of {p})")
    total = m * v

    def op(kind: str, k: int) -> Op:
        in_group = k % (p * v)
        chunk = in_group // p
        return Op(kind, (k // (p * v)) * p + in_group % p, chunk if kind == "F" else v - 1 - chunk)

    out = []
    for d in range(p):
        warm = total if m == p else min((p - d - 1) * 2 + (v - 1) * p, total)
        ops = [op("F", k) for k in range(warm)]
        for i in range(total - warm):
            ops += [op("F", warm + i), op("B", i)]
        ops += [op("B", k) for k in range(total - warm, total)]
        out.append(ops)
    return out


def zero_bubble_h1(p: int, m: int) -> Schedule:
    """ZB-H1 (Qi et al. 2024, §2.1, Fig. 3 top): 1F1B with the backward split into B (input
    gradient, on the critical path) and W (weight gradient, deferrable).

    Device d keeps 1F1B's order of F and B and runs W(i) right after B(i + d): the last device
    lags its weight gradients by p-1 micro-batches, the first by none, so every device holds p
    micro-batches between F and W (1F1B's peak, which 1F1B reaches only on device 0: the peak over
    devices is unchanged, the later devices hold more) and the late W's fill the cool-down. With
    t_F = t_B = t_W the bubble is (p-1)(t_F + t_B - t_W), a third of 1F1B's.
    """
    out = []
    for d, ops in enumerate(one_f_one_b(p, m)):
        seq: list[Op] = []
        for op in ops:
            seq.append(op)
            if op.kind == "B" and op.micro >= d:
                seq.append(Op("W", op.micro - d))
        seq += [Op("W", i) for i in range(max(0, m - d), m)]
        out.append(seq)
    return out


SCHEDULES: dict[str, Callable[..., Schedule]] = {
    "gpipe": gpipe, "1f1b": one_f_one_b, "interleaved": interleaved, "zb-h1": zero_bubble_h1,
}


def build(name: str, p: int, m: int, v: int = 1) -> Schedule:
    """The named schedule; ``v`` (chunks per device) only for ``interleaved``."""
    if name not in SCHEDULES:
        raise ValueError(f"--schedule must be one of {', '.join(SCHEDULES)}, not {name!r}")
    if name == "interleaved":
        if v < 2:
            raise ValueError(f"interleaved 1F1B needs --chunks of at least 2, got {v}")
        return interleaved(p, m, v)
    if v != 1:
        raise ValueError(f"--chunks applies to the interleaved schedule only (got --chunks {v} with {name})")
    return SCHEDULES[name](p, m)


# ------------------------------------------------------------------------------ simulator
@dataclass(frozen=True)
class Slot:
    op: Op
    start: Fraction
    end: Fraction


@dataclass
class Timeline:
    p: int
    m: int
    v: int
    slots: list[list[Slot]]          # per device, in execution order
    makespan: Fraction = Fraction(0)
    durations: dict[str, Fraction] = field(default_factory=dict)

    @property
    def busy(self) -> list[Fraction]:
        return [sum((s.end - s.start for s in dev), Fraction(0)) for dev in self.slots]

    @property
    def bubble(self) -> Fraction:
        """Idle share of the p × makespan device-time: (p-1)/(m+p-1) for GPipe and 1F1B."""
        return bubble_fraction(self)

    @property
    def bubble_over_ideal(self) -> Fraction:
        """Idle time per device over its compute time (Megatron's t_pb / t_id): (p-1)/m for 1F1B."""
        b = self.bubble
        return b / (1 - b)

    def peak_in_flight(self) -> list[int]:
        """Per device: the most chunk-forwards started whose backward has not finished (its W when the
        schedule splits the backward: W still needs the saved inputs, so the activations live until then)."""
        release = "W" if any(s.op.kind == "W" for dev in self.slots for s in dev) else "B"
        out = []
        for dev in self.slots:
            live = peak = 0
            for s in dev:
                if s.op.kind == "F":
                    live += 1
                    peak = max(peak, live)
                elif s.op.kind == release:
                    live -= 1
            out.append(peak)
        return out

    def render(self) -> str:
        """One row per device, one cell per time unit: the op's label while it runs, '·' when idle."""
        times = [s.end - s.start for dev in self.slots for s in dev] + [s.start for dev in self.slots for s in dev]
        unit = Fraction(0)
        for t in times:
            if t:
                unit = Fraction(gcd(unit.numerator * t.denominator, t.numerator * unit.denominator),
                                unit.denominator * t.denominator) if unit else t
        width = max(len(s.op.label(self.v)) for dev in self.slots for s in dev)
        cells = int(self.makespan / unit)
        rows = []
        for d, dev in enumerate(self.slots):
            row = ["·" * width] * cells
            for s in dev:
                for c in range(int(s.start / unit), int(s.end / unit)):
                    row[c] = s.op.label(self.v).ljust(width)
            rows.append(f"dev {d:<2}|" + " ".join(row) + "|")
        return "\n".join(rows)


def bubble_fraction(tl: Timeline) -> Fraction:
    """1 - (total busy device-time) / (p × makespan)."""
    return 1 - sum(tl.busy, Fraction(0)) / (tl.p * tl.makespan)


def simulate(schedule: Schedule, v: int = 1, t_f: float | Fraction = 1, t_b: float | Fraction = 2,
             t_w: float | Fraction = 0) -> Timeline:
    """Place every op of ``schedule`` as early as possible; raise if the orders deadlock.

    ``t_f``, ``t_b``, ``t_w``: the time of one micro-batch through one device's layers (forward,
    backward — the input-gradient half when W ops are present — and weight gradient).
    """
    p = len(schedule)
    if p == 0:
        raise ValueError("a schedule needs at least one device")
    t_f, t_b, t_w = Fraction(t_f), Fraction(t_b), Fraction(t_w)
    dur = {"F": t_f / v, "B": t_b / v, "W": t_w / v}
    micro = sorted({op.micro for dev in schedule for op in dev})
    m = len(micro)
    if micro != list(range(m)):
        raise ValueError(f"micro-batches must be numbered 0..m-1, got {micro}")
    kinds = {op.kind for dev in schedule for op in dev}
    for d, dev in enumerate(schedule):
        want = sorted(Op(k, i, c) for k in kinds for i in range(m) for c in range(v))
        if sorted(dev) != want:
            raise ValueError(f"device {d} must run each of {sorted(kinds)} once per micro-batch and chunk")
    last = p * v - 1
    end: dict[tuple[str, int, int], Fraction] = {}
    slots: list[list[Slot]] = [[] for _ in range(p)]
    nxt, free = [0] * p, [Fraction(0)] * p
    left = sum(len(dev) for dev in schedule)
    while left:
        progressed = False
        for d in range(p):
            while nxt[d] < len(schedule[d]):
                op = schedule[d][nxt[d]]
                s = op.chunk * p + d
                if op.kind == "F":
                    deps = [("F", op.micro, s - 1)] if s > 0 else []
                elif op.kind == "B":
                    deps = [("F", op.micro, s)] + ([("B", op.micro, s + 1)] if s < last else [])
                else:
                    deps = [("B", op.micro, s)]
                if any(dep not in end for dep in deps):
                    break
                start = max([free[d]] + [end[dep] for dep in deps])
                stop = start + dur[op.kind]
                slots[d].append(Slot(op, start, stop))
                end[(op.kind, op.micro, s)] = stop
                free[d] = stop
                nxt[d] += 1
                left -= 1
                progressed = True
        if not progressed:
            stuck = {d: schedule[d][nxt[d]] for d in range(p) if nxt[d] < len(schedule[d])}
            raise ValueError(f"the schedule deadlocks: devices wait on each other at {stuck}")
    tl = Timeline(p, m, v, slots, max(free), {"F": t_f, "B": t_b, "W": t_w})
    return tl


def run(name: str, p: int, m: int, v: int = 1, t_f: float = 1, t_b: float = 2, t_w: float = 1) -> Timeline:
    """Build and simulate a named schedule; ZB-H1 splits the backward into B and W of ``t_w``."""
    if name == "zb-h1":
        if v != 1:
            raise ValueError(f"--chunks applies to the interleaved schedule only (got --chunks {v} with {name})")
        return simulate(zero_bubble_h1(p, m), 1, t_f, t_b, t_w)
    return simulate(build(name, p, m, v), v, t_f, t_b, 0)
