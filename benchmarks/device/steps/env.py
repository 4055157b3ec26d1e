"""What the machine holds: versions (and where each package was loaded from: the device's image
or the carry), the GPU, whether pyproject.toml's ranges admit what is installed, and whether the
torch, transformers and peft APIs plait calls exist in these versions."""

from __future__ import annotations

import importlib
import inspect
import subprocess
import sys
from importlib import metadata
from pathlib import Path

from record import Recorder, StepContext

ROOT = Path(__file__).resolve().parents[3]
DISTRIBUTIONS = ("torch", "transformers", "peft", "accelerate", "tokenizers", "safetensors", "huggingface-hub",
                 "numpy", "pandas", "pyarrow", "fsspec", "pyyaml", "tqdm", "tensorboard", "pydantic", "pydantic-core",
                 "ray", "dask", "deepspeed", "bitsandbytes", "fastapi", "starlette", "uvicorn", "grpcio", "protobuf",
                 "typing-extensions", "triton", "pytest", "pytest-timeout")
IMPORTS = ("plait", "plait.cli", "ray", "ray.train.torch", "ray.data", "ray.serve", "dask.dataframe", "deepspeed",
           "bitsandbytes", "fastapi", "uvicorn", "transformers", "peft")
EXTRAS = ("ray", "serve", "hf", "deepspeed")
"""pyproject's optional dependencies the check uses."""
API = ("torch.distributed.fsdp.fully_shard", "torch.distributed.fsdp.CPUOffloadPolicy",
       "torch.distributed.fsdp.OffloadPolicy", "torch.distributed.device_mesh.init_device_mesh",
       "torch.distributed.tensor.DTensor", "torch.distributed.checkpoint.state_dict.StateDictOptions",
       "torch.distributed.checkpoint.state_dict.get_state_dict", "torch.distributed.checkpoint.state_dict.set_state_dict",
       "torch.library.Library", "torch.amp.GradScaler", "torch.utils.tensorboard.SummaryWriter",
       "transformers.AutoConfig.for_model", "transformers.AutoModelForCausalLM.from_pretrained",
       "transformers.AutoModelForCausalLM.from_config", "transformers.AutoModel._model_mapping",
       "transformers.logging.disable_progress_bar", "transformers.BitsAndBytesConfig",
       "peft.get_peft_model", "peft.prepare_model_for_kbit_training")
"""Dotted names plait (and the check's QLoRA loop) calls: grep plait/ for ``torch.``,
``transformers.`` and ``peft.`` when adding one."""
KEYWORDS = {"peft.LoraConfig": ("r", "lora_alpha", "lora_dropout", "bias", "target_modules", "use_rslora", "use_dora",
                                "task_type"),
            "peft.IA3Config": ("target_modules", "feedforward_modules", "fan_in_fan_out", "init_ia3_weights"),
            "peft.LoHaConfig": ("r", "alpha", "target_modules"), "peft.LoKrConfig": ("r", "alpha", "target_modules"),
            "peft.VeraConfig": ("r", "target_modules", "save_projection", "projection_prng_key")}
"""The keyword arguments plait.config.llm passes to each peft config."""


def run(recorder: Recorder, context: StepContext) -> None:
    versions = recorder.part("versions", installed)
    gpu = recorder.part("gpu", describe_gpu)
    ranges = recorder.part("ranges", check_ranges)
    recorder.part("api", check_api)
    parts = []
    if versions:
        parts.append(f"torch {versions['versions'].get('torch')}, transformers {versions['versions'].get('transformers')}")
    if versions and versions["failed_imports"]:
        parts.append(f"failing imports: {', '.join(versions['failed_imports'])}")
    if gpu:
        parts.append(gpu.get("name") or "no CUDA")
    if ranges:
        parts.append("ranges admit all" if not ranges["outside"] else f"outside ranges: {', '.join(ranges['outside'])}")
    recorder.summary("; ".join(parts))


