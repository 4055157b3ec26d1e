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

from pydantic import Field, field_serializer, field_validator, model_validator

from plait.config.base import StrictModel, field_error, ludwig_only, ludwig_types_not_implemented, shown, suggest
from plait.errors import ConfigError

log = logging.getLogger("plait")

HIDDEN = "***"
"""What a resolved or saved config shows in place of each inline credential."""


CREDENTIAL_USES = {
    "cache": None,
    "defaults": None,
    "datasets": "plait reads datasets with the storage's own credentials: environment variables (AWS_ACCESS_KEY_ID, "
                "AWS_SECRET_ACCESS_KEY, AWS_ENDPOINT_URL, ...) or its config files; remove it",
    "artifacts": None,
}
"""The uses of Ludwig's ``backend.credentials``, with the advice for those plait refuses."""


def _credentials_by_use(credentials: Any) -> dict:
    """Ludwig's ``credentials`` section checked: {use: storage options or a JSON file's path}
    (errors never echo values)."""
    if credentials is None:
        return {}
    if not isinstance(credentials, dict):
        raise field_error("credentials", "expected a mapping from a use (cache, defaults, datasets, artifacts) to "
                                         "storage options or a JSON file's path")
    for use, value in credentials.items():
        if use not in CREDENTIAL_USES:
            raise field_error(f"credentials.{_key(use)}", f"unknown use; {suggest(str(use), CREDENTIAL_USES)}")
        if value is not None and CREDENTIAL_USES[use]:
            raise field_error(f"credentials.{use}", f"plait does not use Ludwig's credentials for {use} (only null "
                                                    f"is accepted): {CREDENTIAL_USES[use]}")
        if value is not None and not isinstance(value, (dict, str)):
            raise field_error(f"credentials.{use}", "expected storage options (a mapping) or a JSON file's path")
    return credentials


def _key(key: Any) -> str:
    return shown(key) if not isinstance(key, str) or len(key) > 40 else key


class ProcessorConfig(StrictModel):
    type: Literal["dask", "modin"] = "dask"
    """The dataframe engine preprocessing runs on under Ray. (Ludwig's ``pandas``, preprocessing in
    the driver, is backend.type local here.)"""
    parallelism: int | None = Field(None, gt=0)
    """Number of partitions; unset, chosen from the data size and the cluster's CPUs."""
    persist: bool = True
    """Keep intermediate stages in the object store (false: stream, for data larger than memory)."""

    @field_validator("type", mode="before")
    @classmethod
    def _pandas(cls, value):
        if value == "pandas":
            raise ValueError("Ludwig's pandas processor (preprocessing in the driver) is plait's backend.type local; "
                             "on Ray use dask or modin")
        return value


class StrategySection(StrictModel):
    """Options of one training strategy, as plain data: ``plait.training.strategies`` builds the
    strategy its ``type`` names (``build_strategy``) and checks it (``check_strategy``)."""


class DDPConfig(StrategySection):
    type: Literal["ddp"] = "ddp"
    find_unused_parameters: bool = False
    """Allow parameters that get no gradient in a step (slower: DDP then searches the graph)."""


class FSDPConfig(StrategySection):
    type: Literal["fsdp"] = "fsdp"
    state_dict_type: Literal["full", "sharded"] = "sharded"
    """Checkpoints hold each rank's shard (written and read by every rank in parallel; a resume
    may use another number of workers) or the full model and optimizer state, gathered on rank
    0 (which then holds them whole for a moment). The final model is gathered either way."""
    cpu_offload: bool = False
    """Keep parameters and optimizer state in CPU memory between uses (GPU memory for size)."""


class ZeroOffload(StrictModel):
    device: Literal["none", "cpu"] = "none"
    """Where ZeRO keeps this state between uses: on the GPU (none) or in CPU memory."""
    pin_memory: bool = True
    """Offload into page-locked CPU memory (faster copies to and from the GPU; DeepSpeed's default).
    Turn it off where the locked-memory limit (ulimit -l) is small."""

    @field_validator("device", mode="before")
    @classmethod
    def _nvme(cls, value):
        if value == "nvme":
            raise ValueError("plait offloads to CPU memory only (DeepSpeed's NVMe offload needs its compiled "
                             "async-I/O op, which plait does not build); use cpu")
        return value

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        if key in _DEEPSPEED_NVME_KEYS:
            return "a setting of DeepSpeed's NVMe offload, which plait does not use (device is none or cpu); remove it"
        return None


