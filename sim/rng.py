"""Named, independent random streams derived from one root seed.

`Rng(seed).stream("broker-a.disk")` returns a `random.Random` seeded from
`blake2b(f"{seed}/{name}")`, never from Python's salted `hash()`. Each owner asks for its
streams once, by a name that starts with its own node name, so adding a component leaves every
other component's draws unchanged (this also gives sweeps common random numbers). Asking twice
for the same name is an error: two owners sharing a stream would couple their draws.
"""

# compiled with Cython: the C declarations of this module's classes are in rng.pxd beside it

from __future__ import annotations

import hashlib
import random


def derive_seed(seed: int, name: str) -> int:
    digest = hashlib.blake2b(f"{seed}/{name}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


class Rng:
    def __init__(self, seed: int) -> None:
        self.seed = int(seed)
        self._names: dict[str, None] = {}

    def stream(self, name: str) -> random.Random:
        if name in self._names:
            raise ValueError(f"random stream {name!r} requested twice")
        self._names[name] = None
        return random.Random(derive_seed(self.seed, name))

    @property
    def names(self) -> list[str]:
        """Stream names in creation order (written to run metadata)."""
        return list(self._names)
