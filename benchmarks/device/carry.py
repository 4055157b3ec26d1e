"""The carry: the Python packages plait needs on the device machine and its image lacks, built
here as one archive that travels with the working tree.

    .venv/bin/python benchmarks/device/carry.py            # download, install, strip, pack; prints sizes
    .venv/bin/python benchmarks/device/carry.py --plan     # what it would carry and strip, nothing downloaded

The device (benchmarks/device/README.md) runs Python 3.12 with torch, transformers, peft, pandas,
pyarrow and more (``DEVICE_PACKAGES``, read off the device tool's KINDS.md), and has no network.
A call there carries at most 64 MiB: the git tree plus the carried paths. Wheels are zip files
compressed one file at a time; Ray's alone is 79 MB. So the carry is not a folder of wheels but
one ``.carry/site.tar.xz``: the packages installed here with ``pip install --target`` for cp312
manylinux x86-64 (the device's interpreter and processor, not this machine's), then stripped of
what plait never runs, then compressed as a whole. There it unpacks into ``/tmp/site``, which
goes on ``PYTHONPATH`` before the device's own packages.

What is stripped, and why, is ``STRIP`` (files removed) and ``STRIP_SYMBOLS`` (ELF files whose
symbol tables are removed: Ray's binaries carry 30% of debug symbols; only crash backtraces
lose names). Versions are those of ``constraints.txt`` (what CI tests), except ``OVERRIDES``.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CARRY_DIR = ROOT / ".carry"
ARCHIVE = CARRY_DIR / "site.tar.xz"
LIMIT_BYTES = 64 << 20
"""What one call of the device tool carries: the working tree and the carried paths together."""
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64", "manylinux_2_17_x86_64",
             "manylinux2014_x86_64", "manylinux1_x86_64")
PYTHON_VERSION = "3.12"


@dataclass(frozen=True)
class Package:
    name: str
    why: str
    sdist_build: bool = False
    """No usable wheel on PyPI: built here from the sdist (pure Python) with ``BUILD_ENV``."""
    shadows: bool = False
    """The device has its own, of a version plait cannot rely on: this one comes first on
    ``PYTHONPATH`` and is used instead."""


PACKAGES = (
    # plait's config layer
    Package("pydantic", "plait's config models"),
    Package("pydantic-core", "pydantic's compiled core"),
    Package("annotated-types", "pydantic"),
    Package("typing-inspection", "pydantic"),
    Package("typing-extensions", "pydantic-core needs >= 4.14.1; the device's version is not known", shadows=True),
    # The Ray backend
    Package("ray", "the ray backend: Ray Train, Ray Data, Ray Serve (stripped: see STRIP)"),
    Package("jsonschema", "ray"),
    Package("jsonschema-specifications", "jsonschema"),
    Package("referencing", "jsonschema"),
    Package("rpds-py", "jsonschema, referencing"),
    Package("dask", "the ray backend's default dataframe engine (Dask-on-Ray)"),
    Package("partd", "dask"),
    Package("locket", "partd"),
    # plait serve, alone and as Ray Serve's app
    Package("fastapi", "plait serve's app; ray[serve]"),
    Package("starlette", "fastapi"),
    Package("opentelemetry-api", "fastapi"),
    Package("uvicorn", "plait serve's server; Ray Serve's proxy"),
    Package("grpcio-reflection", "ray.serve imports it at start"),
    Package("grpcio", "grpcio-reflection needs >= 1.85.1; the device's version is not known", shadows=True),
    Package("protobuf", "grpcio-reflection needs >= 7.35.1; the device's version is not known", shadows=True),
    Package("python-multipart", "plait serve: form uploads"),
    Package("orjson", "plait serve: JSON answers"),
    # The deepspeed strategy and QLoRA
    Package("deepspeed", "the deepspeed strategy (no compiled ops)", sdist_build=True),
    Package("hjson", "deepspeed"),
    Package("bitsandbytes", "QLoRA's 4-bit NF4 weights (stripped to its CPU and CUDA 13.0 libraries)"),
    # plait's tested pandas: the device's numpy 2.5 image likely holds pandas 3, which plait's
    # range (< 2.4) excludes; this one shadows it on PYTHONPATH.
    Package("pandas", "plait's pinned range (< 2.4); the device's own is likely 3.x", shadows=True),
    Package("pytz", "pandas 2.3"),
    Package("tzdata", "pandas 2.3"),
)

NOT_CARRIED = {
    "horovod": "the horovod strategy: no wheel exists (scripts/build_horovod.sh builds one per machine); not checked there",
    "modin": "backend.processor.type modin: not part of the device check",
    "soundfile": "audio features: not part of the device check",
    "mlflow-skinny": "experiment tracking (--mlflow): not part of the device check; its tests run on CPU",
    "wandb": "experiment tracking (--wandb): not part of the device check; its tests run on CPU",
    "aim": "experiment tracking (--aim): not part of the device check; its tests run on CPU",
    "comet-ml": "experiment tracking (--comet): not part of the device check; its tests run on CPU",
    "lightgbm": "model_type: gbm: LightGBM grows its trees on the CPU's threads, not part of the device check; "
                "its tests run on CPU",
    "lm-format-enforcer": "structured generation (decoder text_parser): pure Python per-step masks, not part of the "
                          "device check; its tests run on CPU",
}
"""Packages plait imports (lazily, for optional features) that the carry leaves out, and why."""

OVERRIDES = {"bitsandbytes": "0.50.2"}
"""Versions not pinned by constraints.txt (plait does not install bitsandbytes itself)."""
BUILD_ENV = {"DS_BUILD_OPS": "0"}
"""DeepSpeed built without its C++ ops: plait uses none, and JIT builds happen only on use."""

STRIP = {
    "ray/jars": "Ray's Java workers (32 MB compressed): plait runs Python workers only",
    "ray/dashboard/client/build": "the dashboard's web UI: plait starts Ray without the dashboard",
    "ray/rllib": "reinforcement learning: plait never imports it",
    "bitsandbytes/libbitsandbytes_cuda1[0-2]*": "CUDA 11/12 builds: the device runs CUDA 13.0 (torch cu130)",
    "bitsandbytes/libbitsandbytes_cuda132*": "CUDA 13.2 build: the device's torch is cu130",
    "bitsandbytes/libbitsandbytes_rocm*": "AMD builds",
    "bitsandbytes/libbitsandbytes_xpu*": "Intel GPU builds",
    "*/__pycache__": "bytecode is written there on first import",
}
"""Paths (globs, relative to the installed tree) removed, with the reason for each."""
STRIP_SYMBOLS = ("ray",)
"""Folders whose ELF files lose their symbol tables (``strip --strip-unneeded``): the dynamic
symbols that loading needs stay."""

DEVICE_PACKAGES = frozenset("""
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build certifi
charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings cuda-core
cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils execnet filelock
flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet httpcore httpx
huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax jax-cuda13-pjrt
jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning lightning-utilities
linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes
mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind narwhals networkx ninja numba
numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime
nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse
nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx
onnx-ir onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker prometheus-client
propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing pyproject-hooks pyre-extensions
pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout pytest-xdist python-dateutil
pytorch-lightning pyyaml regex requests rich sacrebleu safetensors scikit-build-core scikit-image
scikit-learn scipy seaborn sentencepiece sentence-transformers setuptools shellingham simplejson six
sortedcontainers statsmodels sympy tabulate tensorboard tensorboard-data-server tensorstore threadpoolctl
tifffile tiktoken timm tokenizers toolz torch torchaudio torchdiffeq torch-geometric torchmetrics
torchvision tqdm transformers treescope triton typer typing-extensions typing-inspect urllib3 uvloop
wadler-lindig werkzeug wheel wrapt xarray xxhash yarl zipp
""".split())
"""The device image's packages (KINDS.md of the device tool, read 2026-11-17): the carry brings
the rest. Note annotated-doc is there already but tiny; typing-extensions and pandas are carried
for their versions."""


def normalized(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def pinned_versions(constraints: Path = ROOT / "constraints.txt") -> dict[str, str]:
    """``name -> version`` of every ``name==version`` line of constraints.txt."""
    pins = {}
    for line in constraints.read_text().splitlines():
        match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)==([^\s;#]+).*", line)
        if match:
            pins[normalized(match[1])] = match[2]
    return pins


def plan() -> list[tuple[Package, str]]:
    """Each package with the version it is carried at. A package neither pinned nor overridden is
    a mistake in this file: it fails here, not halfway through a download."""
    pins = {**pinned_versions(), **{normalized(k): v for k, v in OVERRIDES.items()}}
    missing = [p.name for p in PACKAGES if normalized(p.name) not in pins]
    if missing:
        raise SystemExit(f"carry: no version for {', '.join(missing)}: pin it in constraints.txt or OVERRIDES")
    return [(p, pins[normalized(p.name)]) for p in PACKAGES]


def stripped(relative: str) -> str | None:
    """The STRIP pattern that removes ``relative`` (a path in the installed tree), if any."""
    for pattern in STRIP:
        if fnmatch.fnmatch(relative, pattern) or fnmatch.fnmatch(relative, pattern + "/*"):
            return pattern
    return None


# ---- building ---------------------------------------------------------------------------------

def pip(*args: str, env: dict | None = None) -> None:
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *args]
    subprocess.run(command, check=True, env={**os.environ, **(env or {})})


def target_flags() -> list[str]:
    flags = ["--only-binary=:all:", "--python-version", PYTHON_VERSION, "--implementation", "cp"]
    for platform in PLATFORMS:
        flags += ["--platform", platform]
    return flags


def wheel_file(folder: Path, name: str, version: str) -> Path | None:
    stem = normalized(name).replace("-", "_")
    found = [w for w in folder.glob("*.whl") if normalized(w.name.split("-")[0]).replace("-", "_") == stem
             and w.name.split("-")[1] == version]
    return found[0] if found else None


def download(wheels: Path) -> list[Path]:
    """The cp312 wheel of every package (kept in ``wheels`` between builds)."""
    wheels.mkdir(parents=True, exist_ok=True)
    files = []
    for package, version in plan():
        found = wheel_file(wheels, package.name, version)
        if found is None and package.sdist_build:
            build_from_sdist(package.name, version, wheels)
        elif found is None:
            pip("download", "-q", "--no-deps", *target_flags(), "-d", str(wheels), f"{package.name}=={version}")
        found = wheel_file(wheels, package.name, version)
        if found is None:
            raise SystemExit(f"carry: no wheel of {package.name} {version} in {wheels} after the download")
        files.append(found)
    return files


def build_from_sdist(name: str, version: str, wheels: Path) -> None:
    """A pure-Python wheel from the sdist, built with this interpreter's torch (DeepSpeed's
    setup imports it) and without build isolation (which would download torch)."""
    sdists = wheels / "sdist"
    pip("download", "-q", "--no-deps", "--no-binary=:all:", "-d", str(sdists), f"{name}=={version}")
    sdist = next(sdists.glob(f"{name}-{version}.tar.gz"))
    pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(sdist), env=BUILD_ENV)


def install(wheel_files: list[Path], site: Path) -> None:
    """The wheels installed into ``site`` as the device's Python would have them."""
    shutil.rmtree(site, ignore_errors=True)
    pip("install", "-q", "--no-deps", "--no-compile", "--no-index", "--target", str(site), *target_flags(),
        *map(str, wheel_files))
    for script in (site / "bin").glob("*"):  # pip wrote this interpreter's path; the device's is python3
        text = script.read_bytes()
        if text.startswith(b"#!"):
            script.write_bytes(b"#!/usr/bin/env python3\n" + text.split(b"\n", 1)[1])


