#!/usr/bin/env python3
"""Fits the coefficients of the cpu provider's vectorised Erf (src/ops/cpu/vec_impl.inc).

erf(x) = x * P(x^2) for |x| <= 0.875 (P of degree 5), 1 - exp(Q(|x|)) for 0.875 < |x| < 4
(Q of degree 8 fitting log(erfc)), 1 from 4 on. Weighted least squares on Chebyshev nodes
against Python's double erf / erfc; prints the coefficients (lowest degree first) and the worst
error in float ulps when evaluated in float32 (the C++ kernel's exp adds ~1 ulp there; its
test, tests/cpu/erf_test.cc, bounds the result at 4 ulp).

  .venv/bin/python tools/fit_erf.py
"""
import math

import numpy as np

T, HI = 0.875, 4.0
erf = np.vectorize(math.erf)
erfc = np.vectorize(math.erfc)


def cheb(lo, hi, n):
    return np.cos(np.linspace(0, np.pi, n)) * (hi - lo) / 2 + (hi + lo) / 2


def fit_small(deg=5):
    x = cheb(0, T, 4000)
    x = x[x > 1e-6]
    y = erf(x) / x
    a = np.vander(x * x, deg + 1, increasing=True)
    return np.linalg.lstsq(a / y[:, None], np.ones_like(y), rcond=None)[0]


def fit_big(deg=8):
    x = cheb(T, HI, 6000)
    return np.linalg.lstsq(np.vander(x, deg + 1, increasing=True), np.log(erfc(x)), rcond=None)[0]


def horner(c, t):
    p = np.float32(c[-1])
    for k in c[-2::-1]:
        p = p * t + np.float32(k)
    return p


def main():
    cs, cb = fit_small(), fit_big()
    print("P:", ", ".join("%.9e" % v for v in cs))
    print("Q:", ", ".join("%.9e" % v for v in cb))
    xs = np.linspace(0, HI, 400001).astype(np.float32)
    want = erf(xs.astype(np.float64))
    small = xs * horner(cs, xs * xs)
    big = np.float32(1) - np.exp(horner(cb, xs)).astype(np.float32)
    got = np.where(xs <= T, small, big).astype(np.float64)
    ulp = np.spacing(want.astype(np.float32)).astype(np.float64)
    print("worst error: %.2f ulp" % (np.abs(got - want) / ulp)[1:].max())


if __name__ == "__main__":
    main()
