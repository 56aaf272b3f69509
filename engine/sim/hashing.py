"""64-bit mixing for the sim: a hash chain stands in for recurrent state.

splitmix64's finaliser is cheap in pure Python and makes every bit depend on every
input bit, so one stray token anywhere in the chain changes the digest.
"""

MASK = (1 << 64) - 1
_GOLDEN = 0x9E3779B97F4A7C15


def mix(x: int) -> int:
    """splitmix64 finaliser of `x` (64-bit)."""
    x = (x + _GOLDEN) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def chain(h: int, token: int) -> int:
    """The state after consuming `token` from state `h`: `mix` of the two, written out
    because it runs for every token the sim consumes."""
    x = ((h ^ ((token + 1) * 0xD6E8FEB86659FD93 & MASK)) + _GOLDEN) & MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & MASK
    return x ^ (x >> 31)


def keyed(*parts: int) -> int:
    """A 64-bit value determined by `parts` (order matters)."""
    h = 0x5EED
    for p in parts:
        h = mix(h ^ (p & MASK))
    return h


def unit(x: int) -> float:
    """Map a 64-bit value to [0, 1)."""
    return (x >> 11) / float(1 << 53)


def hexdigest(h: int) -> str:
    """The printed form of a state digest."""
    return f"{h:016x}"