class ZeroOptimization(StrictModel):
    stage: Literal[0, 1, 2, 3] = 2
    """ZeRO stage: 1 shards optimizer state, 2 also gradients, 3 also parameters."""
    offload_optimizer: ZeroOffload = Field(default_factory=ZeroOffload)
    """Optimizer state in CPU memory (stages 1-3); plait's own optimizer steps it there."""
    offload_param: ZeroOffload = Field(default_factory=ZeroOffload)
    """Parameters in CPU memory between uses (stage 3 only)."""

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        if key in _DEEPSPEED_ZERO_TUNING_KEYS:
            return ("a DeepSpeed ZeRO tuning setting plait does not pass on (it sizes ZeRO-3's buckets from the model "
                    "and keeps DeepSpeed's defaults otherwise); remove it, "
                    "or set only stage, offload_optimizer and offload_param")
        return None


class Enabled(StrictModel):
    enabled: bool = False

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        if key in _DEEPSPEED_PRECISION_KEYS:
            return ("a setting of DeepSpeed's fp16/bf16 loss scaling that plait does not pass on (DeepSpeed's "
                    "dynamic loss scaling is used); remove it")
        return None


class DeepSpeedConfig(StrategySection):
    type: Literal["deepspeed"] = "deepspeed"
    zero_optimization: ZeroOptimization = Field(default_factory=ZeroOptimization)
    """ZeRO: stage 1 shards optimizer state, 2 also gradients, 3 also parameters."""
    fp16: Enabled = Field(default_factory=Enabled)
    bf16: Enabled = Field(default_factory=Enabled)

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        """DeepSpeed settings that plait takes from its own trainer section, as Ludwig does."""
        if key in _DEEPSPEED_TRAINER_KEYS:
            return f"set in plait's trainer section, not in the DeepSpeed section: {_DEEPSPEED_TRAINER_KEYS[key]}"
        return None


# DeepSpeed's own config keys that a Ludwig user may copy into the strategy section (Ludwig hands
# the section to DeepSpeed whole). plait builds DeepSpeed's config itself, so each is refused with
# where its setting lives in plait, rather than as an unknown name.
_DEEPSPEED_TRAINER_KEYS = {
    "train_batch_size": "trainer.batch_size (per worker) times the workers",
    "train_micro_batch_size_per_gpu": "trainer.batch_size",
    "gradient_accumulation_steps": "trainer.gradient_accumulation_steps",
    "gradient_clipping": "trainer.gradient_clipping.clipglobalnorm",
    "optimizer": "trainer.optimizer",
    "scheduler": "trainer.learning_rate_scheduler",
}
_DEEPSPEED_ZERO_TUNING_KEYS = {
    "contiguous_gradients", "reduce_scatter", "reduce_bucket_size", "allgather_partitions", "allgather_bucket_size",
    "overlap_comm", "load_from_fp32_weights", "elastic_checkpoint", "sub_group_size", "round_robin_gradients",
    "stage3_prefetch_bucket_size", "stage3_param_persistence_threshold", "stage3_max_live_parameters",
    "stage3_max_reuse_distance", "stage3_gather_16bit_weights_on_model_save", "stage3_gather_fp16_weights_on_model_save",
    "cpu_offload", "cpu_offload_param", "cpu_offload_use_pin_memory", "ignore_unused_parameters",
    "use_multi_rank_bucket_allreduce", "zero_hpz_partition_size", "zero_quantized_weights", "zero_quantized_gradients",
}
_DEEPSPEED_NVME_KEYS = {"nvme_path", "buffer_count", "buffer_size", "max_in_cpu", "pipeline_read", "pipeline_write",
                        "fast_init", "ratio"}
_DEEPSPEED_PRECISION_KEYS = {"loss_scale", "initial_scale_power", "loss_scale_window", "hysteresis",
                             "consecutive_hysteresis", "min_loss_scale", "auto_cast", "immediate_grad_update"}


class HorovodConfig(StrategySection):
    type: Literal["horovod"] = "horovod"


StrategyConfig = Annotated[Union[DDPConfig, FSDPConfig, DeepSpeedConfig, HorovodConfig], Field(discriminator="type")]


