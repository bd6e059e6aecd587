"""Correctness: the float64 reference, error metrics and the pass/fail rule.

The rule is the forward error bound of a dot product: each element may be off by at most
rtol * (|alpha| * (|A| @ |B|) + |beta| * |C|), the magnitudes that actually fed it. Unlike a
tolerance on |ref| alone, this does not fail on elements where large terms cancel, and it is
independent of the scale of the inputs. HGEMM references use the fp16/bf16-rounded inputs,
so only the fp32 accumulation is being judged there too. A 16-bit C (`out_dtype`) is rounded
once more on the store: its unit roundoff u (2^-11 fp16, 2^-8 bf16) times the magnitude of the
value rounded is allowed on top, and half its smallest subnormal.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# float32 accumulation over K terms errs by ~sqrt(K)*6e-8 in practice (K*6e-8 worst case).
RTOL = {"sgemm": 1e-4, "hgemm": 1e-3}


def rows_to_check(M: int, count: int, rng) -> np.ndarray:
    """The rows of C a check reads: all M up to `count`, else `count` in order, drawn at random
    with the last among them (it lies in the edge tile, where a ragged-row bug would show)."""
    if M <= count:
        return np.arange(M)
    return np.append(np.sort(rng.choice(M - 1, count - 1, replace=False)), M - 1)


class Products:
    """A @ B and |A| @ |B| in float64: the costly part of the reference and of the error bound.
    Computed once, they serve every output checked against the same A and B (bench.py checks a
    dozen levels of one shape twice each, and at 8192² each product is a 128-row float64 GEMM
    over a 512 MB float64 copy of B)."""

    def __init__(self, A, B):
        A64, B64 = np.asarray(A, np.float64), np.asarray(B, np.float64)
        self.ab = A64 @ B64
        self.abs_ab = np.abs(A64) @ np.abs(B64)


def reference(A, B, C, alpha: float, beta: float, products: Products | None = None) -> np.ndarray:
    """alpha * A @ B + beta * C in float64 (C is not read when beta == 0: BLAS semantics);
    A @ B from `products` when given."""
    ab = products.ab if products is not None else np.asarray(A, np.float64) @ np.asarray(B, np.float64)
    ref = alpha * ab
    if beta != 0:
        ref += beta * np.asarray(C, np.float64)
    return ref


def scale(A, B, C, alpha: float, beta: float, products: Products | None = None) -> np.ndarray:
    """Per-element magnitude that bounds the rounding error: |alpha|·|A|@|B| + |beta|·|C|;
    |A|@|B| from `products` when given."""
    abs_ab = products.abs_ab if products is not None else \
        np.abs(np.asarray(A, np.float64)) @ np.abs(np.asarray(B, np.float64))
    s = abs(alpha) * abs_ab
    if beta != 0:
        s += abs(beta) * np.abs(np.asarray(C, np.float64))
    return s


@dataclass
class Verdict:
    ok: bool
    max_abs_err: float
    rel_err: float          # max |err| / max |ref|
    worst_ratio: float      # max over elements of |err| / allowed  (<= 1 passes)
    bad_elements: int
    first_bad: tuple | None

    def __str__(self):
        s = f"max|err|={self.max_abs_err:.3e}  max|err|/max|ref|={self.rel_err:.3e}"
        if not self.ok:
            s += f"  FAILED: {self.bad_elements} elements out of tolerance, first at {self.first_bad}"
        return s


def _finfo(dtype):
    """np.finfo, or ml_dtypes' for bfloat16 (NumPy's finfo refuses it)."""
    try:
        return np.finfo(dtype)
    except ValueError:
        import ml_dtypes

        return ml_dtypes.finfo(dtype)


def unit_roundoff(dtype) -> float:
    """u = 2^-(significand bits): the relative error bound of rounding to nearest in `dtype`
    (float32 2^-24, float16 2^-11, bfloat16 2^-8)."""
    return float(_finfo(dtype).eps) / 2


def verify(out, A, B, C_in, alpha: float, beta: float, family: str = "sgemm",
           out_dtype=np.float32, products: Products | None = None) -> Verdict:
    """Compare a level's output with the float64 reference. NaN/Inf in `out` always fails.
    out_dtype: the type C was stored in (a 16-bit C adds its one rounding to the bound).
    products: Products(A, B), when the caller checks several outputs against the same A and B."""
    out = np.asarray(out, np.float64)
    ref = reference(A, B, C_in, alpha, beta, products)
    allowed = RTOL[family] * scale(A, B, C_in, alpha, beta, products) + np.finfo(np.float32).tiny
    if np.dtype(out_dtype) != np.float32:
        f = _finfo(out_dtype)
        allowed += unit_roundoff(out_dtype) * (np.abs(ref) + allowed) + float(f.smallest_subnormal) / 2
    err = np.abs(out - ref)
    err[~np.isfinite(out)] = np.inf
    bad = ~(err <= allowed)
    max_ref = float(np.max(np.abs(ref))) if ref.size else 0.0
    max_err = float(np.max(err)) if err.size else 0.0
    first = tuple(int(i) for i in np.argwhere(bad)[0]) if bad.any() else None
    return Verdict(
        ok=not bad.any(),
        max_abs_err=max_err,
        rel_err=max_err / max_ref if max_ref > 0 else max_err,
        worst_ratio=float(np.max(err / allowed)) if err.size else 0.0,
        bad_elements=int(bad.sum()),
        first_bad=first,
    )


def random_inputs(M: int, N: int, K: int, dtype=np.float32, rng=None, c_dtype=np.float32):
    """Fresh uniform(-1, 1) operands: never zeros, different every call unless rng is seeded."""
    rng = np.random.default_rng() if rng is None else rng
    A = rng.uniform(-1, 1, (M, K)).astype(dtype)
    B = rng.uniform(-1, 1, (K, N)).astype(dtype)
    C = rng.uniform(-1, 1, (M, N)).astype(c_dtype)
    return A, B, C
