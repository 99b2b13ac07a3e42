r"""SIMT execution of one warp: active masks through branches and loops, and what divergence costs.

A program is a tuple of statements: ``Op(name, cost)``, ``If(cond, then, orelse)`` and
``Loop(trips, body)``, where ``cond(lane, iters)`` and ``trips(lane, iters)`` may depend on the lane and
the enclosing loops' iteration counters. The warp issues one instruction at a time for the lanes of
the current *active mask*. At an ``If`` the mask splits into the lanes whose condition holds and the
rest; each non-empty side runs in turn with its own mask, and the warp reconverges after the ``If``
(the immediate post-dominator). A ``Loop`` runs while any lane still has iterations left, with the
finished lanes masked off. So

$$\text{cost} = \sum_{\text{issued instructions}} \text{cost}(op),$$

the *sum* over the paths some lane takes (a path no lane takes is skipped; a uniform branch costs only
its taken side); idle lanes still occupy their issue slot, which is the lost throughput.

:func:`reduction_outcomes` is the other half of the story since Volta's independent thread scheduling:
the lanes of a warp are no longer guaranteed to execute in lockstep, so code that relied on it (the
unrolled last warp of a shared-memory reduction without ``__syncwarp``) can read a value its neighbour
has already overwritten. It enumerates every interleaving of the lanes' reads and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable, Sequence

__all__ = ["Op", "If", "Loop", "run", "cost", "utilization", "reduction_outcomes"]

FULL = (1 << 32) - 1


@dataclass(frozen=True)
class Op:
    name: str
    cost: int = 1


@dataclass(frozen=True)
class If:
    cond: Callable[[int, tuple], bool]
    then: tuple
    orelse: tuple = ()


@dataclass(frozen=True)
class Loop:
    trips: Callable[[int, tuple], int]
    body: tuple


def _lanes(mask: int) -> list[int]:
    return [i for i in range(mask.bit_length()) if mask >> i & 1]


def _exec(stmts: Sequence, mask: int, iters: tuple, out: list, else_first: bool, interleave: bool = False) -> None:
    for s in stmts:
        if not mask:
            return
        if isinstance(s, Op):
            out.append((s, mask))
        elif isinstance(s, If):
            taken = sum(1 << i for i in _lanes(mask) if s.cond(i, iters))
            sides = [(s.then, taken), (s.orelse, mask & ~taken)]
            if interleave and taken and mask & ~taken:
                # independent thread scheduling may alternate between the two sides, one instruction at a time
                a: list = []
                b: list = []
                _exec(s.then, taken, iters, a, else_first, interleave)
                _exec(s.orelse, mask & ~taken, iters, b, else_first, interleave)
                for i in range(max(len(a), len(b))):
                    out.extend(x[i] for x in (a, b) if i < len(x))
            else:
                for body, m in (reversed(sides) if else_first else sides):
                    if m:
                        _exec(body, m, iters, out, else_first, interleave)
            # reconverge: the statements after the If run with the full mask again
        elif isinstance(s, Loop):
            i = 0
            while True:
                active = sum(1 << ln for ln in _lanes(mask) if s.trips(ln, iters) > i)
                if not active:
                    break
                _exec(s.body, active, iters + (i,), out, else_first, interleave)
                i += 1
        else:
            raise TypeError(f"not a statement: {s!r}")


def run(program: Sequence, mask: int = FULL, *, else_first: bool = False, interleave: bool = False
        ) -> list[tuple[Op, int]]:
    """The warp's issued instructions, in order, each with its active mask (bit i = lane i).

    ``interleave``: schedule as Volta's independent thread scheduling may, alternating between the two sides of
    a divergent branch one instruction at a time instead of running one side to its end first. Each issued
    instruction still carries the lanes of one side only: a warp issues one instruction per slot."""
    out: list[tuple[Op, int]] = []
    _exec(program, mask, (), out, else_first, interleave)
    return out


def cost(program: Sequence, mask: int = FULL) -> int:
    """Issue slots the warp spends: the sum of the costs of every instruction issued on any path taken."""
    return sum(op.cost for op, _ in run(program, mask))


def utilization(program: Sequence, mask: int = FULL) -> float:
    """Active lane-slots over the lane-slots the issued instructions occupy (1.0 without divergence)."""
    trace = run(program, mask)
    width = max(32, mask.bit_length())
    slots = sum(op.cost * width for op, _ in trace)
    return sum(op.cost * bin(m).count("1") for op, m in trace) / slots if slots else 1.0


def reduction_outcomes(values: Sequence[int], *, sync: str) -> frozenset[int]:
    r"""Every value ``s[0]`` can end with when ``L = len(values)//2`` lanes run the unrolled tree reduction

        for off in (L, L/2, ..., 1):   a = s[t]; b = s[t + off]; s[t] = a + b      (lane t)

    on shared memory ``s = values``, over all interleavings the scheduling allows:
    ``"lockstep"`` (pre-Volta warp-synchronous execution: each of the three instructions runs for all
    lanes at once), ``"none"`` (independent thread scheduling, any interleaving of single lanes' steps),
    ``"syncwarp"`` (``__syncwarp()`` after the reads and after the write of every step)."""
    n = len(values)
    L = n // 2
    if n < 2 or n != 2 * L or L & (L - 1):
        raise ValueError("need 2·L values with L a power of two")
    if sync not in ("lockstep", "none", "syncwarp"):
        raise ValueError(f"sync must be lockstep, none or syncwarp, got {sync!r}")
    offs = []
    o = L
    while o >= 1:
        offs.append(o)
        o //= 2
    prog: list[tuple] = []  # per-lane micro-ops: ("ra", off), ("rb", off), ("w",), ("bar",)
    for off in offs:
        prog += [("ra", off), ("rb", off)] + ([("bar",)] if sync == "syncwarp" else [])
        prog += [("w",)] + ([("bar",)] if sync == "syncwarp" else [])
    prog_t = tuple(prog)

    def step(lane, op, regs, mem):
        a, b = regs[lane]
        if op[0] == "ra":
            regs = regs[:lane] + ((mem[lane], b),) + regs[lane + 1:]
        elif op[0] == "rb":
            regs = regs[:lane] + ((a, mem[lane + op[1]]),) + regs[lane + 1:]
        elif op[0] == "w":
            mem = mem[:lane] + (a + b,) + mem[lane + 1:]
        return regs, mem

    if sync == "lockstep":
        regs, mem = ((0, 0),) * L, tuple(values)
        for op in prog_t:
            new_regs, new_mem = regs, mem
            for lane in range(L):  # every lane reads before any lane writes: one SIMT instruction
                r2, m2 = step(lane, op, regs, mem)
                new_regs = new_regs[:lane] + (r2[lane],) + new_regs[lane + 1:]
                if op[0] == "w":
                    new_mem = new_mem[:lane] + (m2[lane],) + new_mem[lane + 1:]
            regs, mem = new_regs, new_mem
        return frozenset({mem[0]})

    @lru_cache(maxsize=None)
    def explore(pcs: tuple, regs: tuple, mem: tuple) -> frozenset:
        if all(pc == len(prog_t) for pc in pcs):
            return frozenset({mem[0]})
        # a lane at a barrier waits until every lane has reached it
        at_bar = [pc < len(prog_t) and prog_t[pc][0] == "bar" for pc in pcs]
        if all(at_bar):
            return explore(tuple(pc + 1 for pc in pcs), regs, mem)
        out: frozenset = frozenset()
        for lane, pc in enumerate(pcs):
            if pc == len(prog_t) or at_bar[lane]:
                continue
            r2, m2 = step(lane, prog_t[pc], regs, mem)
            out |= explore(pcs[:lane] + (pc + 1,) + pcs[lane + 1:], r2, m2)
        return out

    return explore((0,) * L, ((0, 0),) * L, tuple(values))
