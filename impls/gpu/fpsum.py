r"""Floating-point sums in different orders, computed exactly: every addition rounds once, to nearest even.

Values are ``fractions.Fraction``s; ``rnd(x, fmt)`` rounds a rational to the nearest number of ``fmt``
(``fp16``: 11 significant bits, exponents down to $2^{-24}$; ``bf16``: 8 bits; ``fp32``: 24 bits;
``fp64``: 53), ties to even, overflowing to $\pm\infty$. An addition in ``fmt`` is
$\mathrm{fl}(a+b) = \mathrm{rnd}(a+b)$ and so exact rational arithmetic gives the exact sum to compare
with. The orders:

- :func:`sequential` $((x_1+x_2)+x_3)+\dots$: error at most $\gamma_{n-1}\sum|x_i|$, $\gamma_k = ku/(1-ku)$;
- :func:`pairwise` (a balanced tree, as a block reduction does): $\gamma_{\lceil\log_2 n\rceil}\sum|x_i|$;
- :func:`kahan` (compensated): $(2u + O(nu^2))\sum|x_i|$, independent of $n$ to first order;
- :func:`blocked` (what a GPU reduction with ``block`` elements per thread block computes: each block
  summed as a tree, then the partial sums in order): the result depends on ``block``.

$u = 2^{-p}$ is the unit roundoff (half an ulp of 1). Bounds: Higham, *Accuracy and Stability of
Numerical Algorithms* (2nd ed.), §4.2 (Eq. 4.4: recursive, pairwise) and §4.3 (Eq. 4.8, compensated).
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Sequence

__all__ = ["FORMATS", "Format", "rnd", "add", "sequential", "pairwise", "kahan", "blocked", "gamma", "exact"]


@dataclass(frozen=True)
class Format:
    name: str
    precision: int      # significant bits, the implicit one included
    emin: int           # exponent of the smallest normal number
    emax: int           # exponent of the largest finite number

    @property
    def u(self) -> Fraction:
        """Unit roundoff 2^-p."""
        return Fraction(1, 2 ** self.precision)

    @property
    def max(self) -> Fraction:
        return (2 - Fraction(1, 2 ** (self.precision - 1))) * Fraction(2) ** self.emax


FORMATS = {f.name: f for f in [Format("fp16", 11, -14, 15), Format("bf16", 8, -126, 127),
                               Format("fp32", 24, -126, 127), Format("fp64", 53, -1022, 1023)]}
INF = float("inf")


def _fmt(fmt: str | Format) -> Format:
    return fmt if isinstance(fmt, Format) else FORMATS[fmt]


def rnd(x: Fraction | int | float, fmt: str | Format) -> Fraction | float:
    """``x`` rounded to the nearest ``fmt`` number, ties to even; ±inf (as a float) beyond the range."""
    f = _fmt(fmt)
    x = Fraction(x)
    if x == 0:
        return Fraction(0)
    sign = -1 if x < 0 else 1
    a = abs(x)
    e = a.numerator.bit_length() - a.denominator.bit_length()  # 2^e <= a < 2^(e+2): fix below
    if Fraction(2) ** e > a:
        e -= 1
    if Fraction(2) ** (e + 1) <= a:
        e += 1
    quantum_exp = max(e, f.emin) - (f.precision - 1)          # the spacing of fmt numbers near a
    q = a / Fraction(2) ** quantum_exp
    n, r = divmod(q.numerator, q.denominator)
    twice = 2 * r
    if twice > q.denominator or (twice == q.denominator and n % 2 == 1):
        n += 1
    y = n * Fraction(2) ** quantum_exp
    if y > f.max:
        return sign * INF
    return sign * y


def add(a, b, fmt: str | Format):
    """fl(a + b) in ``fmt``."""
    if isinstance(a, float) or isinstance(b, float):  # an infinity already
        return float(a) + float(b)
    return rnd(Fraction(a) + Fraction(b), fmt)


def exact(xs: Sequence) -> Fraction:
    return sum((Fraction(x) for x in xs), Fraction(0))


def sequential(xs: Sequence, fmt: str | Format):
    """((x1 + x2) + x3) + ... with every addition rounded to ``fmt``."""
    s = Fraction(0)
    for x in xs:
        s = add(s, x, fmt)
    return s


def pairwise(xs: Sequence, fmt: str | Format):
    """Balanced tree: sum each half, add the two (the order of a tree reduction in shared memory)."""
    if not xs:
        return Fraction(0)
    if len(xs) == 1:
        return rnd(Fraction(xs[0]), fmt)
    mid = (len(xs) + 1) // 2
    return add(pairwise(xs[:mid], fmt), pairwise(xs[mid:], fmt), fmt)


def kahan(xs: Sequence, fmt: str | Format):
    """Kahan's compensated sum: the rounding error of each addition is carried into the next one."""
    s = c = Fraction(0)
    for x in xs:
        y = add(x, -c, fmt)
        t = add(s, y, fmt)
        c = add(add(t, -s, fmt), -y, fmt)
        s = t
    return s


def blocked(xs: Sequence, block: int, fmt: str | Format):
    """A two-level GPU reduction: a tree over each ``block`` consecutive elements, then the partials in order."""
    if block < 1:
        raise ValueError("block must be >= 1")
    partials = [pairwise(list(xs[i:i + block]), fmt) for i in range(0, len(xs), block)]
    return sequential(partials, fmt)


def gamma(k: int, fmt: str | Format) -> Fraction:
    """Higham's γ_k = k·u / (1 − k·u)."""
    u = _fmt(fmt).u
    if k * u >= 1:
        raise ValueError("k·u must be < 1")
    return k * u / (1 - k * u)
