"""Where and how work runs (the ``backend`` section).

The section is chosen by its ``type``, and each type takes only the settings it uses: every type
has the cache settings; ``ray`` adds ``processor``, ``trainer`` and ``loader``; the launchers
(torchrun, horovod, deepspeed) add ``trainer``; ``auto`` may become ray or a launcher, so it takes
them all. A setting the chosen type would ignore is an error. Credentials are never echoed back:
the resolved config shows ``***`` in their place.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_serializer, field_validator

from plait.config.base import StrictModel, shown
from plait.errors import ConfigError

log = logging.getLogger("plait")

HIDDEN = "***"
"""What a resolved or saved config shows in place of each inline credential."""


class ProcessorConfig(StrictModel):
    type: Literal["dask", "modin"] = "dask"
    """The dataframe engine preprocessing runs on under Ray."""
    parallelism: int | None = Field(None, gt=0)
    """Number of partitions; unset, chosen from the data size and the cluster's CPUs."""
    persist: bool = True
    """Keep intermediate stages in the object store (false: stream, for data larger than memory)."""


class StrategySection(StrictModel):
    """Options of one training strategy, as plain data: ``plait.training.strategies`` builds the
    strategy its ``type`` names (``build_strategy``) and checks it (``check_strategy``)."""


class DDPConfig(StrategySection):
    type: Literal["ddp"] = "ddp"
    find_unused_parameters: bool = False
    """Allow parameters that get no gradient in a step (slower: DDP then searches the graph)."""


class FSDPConfig(StrategySection):
    type: Literal["fsdp"] = "fsdp"
    state_dict_type: Literal["full", "sharded"] = "full"
    """Checkpoints hold the full model (gathered on rank 0) or each rank's shard."""
    cpu_offload: bool = False
    """Keep parameters and optimizer state in CPU memory between uses (GPU memory for size)."""


class ZeroOffload(StrictModel):
    device: Literal["none", "cpu"] = "none"


class ZeroOptimization(StrictModel):
    stage: Literal[0, 1, 2, 3] = 2
    offload_optimizer: ZeroOffload = Field(default_factory=ZeroOffload)
    offload_param: ZeroOffload = Field(default_factory=ZeroOffload)


class Enabled(StrictModel):
    enabled: bool = False


class DeepSpeedConfig(StrategySection):
    type: Literal["deepspeed"] = "deepspeed"
    zero_optimization: ZeroOptimization = Field(default_factory=ZeroOptimization)
    """ZeRO: stage 1 shards optimizer state, 2 also gradients, 3 also parameters."""
    fp16: Enabled = Field(default_factory=Enabled)
    bf16: Enabled = Field(default_factory=Enabled)


class HorovodConfig(StrategySection):
    type: Literal["horovod"] = "horovod"


StrategyConfig = Annotated[Union[DDPConfig, FSDPConfig, DeepSpeedConfig, HorovodConfig], Field(discriminator="type")]


class DistributedTrainerConfig(StrictModel):
    strategy: StrategyConfig = Field(default_factory=DDPConfig)
    """ddp, fsdp, deepspeed or horovod; a name or a section with ``type`` and its options."""
    use_gpu: bool | None = None
    """Unset: true when the cluster has a GPU."""
    num_workers: int | None = Field(None, gt=0)
    """Unset: the number of GPUs in the cluster, or 1 when there are none."""
    resources_per_worker: dict[str, Annotated[float, Field(ge=0)]] | None = None
    """Unset: 1 CPU, plus 1 GPU when GPUs are used. A fraction of a GPU only with one worker."""
    logdir: str | None = None
    """Where each worker's log is kept (rank-<n>.log); unset: <run directory>/logs."""
    max_retries: int = Field(3, ge=0)
    """How often the worker group is restarted after a failure."""
    scheduling_timeout_s: float | None = Field(None, ge=0)
    """Seconds to wait for room on the Ray cluster when the worker group (or, for prediction, one
    Ray Data actor) does not fit on its nodes, before failing with what was asked and what exists.
    Unset: 600 on an autoscaling cluster (Ray's autoscaler may add nodes), 0 on a fixed one (fail
    at once, where Ray would wait forever)."""

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy_name(cls, value):
        return {"type": value} if isinstance(value, str) else value


class LoaderConfig(StrictModel):
    fully_executed: bool = True
    """Materialize the preprocessed dataset in the object store once (false: stream every epoch)."""
    window_size_bytes: int | None = Field(None, gt=0)
    """Load and shuffle in windows of about this many bytes, bounding memory."""


# ---- the backend section, one variant per type ------------------------------------------------

LAUNCHER_TYPES = ("torchrun", "horovod", "deepspeed")