class DistributedTrainerConfig(StrictModel):
    strategy: StrategyConfig = Field(default_factory=DDPConfig)
    """ddp, fsdp, deepspeed or horovod; a name or a section with ``type`` and its options. ``auto``
    (and Ludwig's ``accelerate`` without options) is ddp: plait's models fit on one device, so
    data parallelism is the fast choice; under the horovodrun and deepspeed launchers the launcher's
    strategy is used whatever is set here."""
    use_gpu: bool | None = None
    """Unset: true when the cluster has a GPU."""
    num_workers: int | tuple[int, int] | None = None
    """Unset: the number of GPUs in the cluster, or 1 when there are none. ``[min, max]`` (say
    ``[2, 8]``) makes the group elastic: it starts with as many workers as the cluster can hold
    at once (at least min, at most max), goes on with the workers that remain when a node is
    lost (from the last checkpoint), and grows again when room comes back. Each worker keeps
    trainer.batch_size, so the global batch follows the worker count, and the learning rate is
    rescaled for the count by trainer.learning_rate_scaling."""
    placement_strategy: Literal["PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"] = "PACK"
    """How Ray places the workers on nodes: PACK fills as few nodes as possible (fast
    collectives), SPREAD puts them on as many nodes as it can (a lost node costs fewer workers);
    the STRICT variants refuse to start otherwise."""
    elastic_resize_interval_s: float = Field(60.0, ge=0)
    """With a range of workers: how often Ray Train checks whether more workers now fit. Growing
    restarts the group from the last checkpoint."""
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

    nics: Annotated[list[str] | None, ludwig_only(None, instead=(
        "choose the network interface in the environment: NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME (or "
        "horovodrun --network-interface)"))] = None
    """Ludwig's legacy Horovod network interfaces (Ludwig drops it too); only null is accepted."""

    @field_validator("num_workers", mode="before")
    @classmethod
    def _count_or_range(cls, value):
        whole = lambda v: isinstance(v, int) and not isinstance(v, bool) and v > 0  # noqa: E731
        if value is None or whole(value):
            return value
        if isinstance(value, (list, tuple)) and len(value) == 2 and all(map(whole, value)):
            if value[0] > value[1]:
                raise ValueError(f"got [{value[0]}, {value[1]}]; a range of workers is [min, max] with min <= max")
            return tuple(value)
        raise ValueError(f"got {shown(value)}; expected a number of workers (at least 1), or a range [min, max] "
                         "of them for an elastic group")

    @model_validator(mode="after")
    def _elastic_strategy(self):
        if isinstance(self.num_workers, tuple) and self.num_workers[0] != self.num_workers[1] \
                and self.strategy.type == "deepspeed":
            raise field_error("num_workers", f"got [{self.num_workers[0]}, {self.num_workers[1]}] with the deepspeed "
                                             "strategy, whose checkpoints hold each worker's optimizer partition and "
                                             "load only on the same number of workers; give a fixed count, or use "
                                             "ddp or fsdp for an elastic group")
        return self

    @field_validator("strategy", mode="before")
    @classmethod
    def _strategy_name(cls, value):
        section = {"type": value} if isinstance(value, str) else value
        if isinstance(section, dict) and section.get("type") in ("auto", "accelerate"):
            return _auto_strategy(section)
        return section


def _auto_strategy(section: dict) -> dict:
    """``auto`` and Ludwig's ``accelerate`` (which, given no plugin settings, runs DDP): ddp. The
    options of Accelerate's plugins are refused with plait's own section for them."""
    options = sorted(key for key in section if key != "type")
    if options:
        raise ValueError(f"strategy {section['type']!r} takes no options here (got {', '.join(options)}); "
                         "name the strategy instead: {type: fsdp, ...} or {type: deepspeed, zero_optimization: ...}, "
                         "and mixed precision with trainer.use_mixed_precision")
    return {"type": "ddp"}


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
    holding them. Ludwig's ``credentials: {cache: ...}`` (or its ``defaults``) is read as this
    setting; its credentials for ``datasets`` are refused: plait reads data with the storage's
    own credentials (environment variables such as AWS_ACCESS_KEY_ID, or its config files)."""

    artifacts_credentials: dict[str, Any] | str | None = None
    """Storage options for a run directory on object storage (``--output-directory s3://...``:
    checkpoints, the model, statistics, logs), or a path to a JSON file holding them. Ludwig's
    ``credentials: {artifacts: ...}`` (or its ``defaults``) is read as this setting. Unset: the
    storage's own credentials (environment variables such as AWS_ACCESS_KEY_ID, its config
    files, or the node's role)."""

    @field_serializer("cache_credentials", "artifacts_credentials")
    def _hide_credentials(self, value):
        if isinstance(value, dict):
            return {key: HIDDEN for key in value}
        return value

    @model_validator(mode="before")
    @classmethod
    def _ludwig_credentials(cls, data: Any) -> Any:
        """Ludwig's ``backend.credentials`` (storage options per use) read into cache_credentials
        and artifacts_credentials."""
        if not isinstance(data, dict) or "credentials" not in data:
            return data
        data = dict(data)
        by_use = _credentials_by_use(data.pop("credentials"))
        for use, setting in (("cache", "cache_credentials"), ("artifacts", "artifacts_credentials")):
            given = by_use.get(use) or by_use.get("defaults")
            if given is None:
                continue
            if data.get(setting) not in (None, given):
                raise field_error(setting, f"differs from credentials.{use} (or credentials.defaults); give the "
                                           f"{use} credentials once")
            data[setting] = given
        return data

    def credentials_hidden(self) -> bool:
        """Whether inline credentials are what a saved config shows in their place (a config read
        back from a run directory)."""
        return any(isinstance(credentials, dict) and bool(credentials) and set(map(str, credentials.values())) == {HIDDEN}
                   for credentials in (self.cache_credentials, self.artifacts_credentials))

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
    preprocessor_kwargs: Annotated[dict[str, Any] | None, ludwig_only(None, {}, instead=(
        "plait does not reserve CPUs for preprocessing (Ludwig's num_cpu placement group); its Dask or Modin "
        "tasks use the cluster's free CPUs, and processor.parallelism bounds the partitions"))] = None
    """Ludwig's CPU reservation for preprocessing; only null or {} is accepted."""


