"""The ``tracking`` section: the experiment trackers a run logs to (MLflow, W&B, Aim, Comet).

plait's own top-level section, a list: several tools can be on at once, each item chosen by its
``type``. It is neither model nor preprocessing (no cache key, no model identity), and it travels
with the config, so the Python API, the CLI (whose ``--mlflow``, ``--wandb``, ``--aim`` and
``--comet`` add items) and every search trial track alike. Plain data: the trackers themselves
are ``plait.tracking``, which also reads each tool's environment variables.

Credentials never go here: each tool takes them from its own environment variables
(``MLFLOW_TRACKING_USERNAME``/``_PASSWORD``, ``WANDB_API_KEY``, ``COMET_API_KEY``), so a saved
config or a logged parameter cannot leak them.
"""

from __future__ import annotations

from typing import Annotated, Literal, Union
from urllib.parse import urlsplit

from pydantic import Field, field_validator

from plait.config.base import TypedModel


def _no_password(value: str | None, variables: str) -> str | None:
    """A URL that holds a password would be saved in config.yaml and logged with the params."""
    if value is not None and "://" in value:
        try:
            password = urlsplit(value).password
        except ValueError:
            password = None
        if password is not None or "@" in value.split("://", 1)[1].split("/", 1)[0]:
            raise ValueError(f"the URL holds credentials ({value.split('://', 1)[0]}://<user>:<password>@...); give it "
                             f"without them and set {variables} in the environment instead")
    return value


class MLflowTracking(TypedModel):
    """MLflow: one run per training run; a search's trials nested under the search's run."""

    type: Literal["mlflow"]
    tracking_uri: str | None = None
    """Where runs are stored: an MLflow server (``http://host:5000``), ``sqlite:///path.db`` or
    ``databricks``. Default: ``MLFLOW_TRACKING_URI`` from the environment, else
    ``sqlite:///<output directory>/mlflow.db`` beside the runs (MLflow's own default,
    ``sqlite:///mlflow.db`` in the working directory, for a model trained without a run
    directory). A URL with a password is refused: set ``MLFLOW_TRACKING_USERNAME`` and
    ``MLFLOW_TRACKING_PASSWORD`` (or ``MLFLOW_TRACKING_TOKEN``) instead."""
    experiment_name: str | None = None
    """The MLflow experiment the runs go to (made when missing). Default:
    ``MLFLOW_EXPERIMENT_NAME``, else the run's ``--experiment-name`` (the ``<name>`` of its
    directory ``<name>_run_<n>``; ``hyperopt`` for a search), else ``plait``."""
    log_artifacts: bool = True
    """Upload the config, the statistics files and the model folder when the run ends."""

    @field_validator("tracking_uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        return _no_password(value, "MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN)")


class WandbTracking(TypedModel):
    """Weights & Biases: one run per training run; a search's trials grouped under its name."""

    type: Literal["wandb"]
    project: str | None = None
    """The W&B project. Default: ``WANDB_PROJECT``, else the run's ``--experiment-name`` (the
    ``<name>`` of its directory ``<name>_run_<n>``), else ``plait``."""
    entity: str | None = None
    """The W&B team or user (default: ``WANDB_ENTITY``, else your default entity)."""
    mode: Literal["online", "offline"] | None = None
    """``offline`` writes the run in ``WANDB_DIR`` (default: ``<output directory>/wandb``) for
    ``wandb sync`` later; ``online`` sends it as it goes. Default: ``WANDB_MODE``, else online. The API
    key is ``WANDB_API_KEY`` (or ``wandb login``)."""
    group: str | None = None
    """Runs that belong together. Default: none for a training run; a search's name
    (``<experiment>_run_<n>``) for its trials."""


class AimTracking(TypedModel):
    """Aim: one run per training run; a search's trials in the search's experiment, each naming
    the search's run in its ``parent_run`` param."""

    type: Literal["aim"]
    repo: str | None = None
    """The Aim repository: a local folder (made when missing; Aim keeps it in ``.aim`` there) or
    ``aim://host:port``. Default: the output directory (the runs' parent folder), else the
    working directory."""
    experiment: str | None = None
    """The Aim experiment. Default: the run's ``--experiment-name`` (the ``<name>`` of its
    directory ``<name>_run_<n>``), else ``plait``."""

    @field_validator("repo")
    @classmethod
    def _repo(cls, value: str | None) -> str | None:
        return _no_password(value, "the Aim server's own access settings")


class CometTracking(TypedModel):
    """Comet: one experiment per training run, online with ``COMET_API_KEY``, else offline."""

    type: Literal["comet"]
    project_name: str | None = None
    """The Comet project. Default: ``COMET_PROJECT_NAME``, else the run's ``--experiment-name``
    (the ``<name>`` of its directory ``<name>_run_<n>``), else ``plait``."""
    workspace: str | None = None
    """The Comet workspace (default: ``COMET_WORKSPACE``, else your default workspace)."""
    offline_directory: str | None = None
    """Write an offline archive (a .zip to ``comet upload`` later) to this folder instead of
    sending the experiment. Default: online when ``COMET_API_KEY`` is set and ``COMET_MODE`` is
    not ``offline``; otherwise offline, into ``<output directory>/comet`` (the working
    directory's ``comet`` without a run directory)."""


TrackerConfig = Annotated[Union[MLflowTracking, WandbTracking, AimTracking, CometTracking], Field(discriminator="type")]
"""One tracker of the ``tracking`` list, chosen by its ``type``."""

TRACKER_TYPES = ("mlflow", "wandb", "aim", "comet")


def check_tracking(trackers: list) -> list:
    """One item per tool: a run keeps one run id per tool (for ``--resume``)."""
    types = [tracker.type for tracker in trackers]
    repeated = sorted({kind for kind in types if types.count(kind) > 1})
    if repeated:
        raise ValueError(f"{', '.join(repeated)} is listed more than once; give each tool once (a run logs to one "
                         f"store per tool)")
    return trackers


def with_trackers(source: dict, tools: list[str]) -> dict:
    """The raw config ``source`` with ``{type: <tool>}`` added to its tracking list for each of
    ``tools`` (the command line's flags) it does not name already: the config's settings win.
    Not validated here: ``load_config`` validates the result."""
    listed = source.get("tracking")
    if not tools or (listed is not None and not isinstance(listed, list)):
        return source  # nothing to add, or a section that is not a list: validation says so
    named = {item.get("type") for item in listed or [] if isinstance(item, dict)}
    added = [{"type": tool} for tool in dict.fromkeys(tools) if tool not in named]
    return {**source, "tracking": [*(listed or []), *added]}
