"""Which Ray cluster: a running one (``RAY_ADDRESS``, or one started with ``ray start`` on
this machine) or a local one started for the run, sized from the memory this process may use.

Ray's environment (``RAY_ADDRESS``) is read in ``plait.backends.environment``.
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
from pathlib import Path
from typing import Callable

from plait.backends.environment import quiet_local_ray_start, ray_address, ray_grpc_uses_proxy, ray_uses_tls
from plait.errors import BackendError

log = logging.getLogger("plait")

def check_reachable(address: str, timeout: float = 3.0) -> None:
    """Fail fast on an address nothing listens on, or where something other than Ray listens:
    ray.init would retry for minutes, or forever."""
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if address == "auto" or address.startswith(("http://", "https://")) or not sep or not port.isdigit():
        return
    try:
        socket.create_connection((host or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as exc:
        raise BackendError(
            f"cannot reach the Ray cluster at {address} ({exc.strerror or exc}). Start it with "
            f"`ray start --head`, fix RAY_ADDRESS, or run with --backend local."
        ) from None
    if not ray_uses_tls():  # a plaintext probe cannot tell a TLS server from a foreign one
        _check_speaks_grpc(address, f"{host or '127.0.0.1'}:{port}")


GRPC_HANDSHAKE_SECONDS = 5.0
"""How long a Ray address may take to answer gRPC's handshake. A Ray cluster's GCS (and the Ray
Client server, ray://) answers in milliseconds, also across a network."""


def _check_speaks_grpc(address: str, target: str) -> None:
    """Fail when the listener does not complete a gRPC handshake (HTTP/2 settings): it is not
    Ray, and ray.init would wait on it forever."""
    import grpc  # installed with ray

    proxy = int(ray_grpc_uses_proxy())  # as Ray's own channels do
    channel = grpc.insecure_channel(target, options=[("grpc.enable_http_proxy", proxy)])
    try:
        grpc.channel_ready_future(channel).result(timeout=GRPC_HANDSHAKE_SECONDS)
    except grpc.FutureTimeoutError:
        raise BackendError(
            f"the address {address} accepts connections but does not answer as a Ray cluster (no gRPC "
            f"handshake within {GRPC_HANDSHAKE_SECONDS:g} s). Point RAY_ADDRESS at the head node's GCS address "
            "(host:6379, printed by `ray start --head`) or a Ray Client address (ray://host:10001), or run "
            "with --backend local."
        ) from None
    finally:
        channel.close()


def available_memory() -> int:
    """Physical memory, or the memory limit of this process's cgroup when that is lower (a
    container, a Kubernetes pod, a benchmark's imposed limit)."""
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError):
        total = 8 << 30
    return min([total, *_cgroup_limits()])


