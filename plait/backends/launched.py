"""Processes started by a launcher: ``torchrun``, ``horovodrun`` or ``deepspeed``.

Every process runs the whole plait command. Rank 0 preprocesses into the cache while the others
wait, then every rank reads the cache and trains on its shard with the strategy the launcher
implies (``horovod`` under horovodrun, ``deepspeed`` under the deepspeed launcher, the config's
``backend.trainer.strategy`` under torchrun: ddp by default). Rank 0 alone writes outputs;
evaluation and prediction after training run on rank 0.

The launcher's environment is read in ``plait.backends.environment``.
"""

from __future__ import annotations

import logging

from plait.backends.base import Backend
from plait.backends.environment import detect_launch, launched_device, strategy_options
from plait.data.engines import get_engine
from plait.errors import BackendError

log = logging.getLogger("plait")

HOW_TO_LAUNCH = {
    "torchrun": "torchrun --nproc-per-node 2 -m plait train --config c.yaml --dataset d.csv",
    "horovod": "horovodrun -np 2 -H localhost:2 plait train --config c.yaml --dataset d.csv --backend horovod",
    "deepspeed": 'deepspeed --num_gpus 2 "$(which plait)" train --config c.yaml --dataset d.csv --backend deepspeed',
}


def strategy_for(kind: str, config):
    """The strategy section a launched run uses: the launcher's own, or the config's."""
    from plait.config.backend import DeepSpeedConfig, HorovodConfig

    configured = config.backend.trainer.strategy
    if kind == "horovod":
        return configured if configured.type == "horovod" else HorovodConfig()
    if kind == "deepspeed":
        return configured if configured.type == "deepspeed" else DeepSpeedConfig()
    return configured


class LaunchedBackend(Backend):
    def __init__(self, config, kind: str):
        """``kind``: torchrun, horovod or deepspeed (the backend type asked for or detected)."""
        from plait.training.strategies import build_strategy

        launch = detect_launch()
        if launch is None or (kind == "horovod") != (launch.launcher == "horovod"):
            raise BackendError(f"backend.type {kind} runs under its launcher, and this process was not started by it. "
                               f"Launch it as: {HOW_TO_LAUNCH[kind]}")
        self.config, self.name = config, kind
        section = strategy_for(kind, config)
        # Joins the launcher's process group.
        self.strategy = build_strategy(section, **strategy_options(section.type, launched_device(launch)))
        wanted = config.backend.trainer.num_workers
        low, high = wanted if isinstance(wanted, tuple) else (wanted, wanted)
        if wanted and not low <= self.strategy.world_size <= high:
            log.warning("backend.trainer.num_workers is %s but %s started %d processes: the launcher's %d win.",
                        list(wanted) if isinstance(wanted, tuple) else wanted, kind, self.strategy.world_size,
                        self.strategy.world_size)
        log.info("plait: rank %d of %d (%s, strategy %s); only rank 0 writes outputs.", self.strategy.rank,
                 self.strategy.world_size, kind, section.type)

    @property
    def is_coordinator(self) -> bool:
        return self.strategy.is_coordinator

    def broadcast_object(self, value):
        return self.strategy.broadcast_object(value)

    def data_engine(self):
        return get_engine("local")

    def preprocess(self, run):
        """Rank 0 builds the cache entry; the others then find it there (no work twice, and no
        two processes writing the same entry)."""
        data = run() if self.is_coordinator else None
        self.strategy.barrier()
        return data if data is not None else run()

    def fit(self, job):
        from plait.training.run import fit

        return fit(job, self.strategy)

    def shutdown(self) -> None:
        self.strategy.shutdown()
