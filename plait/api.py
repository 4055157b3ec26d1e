"""The Python API: ``Model(config).train(dataset=...)``, ``.evaluate``, ``.predict``, ``Model.load``.

The CLI is a thin layer over these same objects.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from plait import inference, tracking
from plait.callbacks import Dispatcher, check_callbacks
from plait.config import PlaitConfig, load_config, with_backend_type
from plait.config.base import shown
from plait.config.render import resolved_dict
from plait.data.preprocess import PreprocessedData, preprocess
from plait.errors import ModelError, UsageError
from plait.evaluation.statistics import EVERY_EPOCH, evaluation_frequency, training_statistics
from plait.export.mlflow import export_mlflow
from plait.inference import CachedSplit, PredictorSpec, WrittenPredictions
from plait.models import build_model
from plait.models.saved import WEIGHTS, load_weights_into, read_model, save_model, weight_differences
from plait.run_directory import RunDirectory
from plait.training.run import FitJob, checkpoint_to_resume
from plait.utils.folder import Folder

if TYPE_CHECKING:
    import pandas

log = logging.getLogger("plait")


@dataclass
class TrainResult:
    training_statistics: list
    """One record per evaluation: ``{"epoch", "step", "training": {...}, "validation": {...}, ...}``."""
    preprocessed: PreprocessedData
    run_dir: RunDirectory | None
    restarts: list = field(default_factory=list)
    """The worker group's restarts after failures (Ray): ``[{"resumed_from_step": n or None}]``."""
    evaluation_frequency: dict = field(default_factory=lambda: dict(EVERY_EPOCH))

    def ludwig_statistics(self) -> dict:
        """The statistics in Ludwig's layout, as ``training_statistics.json`` holds them
        (``plait.evaluation.statistics``)."""
        return training_statistics(self.training_statistics, self.evaluation_frequency, self.restarts)


AS_SAVED = "as_saved"
"""``Model.load``'s default quantization: the saved config's."""


