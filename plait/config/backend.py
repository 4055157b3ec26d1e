"""Where and how work runs (the ``backend`` section).

Every setting is declared here even where the engine behind it comes with a later backend; the
local backend ignores the Ray-only ones. Credentials are never echoed back: the resolved config
shows ``***`` in their place.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, Union

from pydantic import Field, field_serializer, field_validator

from plait.config.base import StrictModel

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
    """Options of one training strategy; ``build`` makes the strategy on a worker."""

    def build(self, trainer=None, device: str | None = None, **options):
        """The strategy, on ``device`` (default: the CPU)."""
        from plait.training.strategies import get_strategy

        return get_strategy(self.type, config=self, trainer=trainer, device=device, **options)

    def check(self, trainer=None) -> None:
        """Refuse settings the strategy would refuse on a worker, before any worker starts."""


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

    def check(self, trainer=None) -> None:
        from plait.training.strategies.deepspeed import check_supported

        check_supported(self, trainer)


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
    resources_per_worker: dict[str, float] | None = None
    """Unset: 1 CPU, plus 1 GPU when GPUs are used. A fraction of a GPU only with one worker."""
    logdir: str | None = None
    """Where each worker's log is kept (rank-<n>.log); unset: <run directory>/logs."""
    max_retries: int = Field(3, ge=0)
    """How often the worker group is restarted after a failure."""

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy_name(cls, value):
        return {"type": value} if isinstance(value, str) else value


class LoaderConfig(StrictModel):
    fully_executed: bool = True
    """Materialize the preprocessed dataset in the object store once (false: stream every epoch)."""
    window_size_bytes: int | None = Field(None, gt=0)
    """Load and shuffle in windows of about this many bytes, bounding memory."""


class BackendConfig(StrictModel):
    type: Literal["auto", "local", "ray", "torchrun", "horovod", "deepspeed"] = "auto"
    """auto: torchrun's group when torchrun started this process, else ray when a Ray cluster is
    reachable, else local. torchrun, horovod and deepspeed: every process of that launcher runs
    the command and trains on its shard (strategy: the config's, horovod, deepspeed)."""
    cache_dir: str | None = None
    """Where preprocessed data is cached: a path or an fsspec URL (s3://bucket/prefix). Unset:
    a .plait-cache folder beside the dataset, or the user cache directory for DataFrames."""
    cache_credentials: dict[str, Any] | str | None = None
    """Storage options for cache_dir (key, secret, endpoint_url, ...), or a path to a JSON file
    holding them."""
    processor: ProcessorConfig = Field(default_factory=ProcessorConfig)
    trainer: DistributedTrainerConfig = Field(default_factory=DistributedTrainerConfig)
    loader: LoaderConfig = Field(default_factory=LoaderConfig)

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
