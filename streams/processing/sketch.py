"""A small mergeable quantile sketch in the manner of DDSketch (Masson, Rim, Lee; VLDB 2019).

Why not the ``ddsketch`` package (tried first): a window holds few values and there are many
windows, and there ``ddsketch``'s dense store spends most of its time growing and re-centring
its bin array (1.6 µs per value in sketches of 10 values, creation included, against ~0.3 µs
here), and its quantile queries walk the bins in a Python loop per quantile. On the windows
benchmark's workload with p50/p95/p99 the whole job ran at ~120k events/s on ``ddsketch`` and
~310k on this sketch, which keeps its bins in a dict: one ``log`` and one dict update per
value. The mapping and the guarantee are DDSketch's:

- relative accuracy ``alpha`` (default 1 %): ``gamma = (1 + alpha) / (1 - alpha)``; a positive
  value ``v`` goes to bucket ``ceil(log_gamma(v))``, covering ``(gamma^(k-1), gamma^k]``, whose
  representative ``2 * gamma^k / (gamma + 1)`` is within ``alpha`` (relative) of every value in
  it; negative values are kept the same way by magnitude, values with ``|v| <= 1e-9`` as zeros;
- the quantile ``q`` of ``n`` values is the representative of the bucket holding the value of
  0-based rank ``floor(q * (n - 1))`` in sorted order, so it is within ``alpha`` of that value;
- merging adds bucket counts, so a merged sketch equals the sketch of the union (exactly).

The number of buckets is bounded by the value range: ~2,400 per sign for 1e-9..1e12 at 1 %.
Thread-safety: none (one window's state, owned by one operator).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from itertools import accumulate

ZERO_BELOW = 1e-9
_log, _ceil = math.log, math.ceil


class QuantileSketch:
    __slots__ = ("alpha", "gamma", "_mult", "pos", "neg", "zeros", "count")

    def __init__(self, alpha: float = 0.01):
        if not 0 < alpha < 1:
            raise ValueError("alpha must be between 0 and 1")
        self.alpha = alpha
        self.gamma = (1 + alpha) / (1 - alpha)
        self._mult = 1 / _log(self.gamma)
        self.pos: dict[int, int] = {}
        self.neg: dict[int, int] = {}
        self.zeros = 0
        self.count = 0

    def add(self, v: float) -> None:
        self.count += 1
        if v > ZERO_BELOW:
            k = _ceil(_log(v) * self._mult)
            pos = self.pos
            pos[k] = pos.get(k, 0) + 1
        elif v < -ZERO_BELOW:
            k = _ceil(_log(-v) * self._mult)
            neg = self.neg
            neg[k] = neg.get(k, 0) + 1
        else:
            self.zeros += 1

    def merge(self, other: QuantileSketch) -> None:
        if other.gamma != self.gamma:
            raise ValueError("cannot merge sketches of different accuracy")
        for mine, theirs in ((self.pos, other.pos), (self.neg, other.neg)):
            for k, c in theirs.items():
                mine[k] = mine.get(k, 0) + c
        self.zeros += other.zeros
        self.count += other.count

    def _value(self, k: int) -> float:
        return 2 * self.gamma**k / (self.gamma + 1)

    def quantiles(self, qs: tuple[float, ...]) -> list[float | None]:
        """The estimates for each ``q`` in ``qs`` (None for an empty sketch), one pass."""
        if not self.count:
            return [None] * len(qs)
        # buckets in value order: negatives by falling magnitude, zeros, positives rising
        neg_keys = sorted(self.neg, reverse=True)
        pos_keys = sorted(self.pos)
        counts = [self.neg[k] for k in neg_keys] + [self.zeros] + [self.pos[k] for k in pos_keys]
        cumulative = list(accumulate(counts))
        out: list[float | None] = []
        n_neg = len(neg_keys)
        for q in qs:
            rank = math.floor(q * (self.count - 1))
            i = _first_above(cumulative, rank)
            if i < n_neg:
                out.append(-self._value(neg_keys[i]))
            elif i == n_neg:
                out.append(0.0)
            else:
                out.append(self._value(pos_keys[i - n_neg - 1]))
        return out


def _first_above(cumulative: list[int], rank: int) -> int:
    """Index of the first bucket whose running count exceeds `rank`."""
    return bisect_right(cumulative, rank)
