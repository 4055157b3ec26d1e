"""check_install: what of plait's extras this environment has, whether its engines import, whether
a Ray cluster is reachable, which GPUs torch sees, and (Ludwig's check) whether a small model
trains and predicts here."""

from __future__ import annotations

import importlib
import importlib.metadata as metadata
import importlib.util
import tempfile
import time
from dataclasses import dataclass

def _plait_import(module: str, function: str):
    """An engine imported the way plait imports it (transformers and peft need plait's order)."""
    return lambda: getattr(importlib.import_module(module), function)()


ENGINES = {"ray": "ray", "dask": "dask", "modin": "modin",
           "transformers": _plait_import("plait.models.hf_encoders", "import_transformers"),
           "peft": _plait_import("plait.models.hf_encoders", "import_peft"),
           "bitsandbytes": _plait_import("plait.models.llm", "import_bitsandbytes"),
           "deepspeed": "deepspeed", "horovod.torch": "horovod.torch", "onnxruntime": "onnxruntime",
           "fastapi": "fastapi", "mlflow": "mlflow"}
"""The engines whose import is tried (a binary one may be installed and still fail to load):
a module name, or how plait imports it."""


@dataclass(frozen=True)
class Check:
    what: str
    ok: bool | None
    """True: works; False: broken; None: not installed (an extra not asked for is no failure)."""
    detail: str


@dataclass(frozen=True)
class Report:
    extras: list[tuple[str, str, str, str]]
    """(extra, package, required, installed version or "missing")."""
    checks: list[Check]

    @property
    def ok(self) -> bool:
        return all(check.ok is not False for check in self.checks)

    def text(self) -> str:
        width = max(len(package) for _, package, _, _ in self.extras) if self.extras else 7
        lines = [f"{'extra':<12} {'package':<{width}} {'required':<14} installed"]
        lines += [f"{extra:<12} {package:<{width}} {required:<14} {installed}"
                  for extra, package, required, installed in self.extras]
        lines.append("")
        marks = {True: "ok", False: "FAILED", None: "-"}
        lines += [f"{check.what:<24} {marks[check.ok]:<7} {check.detail}" for check in self.checks]
        lines += ["", "CHECK INSTALL COMPLETE... " + ("SUCCESS" if self.ok else "FAILURE")]
        return "\n".join(lines)


def check_install(train: bool = True) -> Report:
    """The report; ``train``: also train a small model on synthetic rows (Ludwig's check)."""
    checks = [_engine(name, importer) for name, importer in ENGINES.items()]
    checks += [_ray_cluster(), _gpus()]
    if train:
        checks.append(_training())
    return Report(_extras(), checks)


def _extras() -> list[tuple[str, str, str, str]]:
    from packaging.requirements import Requirement

    rows = []
    for text in metadata.requires("plait") or []:
        requirement = Requirement(text)
        extra = _extra_of(requirement)
        if extra is None or requirement.name == "plait":
            continue
        rows.append((extra, requirement.name, str(requirement.specifier) or "any", _version(requirement.name)))
    return sorted(set(rows))


def _extra_of(requirement) -> str | None:
    marker = str(requirement.marker or "")
    return marker.split("extra ==", 1)[1].strip().strip("\"'") if "extra ==" in marker else None


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "missing"


def _engine(name: str, importer) -> Check:
    if importlib.util.find_spec(name.split(".")[0]) is None:
        return Check(f"import {name}", None, "not installed (its extra, above, installs it)")
    try:
        module = importer() if callable(importer) else importlib.import_module(importer)
    except Exception as error:  # a broken binary, a missing system library: said, not raised
        return Check(f"import {name}", False, f"{type(error).__name__}: {str(error)[:200]}")
    return Check(f"import {name}", True, str(getattr(module, "__version__", None) or _version(name.split(".")[0])))


def _ray_cluster() -> Check:
    from plait.backends.environment import ray_address

    address = ray_address()
    if address is None:
        return Check("Ray cluster", None, "none running (a run with backend ray starts a local one)")
    from plait.backends.ray.cluster import check_reachable
    from plait.errors import PlaitError

    try:
        check_reachable(address)
    except PlaitError as error:
        return Check("Ray cluster", False, str(error))
    return Check("Ray cluster", True, f"reachable at {address}")


def _gpus() -> Check:
    import torch

    count = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if not count:
        return Check("GPUs", None, f"none visible to torch {torch.__version__}")
    names = ", ".join(torch.cuda.get_device_name(i) for i in range(count))
    return Check("GPUs", True, f"{count}: {names} (CUDA {torch.version.cuda})")


def _training() -> Check:
    """Ludwig's check: a model of a text, a category and a number input and a binary output
    trains two epochs on 100 synthetic rows and predicts, in a temporary folder."""
    from plait.api import Model
    from plait.synthesize import synthesize_dataset

    started = time.perf_counter()
    try:
        with tempfile.TemporaryDirectory() as folder:
            config = {"input_features": [{"name": "in1", "type": "text"}, {"name": "in2", "type": "category"},
                                         {"name": "in3", "type": "number"}],
                      "output_features": [{"name": "out1", "type": "binary"}],
                      "trainer": {"epochs": 2, "batch_size": 8},
                      "backend": {"type": "local", "cache_dir": f"{folder}/cache"}}
            data = synthesize_dataset(config, 100, seed=0)
            model = Model(config)
            model.train(data, run_dir=f"{folder}/run", progress_bar=False)
            rows = len(model.predict(data))
    except Exception as error:  # the point of the check: say what failed
        return Check("train and predict", False, f"{type(error).__name__}: {str(error)[:300]}")
    return Check("train and predict", True, f"2 epochs on 100 synthetic rows, {rows} predictions, "
                                            f"{time.perf_counter() - started:.1f} s")
