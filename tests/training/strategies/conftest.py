"""A real process group (gloo; NCCL for GPU tests) of several processes on this machine, for the strategies' tests.

``run_workers(fn, world_size=2, *args)`` starts ``world_size`` processes, joins them in a gloo
group (``RANK``, ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set as torchrun sets them),
calls ``fn(rank, *args)`` in each and returns their results by rank. A worker's exception fails
the test with that worker's traceback; the group is always torn down.
"""

from __future__ import annotations

import os
import pickle
import socket
import traceback

import pytest
import torch.multiprocessing as mp


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _worker(rank: int, world_size: int, port: int, fn, args, results, backend: str) -> None:
    if backend == "gloo":  # a CPU test, also on a machine with GPUs (strategies pick a GPU when they see one)
        os.environ["CUDA_VISIBLE_DEVICES"] = ""
    import torch
    import torch.distributed as dist

    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world_size), LOCAL_WORLD_SIZE=str(world_size),
                      MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    torch.set_num_threads(1)
    try:
        if backend == "nccl":
            torch.cuda.set_device(rank)
        dist.init_process_group(backend, rank=rank, world_size=world_size)
        # Plain pickle bytes: a tensor sent through the queue as-is is shared by file descriptor,
        # which vanishes when this process exits.
        results.put((rank, "ok", pickle.dumps(fn(rank, *args))))
    except BaseException:
        results.put((rank, "error", traceback.format_exc()))
    finally:
        import gc

        gc.collect()  # release models before the group: gloo aborts at exit otherwise
        if dist.is_initialized():
            dist.destroy_process_group()


def _run_workers(fn, world_size: int = 2, *args, backend: str = "gloo", timeout: float = 240):
    context = mp.get_context("spawn")
    results = context.Queue()
    port = free_port()
    processes = [context.Process(target=_worker, args=(rank, world_size, port, fn, args, results, backend)) for rank in range(world_size)]
    for process in processes:
        process.start()
    outcomes = {}
    try:
        for _ in range(world_size):
            rank, status, value = results.get(timeout=timeout)
            if status == "error":
                pytest.fail(f"worker {rank} failed:\n{value}")
            outcomes[rank] = pickle.loads(value)
    finally:
        for process in processes:
            process.join(timeout=30)
            if process.is_alive():
                process.kill()
    return [outcomes[rank] for rank in range(world_size)]


@pytest.fixture(scope="session")
def run_workers():
    """run_workers(fn, world_size=2, *args, backend="gloo") -> [fn's result on rank 0, rank 1, ...];
    ``fn`` must be a module-level function (it is pickled into spawned processes)."""
    return _run_workers
