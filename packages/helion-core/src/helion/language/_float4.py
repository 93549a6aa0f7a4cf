"""`hl.float4_e2m1fn_x2_to_float32`: FP4 (E2M1) pairs packed in bytes, decoded to float32.

A byte holds two E2M1 values, as in torch.float4_e2m1fn_x2: the first in bits 0-3, the second
in bits 4-7. A nibble is sign (bit 3), exponent (bits 2-1, bias 1) and mantissa (bit 0):

    exponent 0 (subnormal): 0.5 * mantissa               -> 0, 0.5
    exponent e in 1..3:     (1 + 0.5 * mantissa) * 2**(e-1) -> 1, 1.5, 2, 3, 4, 6

The decoder is written once with torch operations that every backend already lowers (integer
and/shift, comparisons, casts, float arithmetic): traced, it becomes those ops in
the IR; in eager mode it runs on the loaded tensors as they are. No backend needs a rule of its
own, and the result is exact (every step is exact in float32).
"""

from __future__ import annotations

from typing import Any

import torch

from helion import exc

_API = "hl.float4_e2m1fn_x2_to_float32"
#: dtypes whose bytes may hold the pairs
BYTE_DTYPES = (torch.uint8, torch.int8)
_FLOAT4_X2 = getattr(torch, "float4_e2m1fn_x2", None)


def decode_nibbles(nibble: Any) -> Any:
    """The float32 values of E2M1 codes held in the low 4 bits of an int32 tensor."""
    exponent = (nibble >> 1) & 0x3
    mantissa = (nibble & 0x1).to(torch.float32)
    # the implicit leading 1 of normal numbers (exponent > 0)
    leading = (exponent != 0).to(torch.float32)
    # 2 ** (max(exponent, 1) - 1), i.e. 1, 1, 2, 4, built from exact comparisons and products
    scale = (1.0 + (exponent >= 2).to(torch.float32)) * (1.0 + (exponent >= 3).to(torch.float32))
    magnitude = (leading + 0.5 * mantissa) * scale
    # a product with +-1.0, not a negation: code 0b1000 is -0.0, and Triton negates x as
    # 0 - x, which gives +0.0 there; 0.0 * -1.0 is -0.0 everywhere
    sign = 1.0 - 2.0 * ((nibble >> 3) & 0x1).to(torch.float32)
    return magnitude * sign


def unpack(value: Any) -> tuple[Any, Any]:
    """`(lo, hi)` float32 tensors of `value`'s shape from its packed bytes."""
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        raise exc.TypeInferenceError(
            f"{_API} expects a device tensor of packed bytes, got {type(value).__name__}"
        )
    if _FLOAT4_X2 is not None and dtype == _FLOAT4_X2:
        raise exc.TypeInferenceError(
            f"{_API}: pass the torch.float4_e2m1fn_x2 tensor viewed as bytes: "
            "x.view(torch.uint8) in host code (device code cannot reinterpret a dtype)"
        )
    if dtype not in BYTE_DTYPES:
        raise exc.TypeInferenceError(
            f"{_API} expects torch.uint8 (or int8) bytes that each hold two E2M1 values, "
            f"got {dtype}"
        )
    bits = value.to(torch.int32)
    return decode_nibbles(bits & 0xF), decode_nibbles((bits >> 4) & 0xF)
