"""A checkpoint before a node goes: Ray's notice that a node is being drained for preemption
(a spot instance reclaimed, a node the autoscaler takes back) turns into a checkpoint request.

Each Ray Train worker watches its own node in a thread. When the node appears among the
draining ones, the thread sets ``checkpoint_requested`` on the trainer's StopRequest; the next
step's all-reduce tells every worker, and they save one checkpoint together, then train on.
When the node does go, the group fails and restarts (elastic: with the workers that remain)
from that checkpoint. The notice comes from the GCS, the same list Ray Train's own preemption
watcher reads; where it cannot be read, training goes on without one.
"""

from __future__ import annotations

import contextlib
import logging
import threading

log = logging.getLogger("plait")

POLL_INTERVAL_S = 1.0
"""How often a worker asks whether its node is draining: one small GCS request. Preemption
notices give tens of seconds (Ray's default drain window is two minutes)."""


def draining_nodes() -> dict:
    """``{node id (hex): deadline in ms, 0 for none}`` of the nodes Ray is draining."""
    import ray

    return ray._private.state.state.get_draining_nodes() or {}


@contextlib.contextmanager
def checkpoint_before_preemption(stop, poll_interval_s: float = POLL_INTERVAL_S):
    """While the block runs, a drain notice for this worker's node asks ``stop`` (a
    :class:`~plait.training.interrupt.StopRequest`) for a checkpoint, once per notice."""
    import ray

    node = ray.get_runtime_context().get_node_id()
    done = threading.Event()

    def watch():
        noticed = False
        while not done.wait(poll_interval_s):
            try:
                draining = node in draining_nodes()
            except Exception:  # noqa: BLE001 (a GCS hiccup must never stop training)
                continue
            if draining and not noticed:
                log.warning("This worker's node %s is being drained (preemption): asking for a checkpoint.", node[:12])
                stop.checkpoint_requested = True
            noticed = draining

    thread = threading.Thread(target=watch, name="plait-preemption-watch", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=poll_interval_s + 1)
