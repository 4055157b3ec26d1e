"""The explanation tests' table: labels that depend on two inputs (the number x0 and the
category c0) of several, so that any sound method ranks those two first."""

from __future__ import annotations

import numpy as np
import pandas as pd

RELEVANT = {"x0", "c0"}


def relevant_rows(count: int, seed: int, numbers: int = 6) -> pd.DataFrame:
    """``numbers`` number inputs x0.., categories c0 and c1; a binary label y and a three-class
    label z, both from x0 and whether c0 is "a"."""
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"x{i}": rng.normal(size=count) for i in range(numbers)})
    frame["c0"], frame["c1"] = rng.choice(list("abcd"), count), rng.choice(list("pq"), count)
    signal = frame["x0"] + 2.0 * (frame["c0"] == "a") - 1.0
    frame["y"] = np.where(signal > 0, "yes", "no")
    frame["z"] = np.where(signal > 0.8, "high", np.where(signal > -0.8, "mid", "low"))
    return frame