def _cgroup_limits() -> list[int]:
    limits = []
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return limits
    for line in lines:
        _, controllers, path = line.split(":", 2)
        if controllers == "":  # cgroup v2
            candidates = [Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max"]
        elif "memory" in controllers.split(","):  # cgroup v1
            candidates = [Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.limit_in_bytes"]
        else:
            continue
        for candidate in candidates:
            try:
                value = candidate.read_text().strip()
            except OSError:
                continue
            if value.isdigit() and int(value) < 1 << 60:  # "max" or a huge number: no limit
                limits.append(int(value))
    return limits


def _object_store_bytes() -> int:
    """A quarter of the memory available, between 256 MiB and 4 GiB: room for the tasks beside it.
    Ray spills to disk beyond it, so a small store slows big jobs down but does not fail them."""
    return int(min(4 << 30, max(256 << 20, available_memory() // 4)))


def connect() -> bool:
    """Join a running cluster or start a local Ray; True when this call started Ray."""
    try:
        import ray
    except ModuleNotFoundError:
        raise BackendError("the ray backend needs `pip install plait[ray]` (ray is not installed)") from None
    if ray.is_initialized():
        return False
    address = ray_address()
    if address:
        check_reachable(address)
        ray.init(address=address, log_to_driver=False)
        log.info("Joined the Ray cluster at %s.", address)
        return False
    quiet_local_ray_start()
    ray.init(num_cpus=os.cpu_count(), object_store_memory=_object_store_bytes(), include_dashboard=False,
             log_to_driver=False)
    log.info("Started a local Ray instance (%d CPUs).", os.cpu_count())
    return True


# ---- room for a worker group --------------------------------------------------------------------

class Unschedulable(BackendError):
    """Workers or actors that the cluster, as it is now, has no room for."""


AUTOSCALING_WAIT_S = 600.0
"""How long an autoscaling cluster gets to add nodes, when scheduling_timeout_s is unset."""
_POLL_S = 5.0


def room_for(per_worker: dict[str, float], nodes: list[dict[str, float]]) -> float:
    """How many workers of ``per_worker`` the nodes (each node's total resources) can hold at
    once (inf for a worker that asks for nothing). A worker runs on one node, so each node holds
    the workers that fit in it whole."""
    asked = {name: amount for name, amount in per_worker.items() if amount > 0}
    if not asked:
        return math.inf
    # A hair of slack: Ray keeps resources in fixed point, 0.1 * 10 must fit into 1.0.
    return sum(min(int(node.get(name, 0) / amount + 1e-6) for name, amount in asked.items()) for node in nodes)


def check_room(per_worker: dict[str, float], nodes: list[dict[str, float]], needed: int, what: str) -> None:
    """Refuse ``needed`` workers (``what`` names them for the message) the nodes cannot hold."""
    room = room_for(per_worker, nodes)
    if room >= needed:
        return
    each = ", ".join(f"{amount:g} {name}" for name, amount in per_worker.items())
    fewer = "backend.trainer.num_workers or " if needed > 1 else ""  # with one worker, only its size can change
    raise Unschedulable(
        f"{what} needs {needed} x ({each}), but this Ray cluster has room for {room}: a worker runs on one node, "
        f"and the cluster has {describe_nodes(nodes, per_worker)}. Lower {fewer}"
        "backend.trainer.resources_per_worker, or add nodes"
    )


def describe_nodes(nodes: list[dict[str, float]], per_worker: dict[str, float]) -> str:
    """'2 nodes with 4 CPU; 1 node with 8 CPU, 1 GPU': the nodes, in the resources a worker asks for."""
    if not nodes:
        return "no live node"
    shapes: dict[str, int] = {}
    for node in nodes:
        shape = ", ".join(f"{node.get(name, 0):g} {name}" for name in per_worker)
        shapes[shape] = shapes.get(shape, 0) + 1
    return "; ".join(f"{count} node{'s' if count > 1 else ''} with {shape}" for shape, count in shapes.items())


def node_resources() -> list[dict[str, float]]:
    """The total resources of each live node of the cluster this process joined."""
    import ray

    return [dict(node["Resources"]) for node in ray.nodes() if node.get("Alive")]


def free_node_resources() -> list[dict[str, float]]:
    """What each live node has free now (other jobs, deployments and placement groups hold the
    rest). Read through Ray's developer API; where that moves, the totals."""
    try:
        from ray._private.state import available_resources_per_node

        return [dict(free) for free in available_resources_per_node().values()]
    except Exception:  # noqa: BLE001 (an API Ray may change)
        return node_resources()


def is_autoscaling() -> bool:
    """Whether an autoscaler may add nodes: Ray's autoscaler publishes the cluster's node types
    to the GCS (``ray up``, KubeRay). Read through Ray's private state API: when that moves,
    plait treats the cluster as fixed, and ``scheduling_timeout_s`` still makes it wait."""
    try:
        from ray._private.state import state

        return state.get_cluster_config() is not None
    except Exception:  # noqa: BLE001 (an API Ray may change; a fixed cluster is the safe answer)
        return False


def plan_with_room(make_plan: Callable[[dict, list[dict]], dict], timeout_s: float | None) -> dict:
    """``make_plan(cluster resources, node resources)``, which raises Unschedulable when the
    cluster has no room for its plan. On a fixed cluster that is final; an autoscaling one (or
    any, with ``timeout_s`` set) is asked again until ``timeout_s`` has passed."""
    import ray

    wait = timeout_s if timeout_s is not None else (AUTOSCALING_WAIT_S if is_autoscaling() else 0.0)
    deadline = time.monotonic() + wait
    while True:
        try:
            return make_plan(ray.cluster_resources(), node_resources())
        except Unschedulable as error:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                waited = f" (after waiting {wait:g} s for nodes: backend.trainer.scheduling_timeout_s)" if wait else ""
                raise BackendError(f"{error}{waited}") from None
            log.info("Waiting up to %.0f s for the cluster to grow: %s", remaining, error)
            time.sleep(min(_POLL_S, remaining))
