"""The function Ray Train runs on each worker, in a module that imports nothing heavy.

Ray Train's controller unpickles the training function and its config before it starts any
worker. Referring to plait's training module made the controller import it (1.3 s of a run's
start on two cores, on the critical path); this module, and a config that is one object
reference to (the function, its config), keep that import on the workers, which need it anyway.
"""

from __future__ import annotations


def run_worker(loop_config: dict) -> None:
    """Run the work in ``loop_config["payload"]``: (a function, its config), fetched here."""
    import ray

    work, config = ray.get(loop_config["payload"])
    work(config)
