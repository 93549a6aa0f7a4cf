"""The random-number stream behind `hl.rand`, `hl.randint`, `hl.rand4x` and in-kernel `torch.rand`.

Counter-based Philox4x32-10, word for word the generator of `triton.language.random`: a 64-bit
seed is the key (low word, high word) and an integer offset is the counter (low word, high word
for 64-bit offsets, then two zero words). Everything here is written with int64 torch tensors that
hold uint32 values, so the ref backend and eager mode produce the same bits as `tl.rand`,
`tl.randint` and `tl.rand4x` on any device; `tl.randn` agrees up to the float rounding of `log`,
`sqrt` and `cos`.

The functions also serve host code as the reference of a random kernel: `uniform(seed, offsets)`
is what `hl.rand` gives at those offsets.
"""

from __future__ import annotations

from typing import Any

import torch

MASK32 = 0xFFFFFFFF
ROUNDS = 10
# Philox4x32 multipliers and Weyl key increments (Salmon et al., "Parallel random numbers: as
# easy as 1, 2, 3", SC'11), in the pairing Triton uses
_ROUND_A = 0xD2511F53
_ROUND_B = 0xCD9E8D57
_KEY_A = 0x9E3779B9
_KEY_B = 0xBB67AE85
# the largest float32 such that (2**31 - 1) * scale < 1.0 after float32 rounding (Triton's choice)
UNIFORM_SCALE = 4.6566127342e-10
# Box-Muller constants of tl.randn
_TWO_PI = 6.283185307179586
_MIN_UNIFORM = 1.0e-7