class AutoBackendConfig(RayBackendConfig):
    """The backend chosen when the work starts; it takes every setting, since it may become ray
    or a launcher."""

    type: Literal["auto"] = "auto"
    """auto: torchrun's group when torchrun started this process, else ray when a Ray cluster is
    reachable, else local."""


ludwig_types_not_implemented("backend", {
    "dask": "Ludwig lists it but has no such backend; use type ray, whose processor.type is dask by default",
})

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
    """``backend: ray`` is ``backend: {type: ray}``; a section without a type, or none at all
    (``backend: null``, as Ludwig renders a config without one), is ``auto``."""
    if value is None:
        return {"type": "auto"}
    if isinstance(value, str):
        return {"type": value}
    if isinstance(value, dict) and "type" not in value:
        return {"type": "auto", **value}
    if not isinstance(value, (dict, BackendSection)):
        raise ValueError(f"got {shown(value)}; give a backend type ({', '.join(BACKEND_TYPES)}) or a section with a type "
                         "and its settings")
    return value


def with_backend_type(config, backend_type: str):
    """``config`` run on ``backend_type`` (``Model(..., backend=)``, a saved model served or
    predicted elsewhere): the explicit choice wins over the file's type, and the settings the new
    type does not use are dropped (a model trained on Ray predicts locally in a Ray actor)."""
    section = config.backend
    if backend_type == section.type:
        return config
    # Attributes, not model_dump: the dump hides the inline credentials.
    current = {name: getattr(section, name) for name in type(section).model_fields if name != "type"}
    kept = _settings_of_type(backend_type, section.type, current, section.model_fields_set)
    return config.model_copy(update={"backend": _VARIANTS[backend_type](type=backend_type, **kept)})


def with_command_line(source: dict, backend_type: str | None = None, cache_dir: str | None = None) -> dict:
    """The raw config ``source`` with the command line's ``--backend`` and ``--cache-dir`` (the
    explicit choice wins over the file's); settings the new type does not use are dropped. Not
    validated here: ``load_config`` validates the result, overrides included."""
    if backend_type is None and cache_dir is None:
        return source
    section = backend_data(source.get("backend"))
    if not isinstance(section, dict):
        return source  # a section that is not a mapping: validation says so
    section = dict(section)
    if backend_type is not None and backend_type != section["type"]:
        settings = {name: value for name, value in section.items() if name != "type"}
        section = {"type": backend_type, **_settings_of_type(backend_type, section["type"], settings, set(settings))}
    if cache_dir is not None:
        section["cache_dir"] = cache_dir
    return {**source, "backend": section}


def _settings_of_type(backend_type: str, was: str, settings: dict, given: set[str]) -> dict:
    """Of a section's ``settings``, those a ``backend_type`` section has (the ones ``given`` in the
    config and dropped are logged)."""
    if backend_type not in _VARIANTS:
        raise ConfigError(f"backend.type: unknown backend type {backend_type!r}; valid types are: "
                          f"{', '.join(BACKEND_TYPES)}")
    fields = _VARIANTS[backend_type].model_fields
    dropped = sorted(name for name in settings if name not in fields and name in given)
    if dropped:
        log.debug("backend.type %s (was %s): ignoring backend.%s", backend_type, was, ", backend.".join(dropped))
    return {name: value for name, value in settings.items() if name in fields}
