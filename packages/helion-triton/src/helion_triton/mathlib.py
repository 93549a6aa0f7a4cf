"""Math functions that ``triton.language`` lacks.

On the GPU they come from libdevice. The Triton interpreter has no libdevice, so there the
generated module carries small ``@triton.jit`` helpers built from core operations (argument
reduction plus short series, or Kahan's tricks for expm1/log1p), accurate to a few float32 ulps.
Each helper is emitted only when a kernel uses it.
"""

from __future__ import annotations

# name -> libdevice function used on the GPU
LIBDEVICE = {
    "tanh": "tanh",
    "expm1": "expm1",
    "log1p": "log1p",
    "log10": "log10",
    "tan": "tan",
    "sinh": "sinh",
    "cosh": "cosh",
    "atan": "atan",
    "asin": "asin",
    "acos": "acos",
    "atan2": "atan2",
    "erfinv": "erfinv",
    "pow": "pow",
    "round": "nearbyint",
    "fmod": "fmod",
}

# name -> (helpers it calls, source of `_helion_<name>`)
HELPERS: dict[str, tuple[tuple[str, ...], str]] = {
    "tanh": (
        (),
        """
@triton.jit
def _helion_tanh(x):
    ax = tl.abs(x)
    e = tl.exp(-2.0 * ax)
    t = (1.0 - e) / (1.0 + e)
    x2 = x * x
    series = x * (1.0 + x2 * (-0.3333333333333333 + x2 * (0.13333333333333333 + x2 * -0.05396825396825397)))
    return tl.where(ax < 0.0625, series, tl.where(x < 0, -t, t))
""",
    ),
    "expm1": (
        (),
        """
@triton.jit
def _helion_expm1(x):
    u = tl.exp(x)
    um1 = u - 1.0
    # Kahan: (u - 1) * x / log(u) cancels the rounding error of u for small x
    kahan = tl.where(u == 1.0, x, um1 * x / tl.log(u))
    return tl.where(tl.abs(x) > 0.5, um1, kahan)
""",
    ),
    "log1p": (
        (),
        """
@triton.jit
def _helion_log1p(x):
    u = 1.0 + x
    kahan = tl.where(u == 1.0, x, tl.log(u) * x / (u - 1.0))
    return tl.where(tl.abs(x) > 0.5, tl.log(u), kahan)
""",
    ),
    "log10": (
        (),
        """
@triton.jit
def _helion_log10(x):
    return tl.log(x) * 0.4342944819032518
""",
    ),
    "tan": (
        (),
        """
@triton.jit
def _helion_tan(x):
    return tl.sin(x) / tl.cos(x)
""",
    ),
    "sinh": (
        (),
        """
@triton.jit
def _helion_sinh(x):
    e = tl.exp(x)
    x2 = x * x
    series = x * (1.0 + x2 * (0.16666666666666666 + x2 * (0.008333333333333333 + x2 * (0.0001984126984126984 + x2 * 2.755731922398589e-06))))
    return tl.where(tl.abs(x) < 0.5, series, 0.5 * (e - 1.0 / e))
""",
    ),
    "cosh": (
        (),
        """
@triton.jit
def _helion_cosh(x):
    e = tl.exp(x)
    return 0.5 * (e + 1.0 / e)
""",
    ),
    "atan": (
        (),
        """
@triton.jit
def _helion_atan(x):
    ax = tl.abs(x)
    invert = ax > 1.0
    z = tl.where(invert, 1.0 / ax, ax)
    # atan(z) = 2 atan(z / (1 + sqrt(1 + z^2))), twice: |z| <= tan(pi / 16)
    z = z / (1.0 + tl.sqrt(1.0 + z * z))
    z = z / (1.0 + tl.sqrt(1.0 + z * z))
    z2 = z * z
    p = z * (1.0 + z2 * (-0.3333333333333333 + z2 * (0.2 + z2 * (-0.14285714285714285 + z2 * (0.1111111111111111 + z2 * (-0.09090909090909091 + z2 * 0.07692307692307693))))))
    r = 4.0 * p
    r = tl.where(invert, 1.5707963267948966 - r, r)
    return tl.where(x < 0, -r, r)
""",
    ),
    "asin": (
        ("atan",),
        """
@triton.jit
def _helion_asin(x):
    return _helion_atan(x / tl.sqrt((1.0 - x) * (1.0 + x)))
""",
    ),
    "acos": (
        ("atan",),
        """
@triton.jit
def _helion_acos(x):
    return 2.0 * _helion_atan(tl.sqrt((1.0 - x) / (1.0 + x)))
""",
    ),
    "atan2": (
        ("atan",),
        """
@triton.jit
def _helion_atan2(y, x):
    # C99's atan2, as libdevice on the GPU and torch give it: atan(y / x) was NaN for two
    # infinities (pi / 4 and its quadrant's multiples there) and lost the sign of a zero
    inf = float("inf")
    both_inf = (tl.abs(y) == inf) & (tl.abs(x) == inf)
    y_neg = (y < 0) | (1.0 / y < 0)
    x_neg = (x < 0) | (1.0 / x < 0)
    ay = tl.where(both_inf, 1.0, tl.abs(y))
    ax = tl.where(both_inf, 1.0, tl.abs(x))
    steep = ay > ax
    small = tl.where(steep, ax, ay)
    large = tl.where(steep, ay, ax)
    # the angle of (|x|, |y|), in [0, pi / 2]
    r = _helion_atan(tl.where(large == 0, 0.0, small / large))
    r = tl.where(steep, 1.5707963267948966 - r, r)
    r = tl.where(both_inf, 0.7853981633974483, r)
    r = tl.where(x_neg, 3.141592653589793 - r, r)
    r = tl.where(y_neg, -r, r)
    return tl.where((x != x) | (y != y), x + y, r)
""",
    ),
    "erfinv": (
        (),
        """
@triton.jit
def _helion_erfinv(x):
    # M. Giles, "Approximating the erfinv function" (single precision)
    w = -tl.log((1.0 - x) * (1.0 + x))
    a = w - 2.5
    p = 2.81022636e-08
    p = 3.43273939e-07 + p * a
    p = -3.5233877e-06 + p * a
    p = -4.39150654e-06 + p * a
    p = 0.00021858087 + p * a
    p = -0.00125372503 + p * a
    p = -0.00417768164 + p * a
    p = 0.246640727 + p * a
    p = 1.50140941 + p * a
    b = tl.sqrt(w) - 3.0
    q = -0.000200214257
    q = 0.000100950558 + q * b
    q = 0.00134934322 + q * b
    q = -0.00367342844 + q * b
    q = 0.00573950773 + q * b
    q = -0.0076224613 + q * b
    q = 0.00943887047 + q * b
    q = 1.00167406 + q * b
    q = 2.83297682 + q * b
    return tl.where(w < 5.0, p, q) * x
""",
    ),
    "pow": (
        (),
        """
@triton.jit
def _helion_pow(a, b):
    r = tl.exp2(b * tl.log2(tl.abs(a)))
    # a negative base: only integral exponents are defined, odd ones flip the sign
    parity = b - 2.0 * tl.floor(b * 0.5)
    negative = tl.where(b == tl.floor(b), tl.where(parity == 1.0, -r, r), float("nan"))
    r = tl.where(a < 0, negative, r)
    r = tl.where(b == 0, 1.0, r)
    return tl.where(a == 1.0, 1.0, r)
""",
    ),
    "fmod": (
        (),
        """
@triton.jit
def _helion_fmod(a, b):
    # the interpreter's `%` on floats is numpy's fmod: exact, the dividend's sign
    return a % b
""",
    ),
    "round": (
        (),
        """
@triton.jit
def _helion_round(x):
    # round half to even, like torch.round
    f = tl.floor(x)
    d = x - f
    even = f - 2.0 * tl.floor(f * 0.5) == 0.0
    r = tl.where(d > 0.5, f + 1.0, tl.where(d < 0.5, f, tl.where(even, f, f + 1.0)))
    # a zero result keeps x's sign: round(-0.3) is -0.0 (x * 0.0 is -0.0 for a negative x)
    return tl.where(r == 0.0, x * 0.0, r)
""",
    ),
}


def helper_closure(name: str) -> list[str]:
    """``name`` and the helpers it calls, dependencies first."""
    order: list[str] = []

    def visit(item: str) -> None:
        if item in order:
            return
        for dependency in HELPERS[item][0]:
            visit(dependency)
        order.append(item)

    visit(name)
    return order