def _mulhilo(multiplier: int, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """High and low 32-bit words of `multiplier * x` for uint32 values held in int64 (the full
    64-bit product would overflow int64, so `x` is split into 16-bit halves)."""
    high_part = multiplier * (x >> 16)  # < 2**48
    low_part = multiplier * (x & 0xFFFF)  # < 2**48
    high = (high_part + (low_part >> 16)) >> 16
    low = (((high_part & 0xFFFF) << 16) + low_part) & MASK32
    return high, low


def _as_int64(value: Any, device: torch.device | None) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point or value.dtype == torch.bool:
            raise TypeError(f"Philox needs integer seeds and offsets, got {value.dtype}")
        return value.to(torch.int64)
    return torch.tensor(int(value), dtype=torch.int64, device=device)


def philox4x32(seed: Any, offsets: torch.Tensor, rounds: int = ROUNDS) -> tuple[torch.Tensor, ...]:
    """The four uint32 words (as int64 tensors of `offsets`' shape) of Philox4x32 at `offsets`.

    Args:
        seed: an int or an integer tensor (0-D, or broadcastable to `offsets`); its 64 bits
            are the key, as in `tl.randint4x`.
        offsets: an integer tensor. int32 offsets are one counter word (bit-cast to uint32);
            int64 offsets give the low and the high counter word.
        rounds: Philox rounds (10 is the standard and Triton's default).

    Returns:
        `(c0, c1, c2, c3)`; `c0` is what `tl.randint` returns.
    """
    if (
        not isinstance(offsets, torch.Tensor)
        or offsets.dtype.is_floating_point
        or offsets.dtype == torch.bool
    ):
        raise TypeError("philox4x32: offsets must be an integer tensor")
    wide = offsets.dtype.itemsize > 4
    counter = offsets.to(torch.int64)
    key = _as_int64(seed, offsets.device)
    c0 = counter & MASK32
    c1 = (counter >> 32) & MASK32 if wide else torch.zeros_like(c0)
    zero = torch.zeros_like(c0)
    return philox_rounds((c0, c1, zero, zero), (key & MASK32, (key >> 32) & MASK32), rounds)


def philox_rounds(
    counter: tuple[torch.Tensor, ...], key: tuple[torch.Tensor, torch.Tensor], rounds: int = ROUNDS
) -> tuple[torch.Tensor, ...]:
    """Philox4x32 on a full counter `(c0, c1, c2, c3)` and key `(k0, k1)` of uint32 words held
    in int64 tensors (the bare generator, as in the Random123 known-answer tests)."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for _ in range(rounds):
        high_b, low_b = _mulhilo(_ROUND_B, c2)
        high_a, low_a = _mulhilo(_ROUND_A, c0)
        c0, c1, c2, c3 = high_b ^ c1 ^ k0, low_b, high_a ^ c3 ^ k1, low_a
        k0 = (k0 + _KEY_A) & MASK32
        k1 = (k1 + _KEY_B) & MASK32
    return c0, c1, c2, c3


def uint32_to_uniform(words: torch.Tensor) -> torch.Tensor:
    """uint32 words (in int64) to float32 in [0, 1), as `tl.rand` maps them: the word is read as
    an int32, negative values are bit-inverted, and the result is scaled by ~2**-31."""
    folded = torch.where(words >= 2**31, MASK32 - words, words)  # ~x of the int32 view
    scale = torch.tensor(UNIFORM_SCALE, dtype=torch.float32, device=words.device)
    return folded.to(torch.float32) * scale


def uniform(seed: Any, offsets: torch.Tensor) -> torch.Tensor:
    """float32 uniforms in [0, 1) at `offsets`: the values of `tl.rand(seed, offsets)`."""
    return uint32_to_uniform(philox4x32(seed, offsets)[0])


def uniform4x(seed: Any, offsets: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """Four float32 uniforms per offset: the values of `tl.rand4x(seed, offsets)`."""
    return tuple(uint32_to_uniform(word) for word in philox4x32(seed, offsets))


def normal(seed: Any, offsets: torch.Tensor) -> torch.Tensor:
    """float32 standard normals at `offsets` by Box-Muller on the first two words, as
    `tl.randn(seed, offsets)` computes them (equal up to float rounding of log/sqrt/cos)."""
    c0, c1, _, _ = philox4x32(seed, offsets)
    u1 = torch.clamp_min(uint32_to_uniform(c0), _MIN_UNIFORM)
    theta = uint32_to_uniform(c1) * _TWO_PI
    radius = torch.sqrt(torch.log(u1) * -2.0)
    return radius * torch.cos(theta)


def randint(seed: Any, offsets: torch.Tensor, low: int, high: int) -> torch.Tensor:
    """int32 integers in [low, high) at `offsets`: `low + tl.randint(seed, offsets) % (high - low)`
    (the modulo has a bias below (high - low) / 2**32)."""
    check_int_range(low, high)
    words = philox4x32(seed, offsets)[0]
    return (words % (high - low) + low).to(torch.int32)


def check_int_range(low: Any, high: Any) -> None:
    for bound in (low, high):
        if isinstance(bound, bool) or not isinstance(bound, int):
            raise TypeError(f"hl.randint bounds must be Python ints, got {type(bound).__name__}")
    if not -(2**31) <= low < high <= 2**31:
        raise ValueError(
            f"hl.randint needs -2**31 <= low < high <= 2**31, got low={low}, high={high}"
        )


def row_major_offsets(indices: list[torch.Tensor], extents: list[int]) -> torch.Tensor:
    """The default offsets of `hl.rand`: `sum(index_d * prod(extents[d+1:]))` with each 1-D
    `indices[d]` placed along dimension d (a tile's indices, or `arange(n)` for a size)."""
    rank = len(indices)
    if rank == 0:
        return torch.zeros((), dtype=torch.int32)
    result = None
    stride = 1
    for dim in reversed(range(rank)):
        shape = [1] * rank
        shape[dim] = -1
        term = indices[dim].reshape(shape)
        if stride != 1:
            term = term * stride
        result = term if result is None else term + result
        stride *= int(extents[dim])
    return result


# -- seeds of in-kernel torch.rand -----------------------------------------------------------------


def draw_call_seed() -> int:
    """A fresh 32-bit seed from torch's default CPU generator, drawn once per kernel call that
    uses `torch.rand`-style functions in device code (so `torch.manual_seed` makes it repeatable)."""
    return int(torch.randint(0, 2**32, (), dtype=torch.int64))


def site_id(line_offset: int, column: int) -> int:
    """The number of one `torch.rand` call site: its line (relative to the kernel's first line)
    and column. The site becomes the high word of the Philox key, so every call site draws an
    independent stream from the same per-call seed."""
    return (max(int(line_offset), 0) % (2**19)) * 4096 + min(max(int(column), 0), 4095)


def site_seed(call_seed: int, site: int) -> int:
    """The 64-bit Philox key of call site `site` for a call whose seed is `call_seed`."""
    return (int(call_seed) & MASK32) | (int(site) << 32)