class Model:
    """A plait model: config, preprocessing metadata and (once trained) weights."""

    def __init__(self, config: str | os.PathLike | dict | PlaitConfig, backend: str | None = None,
                 callbacks: list | None = None):
        """``callbacks``: objects with Ludwig's hooks (``plait.callbacks.Callback``), called on the
        coordinator on every backend. The trackers of the config's ``tracking`` list are added to
        them (``plait.tracking``), but for a tool ``callbacks`` already holds a tracker of."""
        self.config = load_config(config)
        if backend is not None:
            self.config = with_backend_type(self.config, backend)
        self.callbacks = check_callbacks(callbacks)
        self.callbacks += tracking.trackers(self.config, given=self.callbacks)  # the config's tracking list
        self._events = Dispatcher(self.callbacks)
        self._backend = None
        self.metadata: dict | None = None
        self.module = None
        self.path: Path | None = None
        """The saved-model directory the weights came from (a predictor spec points there)."""
        self._cached_generator = None
        """An LLM's Generator over ``module`` (built on the first generate)."""
        self.trains_on = False
        """Whether ``train`` starts from ``module``'s weights and preprocesses with ``metadata``
        (a loaded model, as in Ludwig: ``--model_load_path``), instead of from scratch."""

    # ---- training --------------------------------------------------------------------------

    def preprocess(self, dataset: Any = None, *, training_set=None, validation_set=None, test_set=None,
                   random_seed: int = 42) -> PreprocessedData:
        """The data preprocessed into the cache (or found there): with this model's own feature
        metadata where it trains on (``trains_on``), else with metadata fitted on the data."""
        features = self.metadata["features"] if self.trains_on else None
        return self.backend.preprocess(lambda: preprocess(
            self.config, dataset, training_set=training_set, validation_set=validation_set, test_set=test_set,
            seed=random_seed, engine=self.backend.data_engine, features=features))

    @property
    def backend(self):
        """The backend this model runs on, chosen (and started) on first use."""
        if self._backend is None:
            from plait.backends import get_backend

            self._backend = get_backend(self.config)
            if self._backend.name not in ("local", "ray"):  # Ray predicts and evaluates as Ray Data jobs
                log.info("Preprocessing and training run on %s; prediction runs in this process.", self._backend.name)
        return self._backend

    def _emit(self, hook: str, **arguments) -> None:
        """A run's event for the callbacks, on the coordinator (a launcher's other ranks skip it)."""
        if self._events and self.backend.is_coordinator:
            self._events(hook, **arguments)

    def close(self) -> None:
        """Release what the backend started (a local Ray instance, for example); the callbacks'
        ``on_ludwig_end``, once."""
        if self._events and (self._backend is None or self._backend.is_coordinator):
            events, self._events = self._events, Dispatcher()
            events("on_ludwig_end")
        if self._backend is not None:
            self._backend.shutdown()
            self._backend = None

    def train(self, dataset: Any = None, *, training_set=None, validation_set=None, test_set=None,
              random_seed: int = 42, run_dir: str | os.PathLike | None = None, resume: bool = False,
              progress_bar: bool = True, resume_from=None, on_evaluation=None) -> TrainResult:
        """Preprocess (or hit the cache) and train. With ``run_dir`` (a path or an fsspec URL),
        checkpoints and TensorBoard logs go there and ``resume=True`` continues from its last
        checkpoint. ``resume_from``: a checkpoint folder to continue from instead;
        ``on_evaluation``: see :class:`~plait.training.run.FitJob`."""
        run = run_dir
        if run_dir is not None and not isinstance(run_dir, RunDirectory):  # a path or an fsspec URL
            run = RunDirectory(_location(run_dir, "run_dir"), self.config.backend.artifacts_credentials)
        # The resolved config is built only for callbacks (seconds for a config of thousands of features).
        config, where = resolved_dict(self.config) if self._events else None, run.root.url if run is not None else None
        self._emit("on_train_init", config=config, run_directory=where, resume=resume)
        self._emit("on_preprocess_start", config=config)
        data = self.preprocess(dataset, training_set=training_set, validation_set=validation_set,
                               test_set=test_set, random_seed=random_seed)
        self._emit("on_preprocess_end", rows={split: data.rows(split) for split in ("training", "validation", "test")})
        initial_weights = self.module.state_dict() if self.trains_on else None
        self.metadata = {"features": data.metadata["features"], "splits": data.metadata["splits"], "seed": random_seed}
        job = FitJob(self.config, self.metadata, data, random_seed, run, resume, progress_bar, resume_from, on_evaluation,
                     events=self._events or None, initial_weights=initial_weights)
        checkpoint_to_resume(job)  # nothing to resume fails here, before a backend starts workers
        if getattr(self.config.trainer, "type", None) == "none":  # an LLM used as it is: zero-shot
            self.module, self.path = build_model(self.config, self.metadata, load_pretrained=True), None
            return TrainResult([], data, run, evaluation_frequency=evaluation_frequency(self.config.trainer))
        self._emit("on_train_start", config=config, run_directory=where)
        result = self._fit(job, data, run)
        if self._events:
            self._emit("on_train_end", run_directory=where, training_statistics=result.ludwig_statistics())
        return result

    def _fit(self, job: FitJob, data: PreprocessedData, run: RunDirectory | None) -> TrainResult:
        output = self.backend.fit(job)
        self.module, self.path = output.module, None
        if getattr(self.config, "adapter", None) and self.config.adapter.postprocessor.merge_adapter_into_base_model:
            from plait.models.llm import ADAPTER_MERGED

            self.module.merge_adapter()
            self.metadata[ADAPTER_MERGED] = True
        return TrainResult(output.history, data, run, output.restarts, evaluation_frequency(self.config.trainer))

    # ---- evaluation and prediction -------------------------------------------------------------

    def evaluate_preprocessed(self, data: PreprocessedData, split: str = "test") -> dict:
        """Metrics on a split of preprocessed data (as the experiment does for the test set),
        computed where the backend maps batches."""
        self.require_trained()
        self._emit("on_evaluation_start", split=split)
        statistics = inference.evaluate(self.backend, self.predictor_spec(), CachedSplit(data, split))
        self._emit("on_evaluation_end", split=split, statistics=statistics)
        return statistics

    def evaluate(self, dataset: Any, split: str = "full", random_seed: int | None = None) -> dict:
        """Metrics on raw data holding the output columns; rows missing a target are skipped.
        The backend computes them: here chunk by chunk, or as a Ray Data job on Ray.

        ``split`` (training, validation or test) evaluates only the rows that the config's split
        puts there with ``random_seed`` (default: the seed the model was trained with), so
        ``split="test"`` on the training data gives the experiment's test metrics again. A split
        is drawn by global row number, so it is evaluated in this process on every backend."""
        self.require_trained()
        backend, source, cached = self.rows_of_split(dataset, split, random_seed)
        return inference.evaluate(backend, self.predictor_spec(), source, cached=cached)

    def rows_of_split(self, dataset: Any, split: str = "full", random_seed: int | None = None) -> tuple:
        """``(backend, source, cached)``: where the rows of ``dataset`` that the model's split put
        in ``split`` (with ``random_seed``, default the model's) are mapped, what is mapped, and
        whether it is preprocessed rows. ``full``: every row, on this model's backend; a split is
        drawn by global row number, so its rows are transformed here and mapped in this process."""
        if split == "full":
            return self.backend, dataset, isinstance(dataset, CachedSplit)
        from plait.backends.local import LocalBackend
        from plait.data.preprocess import transform_split

        seed = random_seed if random_seed is not None else self.metadata.get("seed", 42)
        table = transform_split(self.config, self.metadata["features"], dataset, seed, split)
        return LocalBackend(self.config), table, True

    def predict(self, dataset: Any, generation_config: dict | None = None) -> "pandas.DataFrame":
        """Predictions for every row of raw data, in its order (output columns are not needed),
        as a DataFrame. The backend computes them: here chunk by chunk, or as a Ray Data job on
        Ray; for data larger than memory write them to files instead (``write_predictions``).
        ``generation_config`` (an LLM): generation settings over the config's ``generation``."""
        self.require_trained()
        return inference.predict(self.backend, self._generating_spec(generation_config), dataset)

    def write_predictions(self, dataset: Any, output_directory: str | os.PathLike,
                          output_format: str = "parquet", generation_config: dict | None = None) -> WrittenPredictions:
        """Predictions for every row of ``dataset`` written to ``<output_directory>/predictions.<format>``:
        a file here, a folder of part files (in input order) from a Ray Data job. ``generation_config``:
        as for ``predict``."""
        self.require_trained()
        if output_format not in ("parquet", "csv"):
            raise UsageError(f"output_format {output_format!r}: give parquet or csv")
        return inference.write_predictions(self.backend, self._generating_spec(generation_config), dataset,
                                           _location(output_directory, "output_directory"), output_format)

    def generate(self, texts: str | dict | list, generation_config: dict | None = None,
                 streaming: bool = False) -> str | list[str]:
        """An LLM's generated text for each prompt, in this process (Ludwig's ``generate``). A
        prompt is the input feature's text, or a dict of the columns the prompt template reads;
        one prompt gives one string, a list a list. ``generation_config``: settings over the
        config's ``generation`` (``{"max_new_tokens": 64, "do_sample": True}``). ``streaming``:
        also print each text as its tokens come."""
        generator = self._generator()
        single = isinstance(texts, (str, dict))
        prompts = [texts] if single else list(texts)
        if streaming:
            texts_out = [_printed(generator.stream(prompt, generation_config)) for prompt in prompts]
        else:
            batch = self.module.prediction_batch_rows
            texts_out = [generated.text for first in range(0, len(prompts), batch)
                         for generated in generator.generate(prompts[first:first + batch], generation_config)]
        return texts_out[0] if single else texts_out

    def generate_stream(self, text: str | dict, generation_config: dict | None = None) -> Iterator[str]:
        """An LLM's generated text for one prompt, in pieces yielded as the tokens are generated."""
        return self._generator().stream(text, generation_config)

    def _generator(self):
        from plait.inference.generate import Generator, generation_settings

        self.require_trained()
        generation_settings(self.config, None, "generate")  # an ECD model is refused by name
        if self._cached_generator is None or self._cached_generator.module is not self.module:
            self._cached_generator = Generator(self.config, self.metadata, self.module)
        return self._cached_generator

    def _generating_spec(self, generation_config: dict | None) -> PredictorSpec:
        """The predictor spec, with ``generation_config`` over an LLM's generation settings."""
        from plait.inference.generate import generation_settings

        spec = self.predictor_spec()
        if generation_config is None:
            return spec
        settings = generation_settings(self.config, generation_config)
        return dataclasses.replace(spec, config={**spec.config, "generation": settings.model_dump()})

    def forecast(self, dataset: Any, horizon: int) -> "pandas.DataFrame":
        """The next ``horizon`` steps of each row's series (a model with one timeseries input, the
        history, and one timeseries output, the next steps): ``<output>_forecast`` per row."""
        from plait.inference.forecast import forecast

        self.require_trained()
        return forecast(self, dataset, horizon)

    def predictor_spec(self) -> PredictorSpec:
        """This model as a picklable spec any process can rebuild a predictor from: the folder it
        was saved in (every node must see it), else its weights."""
        self.require_trained()
        if self.path is not None and self.path.is_dir():
            return PredictorSpec(resolved_dict(self.config), self.metadata, model_dir=str(self.path))
        return PredictorSpec(resolved_dict(self.config), self.metadata, weights=self.module.state_dict())

    def require_trained(self) -> None:
        if self.module is None:
            raise ModelError("this model is not trained yet: call train() or Model.load() first")

    # ---- saving ----------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> Path | str:
        """Save the model folder at ``path``: a local path, or an fsspec URL (credentials from the
        environment). Returns where it is (a Path when local)."""
        self.require_trained()
        saved = save_model(_location(path, "path"), resolved_dict(self.config), self.metadata, self.module.state_dict())
        self.path = saved.resolved().local() if saved.is_local else None
        return Path(saved.url) if saved.is_local else saved.url

    def explain(self, dataset: Any, output_feature_name: str | None = None, method: str = "ig",
                every_class: bool = False, steps: int = 50, random_seed: int | None = None, parts: bool = True):
        """Why the model predicts what it does on ``dataset`` (see plait.explain): ``ig``,
        integrated gradients per row and input feature for the predicted class (every class with
        ``every_class``; with ``parts``, also each token's attribution and each image's heat map),
        or ``permutation``, each input's importance on labelled rows. Returns an
        :class:`~plait.explain.Explanation` (``summary``, ``rows``, ``write(folder)``)."""
        from plait.explain import explain

        self.require_trained()
        seed = random_seed if random_seed is not None else self.metadata.get("seed", 42)
        return explain(self.backend, self.predictor_spec(), dataset, output_feature_name, method, every_class, steps,
                       seed, parts)

    def export_model(self, output_path: str | os.PathLike, format: str = "onnx") -> Path | str:
        """Write this model to the new folder ``output_path`` (a local path or an fsspec URL)
        for use outside plait: ``onnx`` (its preprocessing included; run with the folder's plait_onnx.py, numpy and
        onnxruntime), ``torch_export`` or ``safetensors``. See plait.export."""
        from plait.export import export_model

        return export_model(self, output_path, format)

    def save_dequantized_base_model(self, save_path: str | os.PathLike) -> None:
        """Write the config's quantized base model back in float16 as a Hugging Face model folder
        at ``save_path`` (a path or fsspec URL): a base that predicts without bitsandbytes and
        holds the rounding the quantized model computed with (Ludwig's method of this name)."""
        from plait.models.llm import save_dequantized_base

        if getattr(self.config, "model_type", None) != "llm":
            raise UsageError("save_dequantized_base_model: this is not an LLM (model_type: llm)")
        save_dequantized_base(self.config, _location(save_path, "save_path"))

    @classmethod
    def load(cls, path: str | os.PathLike, backend: str | None = None, quantization: Any = AS_SAVED) -> "Model":
        """A saved model, from a local path or an fsspec URL (``s3://...``), run on ``backend``
        (default: its config's backend section; a model trained under a launcher such as torchrun
        predicts in this process outside of it).

        ``quantization`` (an LLM saved as an adapter): how to load the base under the adapter,
        whatever it trained on: None in full precision, ``{"bits": 4}`` (a config's quantization
        section) quantized; by default as the saved config says."""
        folder = Folder(_location(path, "path"))
        config, metadata, weights = read_model(folder)
        if quantization is not AS_SAVED:
            config = _with_base_quantization(config, metadata, quantization, str(path))
        model = cls(config, backend=backend or _backend_outside_launcher(config))
        model.metadata = metadata
        model.module = build_model(model.config, metadata)
        load_weights_into(model.module, weights, f"the weights ({WEIGHTS}) of the model at {str(path)!r}")
        model.module.eval()
        # A local folder is named to prediction workers, which read it; a model on object storage
        # travels with its weights, so that workers need no credentials.
        model.path = folder.resolved().local() if folder.is_local else None
        model.trains_on = True
        return model

    def with_config(self, config: str | os.PathLike | dict | PlaitConfig) -> "Model":
        """This trained model under another config (its trainer, backend, tracking: what to train
        on with), keeping the weights and the feature metadata; refused, with the reason, where
        the config's features, their preprocessing or the model's shapes differ from this model's."""
        self.require_trained()
        # The user's callbacks come along; trackers are the new config's.
        other = Model(config, callbacks=[c for c in self.callbacks if not isinstance(c, tracking.Tracker)])
        check_same_features(self.config, other.config)
        module = build_model(other.config, self.metadata)
        weights = self.module.state_dict()
        check_same_shapes(weights, module.state_dict())
        load_weights_into(module, weights, "the loaded model's weights")
        other.metadata, other.module, other.trains_on = dict(self.metadata), module.eval(), True
        return other

    # ---- exporting -------------------------------------------------------------------------------

    def export_mlflow(self, output_path: str | os.PathLike = "mlflow", registered_model_name: str | None = None) -> str:
        """This model as an MLflow pyfunc model in the new or empty local folder ``output_path``
        (``plait.export.mlflow``); returns its absolute path. With ``registered_model_name``,
        also logged to MLflow's tracking URI and registered under that name.

        A model with no local folder (trained in memory, or loaded from object storage) is saved
        to a temporary folder first, which the export copies: this model and its ``path`` stay
        as they were, so nothing needs saving beforehand."""
        self.require_trained()
        if self.path is not None and self.path.is_dir():
            return export_mlflow(self.path, output_path, registered_model_name)
        with tempfile.TemporaryDirectory(prefix="plait-export-") as tmp:
            saved = save_model(os.path.join(tmp, "model"), resolved_dict(self.config), self.metadata,
                               self.module.state_dict())
            return export_mlflow(saved.url, output_path, registered_model_name)