def strip_tree(site: Path) -> dict[str, int]:
    """Remove STRIP's paths and the symbol tables of STRIP_SYMBOLS's ELF files; bytes saved per rule."""
    saved: dict[str, int] = {}
    for path in sorted(site.rglob("*"), key=lambda p: len(p.parts)):
        if not path.exists() and not path.is_symlink():
            continue  # inside a folder removed already
        rule = stripped(path.relative_to(site).as_posix())
        if rule is not None:
            saved[rule] = saved.get(rule, 0) + tree_bytes(path)
            shutil.rmtree(path) if path.is_dir() else path.unlink()
    if shutil.which("strip") is None:
        print("carry: `strip` (binutils) not found: symbol tables kept, the archive is larger")
        return saved
    for folder in STRIP_SYMBOLS:
        for path in (site / folder).rglob("*"):
            if path.is_file() and not path.is_symlink() and path.read_bytes()[:4] == b"\x7fELF":
                before = path.stat().st_size
                subprocess.run(["strip", "--strip-unneeded", str(path)], check=True)
                saved["symbols"] = saved.get("symbols", 0) + before - path.stat().st_size
    return saved


def tree_bytes(path: Path) -> int:
    if path.is_file():
        return path.stat().st_size
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def pack(site: Path, archive: Path) -> None:
    """``site`` as one tar.xz (xz over the whole tree: about a third smaller than the wheels' zip)."""
    archive.unlink(missing_ok=True)
    tar = subprocess.Popen(["tar", "-C", str(site), "--sort=name", "--owner=0", "--group=0", "--numeric-owner",
                            "-cf", "-", "."], stdout=subprocess.PIPE)
    with archive.open("wb") as out:
        subprocess.run(["xz", "-9", "-T0", "-c"], stdin=tar.stdout, stdout=out, check=True)
    if tar.wait() != 0:
        raise SystemExit("carry: tar failed")