class BackendSection(StrictModel):
    """What every backend type takes: where the preprocessed data is cached."""

    type: str
    """Which backend; each variant narrows it to its own names."""
    cache_dir: str | None = None
    """Where preprocessed data is cached: a path or an fsspec URL (s3://bucket/prefix). Unset:
    a .plait-cache folder beside the dataset, or the user cache directory for DataFrames."""
    cache_credentials: dict[str, Any] | str | None = None
    """Storage options for cache_dir (key, secret, endpoint_url, ...), or a path to a JSON file
    holding them."""

    @field_serializer("cache_credentials")
    def _hide_credentials(self, value):
        if isinstance(value, dict):
            return {key: HIDDEN for key in value}
        return value

    def credentials_hidden(self) -> bool:
        """Whether the inline cache credentials are what a saved config shows in their place
        (a config read back from a run directory)."""
        credentials = self.cache_credentials
        return isinstance(credentials, dict) and bool(credentials) and set(map(str, credentials.values())) == {HIDDEN}

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        """For a setting another backend type takes: which types use it, and the fix."""
        users = list(dict.fromkeys(kind for kind, variant in _VARIANTS.items()
                                   if kind != "auto" and key in variant.model_fields))
        if not users:
            return None
        if len(users) == 1:
            return f"only used by type {users[0]}; remove it, or set backend.type to {users[0]} (or auto)"
        return f"only used by types {', '.join(users)}; remove it, or set backend.type to one of them (or auto)"


class LocalBackendConfig(BackendSection):
    """Everything in this process: preprocessing, training on one device, prediction."""

    type: Literal["local"] = "local"
    """local: run in this process."""


class LaunchedBackendConfig(BackendSection):
    """Every process a launcher started runs the command and trains on its shard."""

    type: Literal["torchrun", "horovod", "deepspeed"] = "torchrun"
    """The launcher that starts the processes; the strategy is the config's under torchrun, and
    horovod or deepspeed under those launchers."""
    trainer: DistributedTrainerConfig = Field(default_factory=DistributedTrainerConfig)
    """The strategy and its options (num_workers only checks the launcher's process count)."""


class RayBackendConfig(BackendSection):
    """Preprocessing on a Ray cluster, training on a Ray Train worker group, prediction and
    evaluation as Ray Data jobs."""

    type: Literal["ray"] = "ray"
    """ray: join the running Ray cluster (RAY_ADDRESS), or start one on this machine."""
    processor: ProcessorConfig = Field(default_factory=ProcessorConfig)
    """The dataframe engine preprocessing runs on."""
    trainer: DistributedTrainerConfig = Field(default_factory=DistributedTrainerConfig)
    """The worker group: strategy, workers, resources, retries."""
    loader: LoaderConfig = Field(default_factory=LoaderConfig)
    """How the training workers read the preprocessed data."""


class AutoBackendConfig(RayBackendConfig):
    """The backend chosen when the work starts; it takes every setting, since it may become ray
    or a launcher."""

    type: Literal["auto"] = "auto"
    """auto: torchrun's group when torchrun started this process, else ray when a Ray cluster is
    reachable, else local."""


_VARIANTS: dict[str, type[BackendSection]] = {
    "auto": AutoBackendConfig,
    "local": LocalBackendConfig,
    "ray": RayBackendConfig,
    **{kind: LaunchedBackendConfig for kind in LAUNCHER_TYPES},
}
BACKEND_TYPES = tuple(_VARIANTS)
"""Every backend type: what ``type``, ``--backend`` and ``Model(backend=...)`` accept."""

BackendConfig = Annotated[
    Union[AutoBackendConfig, LocalBackendConfig, RayBackendConfig, LaunchedBackendConfig], Field(discriminator="type")
]


def backend_data(value: Any) -> Any:
    """``backend: ray`` is ``backend: {type: ray}``; a section without a type is ``auto``."""
    if isinstance(value, str):
        return {"type": value}
    if isinstance(value, dict) and "type" not in value:
        return {"type": "auto", **value}
    if not isinstance(value, (dict, BackendSection)):
        raise ValueError(f"got {shown(value)}; give a backend type ({', '.join(BACKEND_TYPES)}) or a section with a type "
                         "and its settings")
    return value


def with_backend_type(config, backend_type: str):
    """``config`` run on ``backend_type`` (from ``--backend`` or ``Model(..., backend=)``): the
    explicit choice wins over the file's type, and the settings the new type does not use are
    dropped (a model trained on Ray predicts locally in a Ray actor)."""
    section = config.backend
    if backend_type == section.type:
        return config
    if backend_type not in _VARIANTS:
        raise ConfigError(f"backend.type: unknown backend type {backend_type!r}; valid types are: "
                          f"{', '.join(BACKEND_TYPES)}")
    variant = _VARIANTS[backend_type]
    # Attributes, not model_dump: the dump hides the inline credentials.
    current = {name: getattr(section, name) for name in type(section).model_fields if name != "type"}
    dropped = sorted(name for name in current if name not in variant.model_fields and name in section.model_fields_set)
    if dropped:
        log.debug("backend.type %s (was %s): ignoring backend.%s", backend_type, section.type, ", backend.".join(dropped))
    kept = {name: value for name, value in current.items() if name in variant.model_fields}
    return config.model_copy(update={"backend": variant(type=backend_type, **kept)})