def check_same_features(model_config, config) -> None:
    """The features of ``config`` are the model's: the same names, types, columns and
    preprocessing (the model's metadata transforms the data), in the same order."""
    from plait.data.preprocess import preprocessing_signature

    theirs, ours = preprocessing_signature(model_config)[0], preprocessing_signature(config)[0]
    if [f["name"] for f in theirs] != [f["name"] for f in ours]:
        raise UsageError(f"--model_load_path: the config's features ({', '.join(f['name'] for f in ours)}) are not the "
                         f"model's ({', '.join(f['name'] for f in theirs)}); give the model's features, or train a "
                         f"new model without --model_load_path")
    for mine, given in zip(theirs, ours):
        for key in ("type", "column", "preprocessing"):
            if mine.get(key) != given.get(key):
                raise UsageError(f"--model_load_path: feature {given['name']!r}: the config's {key} differs from the "
                                 f"model's ({shown(given.get(key))} against {shown(mine.get(key))}); the model's "
                                 f"vocabularies and normalization preprocess the new data, so its {key} must be the "
                                 f"model's")


def check_same_shapes(model_weights: dict, weights: dict) -> None:
    """The config builds a model with the loaded model's weights, shape for shape."""
    lacked, extra, resized = weight_differences(weights, model_weights)
    for name in sorted(lacked + extra):
        where = "the config's model lacks" if name in model_weights else "the loaded model lacks"
        raise UsageError(f"--model_load_path: {where} the weight {name!r}: the config's encoders, combiner or "
                         f"decoders differ from the model's; give the model's")
    for name in [n for n in weights if n in resized]:  # the first in the model's order
        raise UsageError(f"--model_load_path: weight {name!r} is {list(weights[name].shape)} in the config's model and "
                         f"{list(model_weights[name].shape)} in the loaded one: the config's layer sizes differ "
                         f"from the model's; give the model's")


