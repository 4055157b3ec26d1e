"""What several steps share: the device they measure on, timing on it, free ports."""

from __future__ import annotations

import socket
import time

from record import StepContext


def device_for(context: StepContext):
    """The GPU, or the CPU in the dry-run. On the device a missing GPU fails the part, named."""
    import torch

    if context.cpu:
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise RuntimeError("CUDA is not available to torch here: the GPU steps cannot run (see the env step)")
    return torch.device("cuda")


def synchronize(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def timed(device, function, *args, **kwargs) -> tuple[object, float]:
    """``function``'s result and its seconds, the device's queue drained at both ends."""
    synchronize(device)
    started = time.perf_counter()
    result = function(*args, **kwargs)
    synchronize(device)
    return result, time.perf_counter() - started


def reset_peak_memory(device) -> None:
    """Start counting the peak anew, after collecting what earlier parts left (models in
    reference cycles would otherwise count in this part's peak)."""
    import gc

    import torch

    if device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)


def peak_memory_gib(device) -> float | None:
    import torch

    return round(torch.cuda.max_memory_allocated(device) / 2**30, 3) if device.type == "cuda" else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
