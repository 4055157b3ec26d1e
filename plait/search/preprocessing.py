"""Preprocessing once per distinct setting, for the whole search (Ludwig #1416).

The driver preprocesses the config as written before the first trial; a trial whose values leave
preprocessing alone finds that cache entry. When a preprocessing setting is searched, trials ask
the broker, an actor of the search: it builds each distinct preprocessing once, under a lock per
signature, while the other trials that need the same one wait and then read it from the cache.
The broker builds, not a trial, so a trial a scheduler stops never leaves a half-built entry that
others wait on.
"""

from __future__ import annotations

import json
import threading


class PreprocessingBroker:
    """A Ray actor (threaded: trials with different settings build at once)."""

    def __init__(self):
        self.locks: dict[str, threading.Lock] = {}
        self.guard = threading.Lock()
        self.built: list[str] = []
        """The signatures this broker built (not found in the cache), in order."""

    def build(self, config_dict: dict, data: dict, seed: int) -> str:
        """The cache entry of this config's preprocessing, built if missing; its location."""
        from plait.config import load_config, with_backend_type
        from plait.data.preprocess import preprocess, preprocessing_signature

        config = with_backend_type(load_config(config_dict), "local")
        signature = json.dumps(preprocessing_signature(config), sort_keys=True, default=str)
        with self.guard:
            lock = self.locks.setdefault(signature, threading.Lock())
        with lock:
            result = preprocess(config, **data, seed=seed)
            if not result.from_cache:
                self.built.append(signature)
        return result.location

    def built_count(self) -> int:
        return len(self.built)


def start_broker():
    """The broker actor: no CPU of its own (it holds one only while it builds), and threads
    enough for every trial that waits on it."""
    import ray

    return ray.remote(num_cpus=0, max_concurrency=64)(PreprocessingBroker).remote()