def prepared_imports() -> None:
    """transformers (and peft, which imports it) the way plait imports it: torchvision first,
    whose operators a CPU build of torch may otherwise fail to declare (see import_transformers)."""
    try:
        from plait.models.hf_encoders import import_transformers

        import_transformers()
    except Exception:  # noqa: BLE001 (the imports below then report what fails)
        pass


def installed() -> dict:
    prepared_imports()
    versions, where, imports = {}, {}, {}
    for name in DISTRIBUTIONS:
        try:
            dist = metadata.distribution(name)
            versions[name], where[name] = dist.version, str(dist.locate_file(""))
        except metadata.PackageNotFoundError:
            versions[name] = None
    for module in IMPORTS:
        try:
            importlib.import_module(module)
            imports[module] = "ok"
        except Exception as error:  # noqa: BLE001 (each import's failure is a finding)
            imports[module] = f"{type(error).__name__}: {error}"[:300]
    return {"python": sys.version.split()[0], "executable": sys.executable, "versions": versions, "loaded_from": where,
            "imports": imports, "failed_imports": [m for m, v in imports.items() if v != "ok"]}


def describe_gpu() -> dict:
    import torch

    found: dict = {"torch_cuda": torch.version.cuda, "available": torch.cuda.is_available()}
    if not found["available"]:
        return found
    properties = torch.cuda.get_device_properties(0)
    found.update(name=properties.name, count=torch.cuda.device_count(), capability=list(torch.cuda.get_device_capability(0)),
                 memory_gib=round(properties.total_memory / 2**30, 1), multiprocessors=properties.multi_processor_count,
                 bf16=torch.cuda.is_bf16_supported(), nccl=".".join(map(str, torch.cuda.nccl.version())))
    smi = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total,clocks.max.sm",
                          "--format=csv,noheader"], capture_output=True, text=True)
    found["nvidia_smi"] = smi.stdout.strip() or smi.stderr.strip()
    return found


def requirements() -> list[str]:
    """pyproject's dependencies and those of ``EXTRAS``."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    found = list(project["dependencies"])
    for extra in EXTRAS:
        found += [r for r in project["optional-dependencies"][extra] if not r.startswith("plait")]
    return found


def check_ranges() -> dict:
    """Each requirement against the version installed here (the device: its image or the carry)."""
    from packaging.requirements import Requirement

    from carry import NOT_CARRIED

    checked, outside, left_out = {}, [], []
    for text in requirements():
        requirement = Requirement(text)
        if requirement.marker is not None and not requirement.marker.evaluate():
            continue
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            version = None
        ok = version is not None and requirement.specifier.contains(version, prereleases=True)
        checked[text] = {"installed": version, "admitted": ok}
        if version is None and requirement.name in NOT_CARRIED:
            left_out.append(requirement.name)  # the carry's choice, with its reason in carry.py
        elif not ok:
            outside.append(f"{requirement.name} {version or 'missing'} ({requirement.specifier})")
    return {"requirements": checked, "outside": outside, "not_carried": left_out}


def resolve(dotted: str):
    """The object a dotted name names, importing its modules on the way."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attribute in parts[cut:]:
            found = getattr(found, attribute)
        return found
    raise ImportError(f"no module of {dotted}")


def check_api() -> dict:
    prepared_imports()
    missing = {}
    for name in API:
        try:
            resolve(name)
        except Exception as error:  # noqa: BLE001
            missing[name] = f"{type(error).__name__}: {error}"[:200]
    for name, keywords in KEYWORDS.items():
        try:
            accepted = inspect.signature(resolve(name)).parameters
            lacking = [k for k in keywords if k not in accepted]
            if lacking:
                missing[name] = f"no keyword {', '.join(lacking)}"
        except Exception as error:  # noqa: BLE001
            missing[name] = f"{type(error).__name__}: {error}"[:200]
    if missing:
        raise RuntimeError(f"APIs plait calls are missing here: {missing}")
    return {"checked": len(API) + len(KEYWORDS)}