def git_tree_bytes(root: Path = ROOT) -> int:
    """What the device tool sends besides the carry: tracked and untracked-not-ignored files."""
    listed = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            check=True, capture_output=True).stdout.split(b"\0")
    return sum((root / os.fsdecode(name)).stat().st_size for name in listed
               if name and (root / os.fsdecode(name)).is_file())


def report(archive: Path) -> bool:
    tree, carried = git_tree_bytes(), archive.stat().st_size
    fits = tree + carried <= LIMIT_BYTES
    print(f"set site ({archive.relative_to(ROOT)}): {carried / 2**20:.1f} MiB; git tree {tree / 2**20:.1f} MiB; "
          f"together {(tree + carried) / 2**20:.1f} MiB of {LIMIT_BYTES >> 20} MiB: {'fits' if fits else 'DOES NOT FIT'}")
    return fits


def print_plan() -> None:
    print(f"carried (cp{PYTHON_VERSION.replace('.', '')} manylinux x86-64):")
    for package, version in plan():
        notes = ", ".join(n for n, on in (("built from the sdist", package.sdist_build),
                                          ("shadows the device's", package.shadows)) if on)
        print(f"  {package.name}=={version}{f' ({notes})' if notes else ''}: {package.why}")
    print("stripped:")
    for pattern, why in STRIP.items():
        print(f"  {pattern}: {why}")
    print(f"  symbol tables of the ELF files under: {', '.join(STRIP_SYMBOLS)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--plan", action="store_true", help="print what would be carried and stripped; download nothing")
    args = parser.parse_args(argv)
    print_plan()
    if args.plan:
        return 0
    wheels, site = CARRY_DIR / "wheels", CARRY_DIR / "site"
    installed = download(wheels)
    install(installed, site)
    unpacked = tree_bytes(site)
    saved = strip_tree(site)
    print(f"installed {unpacked / 2**20:.0f} MiB; stripped " +
          ", ".join(f"{rule} {size / 2**20:.1f} MiB" for rule, size in saved.items()))
    pack(site, ARCHIVE)
    return 0 if report(ARCHIVE) else 1


if __name__ == "__main__":
    sys.exit(main())
