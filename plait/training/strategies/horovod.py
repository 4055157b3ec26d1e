"""Horovod: one process per worker, gradients averaged by Horovod's all-reduce (Gloo on CPU).

Horovod is started one of two ways:

* under ``horovodrun``, which puts every worker's rank and its rendezvous server in the
  environment (``HOROVOD_RANK``, ``HOROVOD_GLOO_RENDEZVOUS_ADDR``...): ``hvd.init()`` reads them;
* inside a group of workers that already share a ``torch.distributed`` group (Ray Train's
  workers, torchrun): Ray no longer ships a Horovod trainer, so plait starts Horovod's rendezvous
  server on rank 0 itself, tells the other ranks where it is through the torch group, and puts
  in the environment what ``horovodrun`` would have (``rendezvous_through_torch``).

Horovod 0.28.1, its last release, has no wheels and needs a patch to build against current
torch: ``bash scripts/build_horovod.sh`` builds and installs it.
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass

import torch

from plait.errors import BackendError
from plait.training.strategies.base import Strategy

INSTALL_HINT = ("the horovod strategy needs Horovod, built against this torch: run `bash scripts/build_horovod.sh` "
                "(or pip install 'plait[horovod]' where a Horovod wheel for your torch exists)")


def import_horovod():
    """``horovod.torch``, imported only when the strategy is used (it loads a C++ extension)."""
    try:
        import horovod.torch as hvd
    except ImportError as error:  # missing, or built against another torch (undefined symbols)
        raise BackendError(f"{INSTALL_HINT}. Import failed: {error}") from error
    return hvd


# ---- rendezvous through an existing torch.distributed group ----------------------------------


def slot_plan(hostnames: list[str]):
    """Horovod's host allocation plan (a ``SlotInfo`` per rank, in rank order) for workers whose
    hostnames are ``hostnames[rank]``. Ranks are the torch group's, which need not be grouped by
    host (``get_host_assignments`` would renumber them), so local and cross ranks are counted here:
    local rank is the order among the host's ranks, cross rank the host's order among the hosts
    with a worker of that local rank."""
    from horovod.runner.common.util.hosts import SlotInfo

    local_ranks, hosts_with_local_rank = [], {}
    for rank, host in enumerate(hostnames):
        local_ranks.append(hostnames[:rank].count(host))
        hosts_with_local_rank.setdefault(local_ranks[-1], [])
        if host not in hosts_with_local_rank[local_ranks[-1]]:
            hosts_with_local_rank[local_ranks[-1]].append(host)
    return [
        SlotInfo(hostname=host, rank=rank, local_rank=local, cross_rank=hosts_with_local_rank[local].index(host),
                 size=len(hostnames), local_size=hostnames.count(host), cross_size=len(hosts_with_local_rank[local]))
        for rank, (host, local) in enumerate(zip(hostnames, local_ranks))
    ]


def coordinator_address(master_addr: str | None) -> str:
    """An address of this host (rank 0's) that the other workers can reach: the torch group's
    master address where the backend knows it (rank 0 listens there already), else Ray's node
    address."""
    if master_addr:
        return master_addr
    if "ray" in sys.modules:
        import ray

        if ray.is_initialized():
            return ray.util.get_node_ip_address()
    return socket.gethostbyname(socket.gethostname())


def interface_towards(address: str) -> str | None:
    """The name of the network interface this host reaches ``address`` through. Gloo binds to
    one interface; left to itself it takes the hostname's address, which may be a loopback
    address other hosts cannot reach, or not the one the rendezvous server is on."""
    import psutil  # a dependency of Horovod

    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.connect((address, 9))  # UDP: picks the route, sends nothing
            local_ip = sock.getsockname()[0]
    except OSError:
        return None
    for name, addresses in psutil.net_if_addrs().items():
        if any(a.family == socket.AF_INET and a.address == local_ip for a in addresses):
            return name
    return None


@dataclass
class Rendezvous:
    """What ``rendezvous_through_torch`` started: the server runs on rank 0 only."""

    server: object | None
    address: str
    port: int


def rendezvous_through_torch(master_addr: str | None = None) -> Rendezvous:
    """Prepare ``hvd.init()`` on every rank of the current torch.distributed group (a collective).

    Rank 0 starts Horovod's HTTP rendezvous server, which Gloo's workers use to find each other,
    and shares its address; every rank then sets the environment ``horovodrun`` would set."""
    import torch.distributed as dist

    rank, size = dist.get_rank(), dist.get_world_size()
    hostnames: list = [None] * size
    dist.all_gather_object(hostnames, socket.gethostname())
    plan = slot_plan(hostnames)
    server, where = None, [None]
    if rank == 0:
        from horovod.runner.http.http_server import RendezvousServer

        server = RendezvousServer()
        port = server.start()
        server.init(plan)  # the size of each scope: the server clears a scope once all its ranks are done
        where = [(coordinator_address(master_addr), port)]
    dist.broadcast_object_list(where, src=0)
    address, port = where[0]
    mine = plan[rank]
    os.environ.update(
        HOROVOD_GLOO_RENDEZVOUS_ADDR=address, HOROVOD_GLOO_RENDEZVOUS_PORT=str(port),
        HOROVOD_CONTROLLER="gloo", HOROVOD_CPU_OPERATIONS="gloo",
        HOROVOD_HOSTNAME=mine.hostname, HOROVOD_RANK=str(mine.rank), HOROVOD_SIZE=str(mine.size),
        HOROVOD_LOCAL_RANK=str(mine.local_rank), HOROVOD_LOCAL_SIZE=str(mine.local_size),
        HOROVOD_CROSS_RANK=str(mine.cross_rank), HOROVOD_CROSS_SIZE=str(mine.cross_size),
    )
    iface = interface_towards(address)
    if iface:
        os.environ.setdefault("HOROVOD_GLOO_IFACE", iface)  # one the user set wins
    return Rendezvous(server, address, port)


def start_horovod(hvd, master_addr: str | None = None) -> Rendezvous | None:
    """``hvd.init()``, after a rendezvous through the torch group where there is one. Without a
    torch group, Horovod reads its launcher's environment (or runs as a single process)."""
    import torch.distributed as dist

    # The torch group decides, not HOROVOD_* in the environment: a process that ran a Horovod job
    # before still has the previous job's variables.
    rendezvous = rendezvous_through_torch(master_addr) if dist.is_available() and dist.is_initialized() else None
    hvd.init()
    return rendezvous


# ---- the strategy ------------------------------------------------------------------------------


class HorovodStrategy(Strategy):
    name = "horovod"
    whole_gradients_in_step = False  # exchanged inside the step (optimizer.synchronize)

    def __init__(self, config=None, device: str | None = None, master_addr: str | None = None):
        """``master_addr``: where rank 0's torch group listens, if the backend knows it (the
        rendezvous server starts beside it)."""
        self.hvd = import_horovod()
        self.rendezvous = start_horovod(self.hvd, master_addr)
        self.rank, self.world_size = self.hvd.rank(), self.hvd.size()
        self.backward_passes_per_step = 1
        if device is not None and device.startswith("cuda") and not self.hvd.cuda_built():
            device = None  # a Horovod built without CUDA reduces CPU tensors only
        if device is None and torch.cuda.is_available() and self.hvd.cuda_built():
            device = f"cuda:{self.hvd.local_rank()}"
        self.device = torch.device(device or "cpu")
        if self.device.type == "cuda":
            torch.cuda.set_device(self.device)
        self.optimizer = None
        self.passes_since_step = 0
        self.gradients_synchronized = False

    def prepare(self, model, optimizer, steps):
        hvd = self.hvd
        # Horovod's hooks count backward passes and exchange a gradient on the last one of an
        # accumulation cycle, overlapping the exchange with the rest of the backward pass.
        self.backward_passes_per_step = steps.accumulation
        model = model.to(self.device)
        # Every replica starts from rank 0's weights (and buffers) and optimizer state.
        hvd.broadcast_parameters(model.state_dict(), root_rank=0)
        if optimizer.state_dict()["state"]:
            # Only a non-empty state: for an empty one Horovod first takes an optimizer step with
            # zero gradients to create it, which applies weight decay and advances Adam's step count.
            hvd.broadcast_optimizer_state(optimizer, root_rank=0)
        self.optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters(),
                                                  backward_passes_per_step=self.backward_passes_per_step)
        return model, self.optimizer

    def backward(self, loss, sync=True):
        self.passes_since_step += 1
        # Horovod exchanges on the N-th pass and fails on the one after: a cycle may end early
        # (sync sooner), never late.
        if not sync and self.passes_since_step >= self.backward_passes_per_step and self.world_size > 1:
            raise RuntimeError(
                f"horovod: backward pass {self.passes_since_step} without an optimizer step, but Horovod exchanges "
                f"gradients every {self.backward_passes_per_step} passes (trainer.gradient_accumulation_steps)")
        loss.backward()
        if sync and self.optimizer is not None:
            # Wait for the exchange here, as DDP does in its backward pass: the trainer then clips
            # (by value or norm) averaged gradients, and the step skips Horovod's own synchronize.
            # An accumulation cycle cut short (an epoch's last batches) is exchanged here too.
            self.optimizer.synchronize()
            self.gradients_synchronized = True

    def _step(self, optimizer):
        if not self.gradients_synchronized:  # stepped without a synchronizing backward pass
            optimizer.synchronize()
        with optimizer.skip_synchronize():
            optimizer.step()
        # Horovod's zero_grad takes no set_to_none; torch's default, which it calls, sets None.
        optimizer.zero_grad()
        self.passes_since_step, self.gradients_synchronized = 0, False

    # Horovod pairs up a collective across workers by its name, so the names are fixed here. Its
    # defaults can differ between workers, and the call then hangs: broadcast_object names the
    # broadcast after the type of each worker's value (rank 0's dict never meets rank 1's None);
    # an unnamed all-reduce is numbered by a per-process count of operations.

    def all_reduce_sum(self, tensor):
        return self.hvd.allreduce(tensor.detach(), op=self.hvd.Sum, name="plait.all_reduce_sum")

    def barrier(self):
        self.hvd.barrier()

    def broadcast_object(self, value):
        return self.hvd.broadcast_object(value, root_rank=0, name="plait.broadcast_object")

    def shutdown(self):
        self.optimizer = None
        try:
            self.hvd.shutdown()
        finally:  # after Horovod's shutdown: no rank reads the rendezvous store any more
            if self.rendezvous is not None and self.rendezvous.server is not None:
                self.rendezvous.server.stop()
            self.rendezvous = None