def _printed(pieces: Iterator[str]) -> str:
    """The pieces joined, each printed as it comes (Ludwig's streaming generate)."""
    text = []
    for piece in pieces:
        print(piece, end="", flush=True)
        text.append(piece)
    print(flush=True)
    return "".join(text)


def _with_base_quantization(config: dict, metadata: dict, quantization: Any, shown: str) -> dict:
    """The saved ``config`` with its base loaded as ``quantization`` says (see ``Model.load``)."""
    from plait.models.llm import ADAPTER_MERGED

    if config.get("model_type") != "llm" or not config.get("adapter") or metadata.get(ADAPTER_MERGED):
        raise UsageError(f"quantization: the model at {shown!r} saved all its weights, so its base cannot be loaded "
                         f"another way; only an LLM saved as an adapter can (load it without quantization=)")
    return {**config, "quantization": quantization}


def _location(value: Any, argument: str) -> str | os.PathLike:
    if not isinstance(value, (str, os.PathLike)):
        raise UsageError(f"{argument} {value!r}: give a folder's path or an fsspec URL (such as s3://bucket/folder)")
    return value


def _backend_outside_launcher(config: dict) -> str | None:
    """``local`` for a model whose config names a launcher (torchrun, horovod, deepspeed) when
    this process was not started by one: prediction is not a launched job. None otherwise."""
    from plait.backends import LAUNCHED
    from plait.backends.environment import detect_launch

    kind = config.get("backend", {}).get("type")
    return "local" if kind in LAUNCHED and detect_launch() is None else None
