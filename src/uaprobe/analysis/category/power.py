"""The power of the exact category-level test, simulated under the panel's own category structure.

The category-level test relates the C categories' UA ``x`` to their mean preferences ``y`` by Pearson's r and
takes its two-sided p over all C! orders of ``y`` (:func:`exact_p`). With so few points the test's reach
depends on ``x`` itself: one category far from the others keeps |r| large under many orders, so a large r
need not give a small p. The power is therefore simulated with the observed ``x`` held fixed:

- ``z`` is ``x`` standardised (mean 0, population variance 1 over the categories);
- for a planted correlation rho, ``y = rho z + sqrt(1 - rho^2) e`` with ``e`` (C,) standard normal: the
  population correlation of ``y`` with ``z`` (a category drawn at random) is rho;
- the power is the share of ``draws`` such preferences whose exact p is at or below alpha. Every rho uses the
  same noise draws (one seeded generator), so the power curve is monotone up to ties.

Reported (:func:`power_results`): the smallest p the test can attain with this ``x`` (``y`` a copy of ``x``),
the power at each planted rho, and the minimum detectable effect, the smallest rho on a grid whose power
reaches the target; for every category and without the pre-declared one (C - 1, its (C-1)! orders).

The primary statistic (:func:`primary_power`) is the median r over the primary universe's distinct
specifications, tested jointly: each order of ``y`` is applied to every specification at once and the p is the
share of orders whose |median r| is at least the observed one. Its power is simulated the same way, the
preferences planted on the reference specification's standardised UA (the one :func:`power_results` holds
fixed) and the median taken over the universe's UA rows ``X`` (S, C); with S = 1 it is the single test above.

Beyond the exact bound (:data:`uaprobe.analysis.category.curve_stats.MAX_EXACT_ORDERS` orders) the simulated test is the
Monte Carlo test the curve runs there: the identity and ``analysis.permutations`` orders drawn once from the
power's generator, the same orders for every simulated preference (:func:`uaprobe.analysis.category.curve_stats.relabellings`).
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np
from numba import njit

from uaprobe.schema import missing
from uaprobe.schema.specs import Power, PowerSet, PrimaryPower
from uaprobe.analysis.category.curve_stats import all_orders, relabellings
from uaprobe.analysis.inference.stats import TIE_TOLERANCE
from uaprobe.config import PowerParams

RNG_NAME = "power"
"""Names the generator of the simulated preferences (:func:`uaprobe.analysis.inference.stats.rng_for`)."""
PRIMARY_MODEL = ("the median r over the primary universe's distinct specifications, tested jointly (one order of "
                 "the preferences applied to every specification at once); y planted as in `model` on the "
                 "reference specification's UA")
MODEL = ("y = rho z + sqrt(1 - rho^2) e: z the categories' UA standardised (mean 0, population variance 1), e "
         "independent standard normal per category; the same noise draws for every rho")


def _unit(v: np.ndarray) -> np.ndarray:
    """Centred and unit-norm along the last axis (NaN where constant)."""
    c = v - v.mean(axis=-1, keepdims=True)
    norm = np.linalg.norm(c, axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(norm > 1e-300, c / norm, np.nan)


def _signed(uy: np.ndarray, ux: np.ndarray) -> np.ndarray:
    """r of unit preferences ``uy`` (..., C) with the unit UA ``ux`` (C,), or their median over the unit UA rows
    ``ux`` (S, C) of S specifications."""
    return uy @ ux if ux.ndim == 1 else np.median(uy @ ux.T, axis=-1)


@njit(cache=True, boundscheck=False, nogil=True, error_model="numpy")
def _exact_shares(uy: np.ndarray, relabelled: np.ndarray, tolerance: float) -> np.ndarray:  # pragma: no cover
    """(D,) for every unit preference row ``uy[d]`` (C,): the share of the orders, identity first, whose |median
    over the S specifications of the r of the relabelled preference| is at least the identity's less
    ``tolerance`` (NaN r: no hit); ``relabelled[o, s]`` (O, S, C) is specification s's unit UA relabelled by the
    inverse of order o (so that its product with ``uy[d]`` is the r of ``uy[d]`` relabelled by order o). Each
    row's S r are kept in a sorted buffer."""
    d_rows, c_n = uy.shape
    o_n, s_n = relabelled.shape[0], relabelled.shape[1]
    out = np.empty(d_rows)
    buf = np.empty(s_n)
    for d in range(d_rows):
        first = 0.0
        hits = 0
        for o in range(o_n):
            nan = False
            for s_i in range(s_n):
                acc = 0.0
                for c in range(c_n):
                    acc += uy[d, c] * relabelled[o, s_i, c]
                if acc != acc:
                    nan = True
                # insertion into the sorted prefix buf[:s_i]
                j = s_i
                while j > 0 and buf[j - 1] > acc:
                    buf[j] = buf[j - 1]
                    j -= 1
                buf[j] = acc
            if nan:
                stat = np.nan
            elif s_n % 2 == 1:
                stat = abs(buf[s_n // 2])
            else:
                stat = abs((buf[s_n // 2 - 1] + buf[s_n // 2]) / 2.0)
            if o == 0:
                first = stat
            if stat >= first - tolerance:
                hits += 1
        out[d] = hits / o_n
    return out


def exact_p(x: np.ndarray, y: np.ndarray, orders: np.ndarray | None = None) -> np.ndarray:
    """(D,) the two-sided permutation p of r(x, y_d) for every row of ``y`` (D, C): the share of the ``orders``
    of ``y_d`` (default every one of the C!; the identity first and included) whose |r| is at least the observed
    |r| (less the tie tolerance). With the identity and m drawn orders this is the Monte Carlo p (b + 1) / (m + 1).
    With ``x`` (S, C), the UA of S specifications, the statistic is the median of the S r (the joint test).

    A relabelling moves no value, so the centred, unit preference is relabelled, not centred again per order."""
    x = np.asarray(x, dtype=float)
    y = np.atleast_2d(np.asarray(y, dtype=float))
    orders = all_orders(x.shape[-1]) if orders is None else orders
    ux = np.atleast_2d(_unit(x))  # (S, C)
    # uy[orders[o]] . ux_s = uy . ux_s[inverse(orders[o])]
    relabelled = np.ascontiguousarray(ux[:, np.argsort(orders, axis=1)].transpose(1, 0, 2))  # (O, S, C)
    return _exact_shares(np.ascontiguousarray(_unit(y)), relabelled, TIE_TOLERANCE)


def statistic(x: np.ndarray, y: np.ndarray) -> float:
    """The signed statistic of one preference vector ``y`` (C,): r with ``x`` (C,), or the median r over the rows
    of ``x`` (S, C)."""
    return float(_signed(_unit(np.asarray(y, dtype=float)), _unit(np.asarray(x, dtype=float))))


def standardised(x: np.ndarray) -> np.ndarray:
    """``x`` centred and scaled to population variance 1."""
    x = np.asarray(x, dtype=float)
    return (x - x.mean()) / x.std()


def simulated_power(x: np.ndarray, rhos: Sequence[float], *, noise: np.ndarray, alpha: float,
                    orders: np.ndarray | None = None, reference: np.ndarray | None = None
                    ) -> tuple[np.ndarray, np.ndarray]:
    """(power, median statistic) at each planted rho: preferences ``rho z + sqrt(1 - rho^2) noise`` (``noise``:
    (D, C)), ``z`` the standardised ``reference`` (default ``x``); the share whose p over ``orders`` (default every
    order) is at or below ``alpha`` and the median of their statistic (r with ``x``, or the median r over the rows
    of ``x`` (S, C))."""
    z = standardised(x if reference is None else reference)
    power, median_r = np.empty(len(rhos)), np.empty(len(rhos))
    ux = _unit(np.asarray(x, dtype=float))
    for i, rho in enumerate(rhos):
        y = rho * z + math.sqrt(1.0 - rho * rho) * noise
        power[i] = float((exact_p(x, y, orders) <= alpha + TIE_TOLERANCE).mean())
        median_r[i] = float(np.median(_signed(_unit(y), ux)))
    return power, median_r


def grid(step: float) -> np.ndarray:
    """The planted correlations searched for the minimum detectable effect: 0, step, 2 step, ... below 1."""
    n = int(math.floor((1.0 - 1e-9) / step))
    return np.round(np.arange(n + 1) * step, 12)


def power_set(x: np.ndarray, *, observed_y: np.ndarray, params: PowerParams, alpha: float,
              rng: np.random.Generator, left_out: str | None, permutations: int,
              reference: np.ndarray | None = None) -> PowerSet:
    """One set of categories (every one, or all but ``left_out``): the attainable floor, the observed test, the
    power at the planted correlations and the minimum detectable effect; the test exact up to the bound, else
    Monte Carlo over ``permutations`` drawn orders. ``x`` (C,) one specification's UA, or (S, C) the UA rows of
    S specifications whose median r is the statistic, the preferences planted on ``reference`` (C,) then."""
    x = np.asarray(x, dtype=float)
    ref = x if reference is None else np.asarray(reference, dtype=float)
    n = x.shape[-1]
    orders, mode = relabellings(n, rng=rng, permutations=permutations)
    noise = rng.standard_normal((params.draws, n))
    planted = [float(r) for r in params.planted]
    rhos = grid(params.grid_step)
    constant = not (np.isfinite(x).all() and ref.std() > 1e-12 * max(1.0, float(np.abs(ref).max())))
    if constant:  # no correlation with a constant UA: nothing to simulate
        power = median_r = np.full(len(planted), np.nan)
        grid_power = np.full(rhos.size, np.nan)
    else:
        # one simulation per distinct correlation: a planted one on the grid is that grid point
        searched = rhos.tolist() + [r for r in planted if r not in rhos.tolist()]
        every_power, every_median = simulated_power(x, searched, noise=noise, alpha=alpha, orders=orders,
                                                    reference=reference)
        at = [searched.index(r) for r in planted]
        power, median_r = every_power[at], every_median[at]
        grid_power = every_power[:rhos.size]
    reached = np.flatnonzero(grid_power >= params.target)
    mde = float(rhos[reached[0]]) if reached.size else np.nan
    why = "UA is constant over the categories: r is undefined"
    with np.errstate(invalid="ignore"):
        r_obs = statistic(x, observed_y)
        # one specification: the p of a preference that copies its UA (|r| = 1, the most extreme); a median over
        # several: one over the orders, the bound of any test over them
        floor = (np.nan if constant else 1.0 / orders.shape[0] if reference is not None
                 else float(exact_p(x, x[None, :], orders)[0]))
        p_obs = np.nan if constant else float(exact_p(x, observed_y[None, :], orders)[0])
    return PowerSet(left_out=left_out, n_categories=int(n), orders=int(orders.shape[0]), mode=mode,
                    p_floor=missing.value(floor, why),
                    observed_r=missing.value(r_obs, "UA or the preference is constant"),
                    observed_p=missing.value(p_obs, "UA or the preference is constant"),
                    planted=planted, power=missing.series(power, why), median_r=missing.series(median_r, why),
                    grid=rhos.tolist(), grid_power=missing.series(grid_power, why),
                    mde=missing.value(mde, why if constant else
                                      f"no planted correlation on the grid reaches power {params.target}"))


def power_results(x: np.ndarray, y: np.ndarray, *, categories: Sequence[str], left_out: str,
                  specification: dict[str, Any], params: PowerParams, alpha: float, rng: np.random.Generator,
                  permutations: int, universe: np.ndarray) -> Power:
    """The ``power`` object of ``specification_curve.json``: :func:`power_set` with every category and without
    ``left_out``, for the categories' UA ``x`` (C,) of ``specification`` and their preferences ``y`` (C,); and,
    given the UA rows ``universe`` (S, C) of the primary universe's distinct specifications, the same for the
    primary statistic, their median r (:func:`primary_power`)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    keep = np.array([c != left_out for c in categories])
    sets = [power_set(x, observed_y=y, params=params, alpha=alpha, rng=rng, left_out=None,
                      permutations=permutations),
            power_set(x[keep], observed_y=y[keep], params=params, alpha=alpha, rng=rng,
                      left_out=left_out, permutations=permutations)]
    return Power(specification=dict(specification), model=MODEL, alpha=float(alpha), draws=params.draws,
                 target=params.target, grid_step=params.grid_step, sets=sets,
                 primary=primary_power(universe, x, y, keep=keep, left_out=left_out, params=params, alpha=alpha,
                                       rng=rng, permutations=permutations))


def primary_power(universe: np.ndarray, reference: np.ndarray, y: np.ndarray, *, keep: np.ndarray, left_out: str,
                  params: PowerParams, alpha: float, rng: np.random.Generator,
                  permutations: int) -> PrimaryPower:
    """The ``primary`` object of ``power``: the median r over the rows of ``universe`` (S, C) and its joint test,
    its power with the preferences planted on ``reference`` (C,), with every category and without the ``keep``
    mask's left-out one."""
    u = np.asarray(universe, dtype=float)
    sets = [power_set(u, observed_y=y, params=params, alpha=alpha, rng=rng, left_out=None,
                      permutations=permutations, reference=reference),
            power_set(u[:, keep], observed_y=y[keep], params=params, alpha=alpha, rng=rng,
                      left_out=left_out, permutations=permutations, reference=reference[keep])]
    return PrimaryPower(statistic="median_r", n_specs=int(u.shape[0]), model=PRIMARY_MODEL, sets=sets)


__all__: Sequence[str] = ("MODEL", "PRIMARY_MODEL", "RNG_NAME", "exact_p", "grid", "power_results", "power_set",
                          "primary_power", "simulated_power", "standardised", "statistic")
