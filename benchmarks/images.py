"""Benchmark of image inputs: preprocessing image files, and training a ResNet-18 on them.

    .venv/bin/python benchmarks/images.py                           # both parts, defaults
    .venv/bin/python benchmarks/images.py --part preprocess --images 2000 --repeat 3
    .venv/bin/python benchmarks/images.py --part preprocess --no-ray
    .venv/bin/python benchmarks/images.py --part train --train-images 2000 --epochs 3

The images are drawn here, once, and kept in ``benchmarks/data/images-<size>px-seed<seed>-v1/``:
a bright circle, square or triangle (the label) on smooth colour noise, saved as JPEG (quality
90). Each target size reads sources of its own size (``--sizes``, target:source; by default 64
from 96x96 files and 224 from 256x256 files), so that both resize, and neither can be served by
a JPEG's reduced-scale decoding alone (plait asks Pillow for it with ``draft``; from 256 to 64
it would skip most of the decoding, which a plain loop does not).

Two parts:

* preprocess: images/s of turning N files (the paths in a CSV, with the label) into RGB pixels
  of the target size.
  - plait, local: ``plait.data.preprocess.preprocess(config, csv, use_cache=False,
    engine=get_engine("local"))``, the whole call timed (read the CSV, check the files, read
    the first images' headers, split, decode and resize, write the Parquet cache).
  - baseline, processes: ``multiprocessing.Pool(os.cpu_count())`` over the files (chunks of a
    quarter of each process's share), each: ``Image.open``, ``convert("RGB")``, ``resize(...,
    BILINEAR)``, ``np.asarray(...).tobytes()``, the bytes collected in the parent; the pool's
    start is timed too.
  - baseline, threads: the same work in a ``ThreadPoolExecutor(os.cpu_count())`` (Pillow
    releases the GIL while it decodes and resizes).
  The three alternate, ``--repeat`` times, best and median kept; the ratio is plait's best over
  the faster baseline's best. Once, untimed, the pixels plait cached are checked equal to the
  baseline's (as a multiset of rows: plait stores them by split).
  - plait on Ray: the Dask engine (``get_engine("dask")`` after ``ray.init(num_cpus=
    os.cpu_count())``), in a subprocess that starts Ray (its start not timed), ``--ray-calls``
    calls in a row: the first with new Ray workers (they import plait), the next on warm ones.
    Two forms of the same input: the CSV's path (``csv``), and a DataFrame of the CSV
    (``frame``, ``pd.read_csv`` inside the timed call). The Dask engine reads a CSV in blocks of
    64 MB, so a CSV of image paths is one partition, one task, one core; a DataFrame is cut in
    at least two. The driver's peak resident memory (``VmHWM``) is reported, and measured for
    ``--memory-images`` files (default 2,000 and 8,000; one CSV call each) at the first size: it
    must not grow with the number of images.
* train: training images/s of ResNet-18 (torchvision's, random initial weights) at 64x64 on the
  CPU, batch 64, over ``--train-images`` cached images (and 64 for validation):
  - plait: ``Model(config).train(training_set=..., validation_set=...)``, the combiner with no
    hidden layer (so that the model is ResNet-18 and one Linear, like the loop below); the
    figure is the median of the rows/s each epoch records (the epoch's steps, evaluation
    excluded), the first epoch left out as warm-up.
  - hand-written: torchvision's resnet18 with ``fc`` replaced by a Linear to the classes, Adam
    (the learning rate both use, 0.001), the same uint8 tensors in memory (read from plait's cache),
    ``index_select`` of a shuffled order per batch, ``float() / 255``, cross-entropy, backward,
    step; the same number of torch threads; epochs timed one by one, the first left out.
  The two alternate: plait's run, then the loop, ``--train-repeat`` times; best of each.

Results are printed and written as JSON (default ``benchmarks/out/images.json``) with the
command line and the machine's details. No GPU is used.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from multiprocessing import Pool
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import preprocess  # noqa: E402  (benchmarks/preprocess.py: write_report, machine)

DATA_DIR = HERE / "data"
OUT_DIR = HERE / "out"
GENERATOR_VERSION = 1  # bump when the drawn images change, so that old folders are not re-used
SHAPES = ("circle", "square", "triangle")
LEARNING_RATE = 0.001
TARGETS = {"preprocess_ratio": 0.8, "train_ratio": 0.9}
"""Issue #19: plait at 0.8 of a plain preprocessing loop, and 0.9 of a hand-written training loop."""


# Data -----------------------------------------------------------------------------------------


def draw(size: int, rng: np.random.Generator):
    """One shape of random size, place and colour on smooth colour noise; returns (image, label)."""
    from PIL import Image, ImageDraw

    noise = rng.integers(0, 120, (6, 6, 3), dtype=np.uint8)
    image = Image.fromarray(noise, "RGB").resize((size, size), Image.Resampling.BICUBIC)
    kind = SHAPES[int(rng.integers(len(SHAPES)))]
    radius = int(rng.integers(size // 6, size // 3))
    x, y = (int(v) for v in rng.integers(radius, size - radius, 2))
    colour = tuple(int(v) for v in rng.integers(150, 256, 3))
    box = [x - radius, y - radius, x + radius, y + radius]
    pen = ImageDraw.Draw(image)
    if kind == "circle":
        pen.ellipse(box, fill=colour)
    elif kind == "square":
        pen.rectangle(box, fill=colour)
    else:
        pen.polygon([(x, y - radius), (x - radius, y + radius), (x + radius, y + radius)], fill=colour)
    return image, kind


def ensure_images(count: int, size: int, seed: int) -> Path:
    """A CSV of ``count`` JPEG files of ``size`` x ``size`` (absolute paths, column ``image``;
    their shape, ``label``). Files are drawn once per folder, in order, so a smaller count reads
    the first files of a larger one."""
    folder = DATA_DIR / f"images-{size}px-seed{seed}-v{GENERATOR_VERSION}"
    folder.mkdir(parents=True, exist_ok=True)
    labels_file = folder / "labels.txt"
    labels = labels_file.read_text().split() if labels_file.exists() else []
    if len(labels) < count:
        started = time.perf_counter()
        rng = np.random.default_rng([seed, size])
        labels = []
        for i in range(count):
            image, kind = draw(size, rng)
            image.save(folder / f"{i:06d}.jpg", quality=90)
            labels.append(kind)
        labels_file.write_text("\n".join(labels) + "\n")
        print(f"drew {count:,} images of {size}x{size} in {time.perf_counter() - started:.1f}s into {folder}")
    csv = folder / f"images-{count}.csv"
    if not csv.exists():
        lines = ["image,label", *(f"{folder / f'{i:06d}.jpg'},{labels[i]}" for i in range(count))]
        tmp = csv.with_name(f".{csv.name}.tmp-{os.getpid()}")
        tmp.write_text("\n".join(lines) + "\n")
        tmp.rename(csv)
    return csv


def paths_of(csv: Path) -> list[str]:
    return [line.split(",", 1)[0] for line in csv.read_text().splitlines()[1:]]


def image_config(size: int, cache_dir: str) -> dict:
    return {"input_features": [{"name": "image", "type": "image",
                                "preprocessing": {"height": size, "width": size, "num_channels": 3},
                                "encoder": {"type": "resnet", "model_variant": 18, "use_pretrained": False}}],
            "output_features": [{"name": "label", "type": "category"}],
            "backend": {"type": "local", "cache_dir": cache_dir}}


# Preprocessing: plait --------------------------------------------------------------------------


def plait_local(csv: Path, size: int) -> tuple[float, str]:
    """Seconds of one cold preprocess call on the local engine, and the cache folder it wrote."""
    from plait.config import load_config
    from plait.data.engines import get_engine
    from plait.data.preprocess import preprocess as run

    cache_dir = tempfile.mkdtemp(dir=OUT_DIR, prefix="images-cache-")
    config = load_config(image_config(size, cache_dir))
    started = time.perf_counter()
    run(config, str(csv), use_cache=False, engine=get_engine("local"))
    return time.perf_counter() - started, cache_dir


def cached_rows(cache_dir: str) -> list[bytes]:
    """Every image row plait cached (all splits), as bytes."""
    import pyarrow.parquet as pq

    rows = []
    for file in sorted(Path(cache_dir).rglob("*.parquet")):
        rows += pq.read_table(file, columns=["image"])["image"].to_pylist()
    return rows


def peak_rss_mib() -> float:
    """This process's peak resident memory (VmHWM). Not ``ru_maxrss``: Linux carries that over a
    fork and an exec, so a child started from a large parent reports the parent's size."""
    status = Path("/proc/self/status").read_text().splitlines()
    kib = next((line.split()[1] for line in status if line.startswith("VmHWM:")), None)
    return int(kib) / 1024 if kib else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def ray_worker(spec: dict) -> dict:
    """Preprocess calls on Ray's Dask engine, in a fresh subprocess that starts Ray: for each
    source form, ``calls`` calls in a row (the first with new Ray workers, which import plait;
    the later ones find them warm)."""
    import pandas as pd
    import ray

    from plait.config import load_config
    from plait.data.engines import get_engine
    from plait.data.preprocess import preprocess as run

    started = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, log_to_driver=False)
    figures = {"startup_seconds": time.perf_counter() - started, "driver_rss_before_calls_mib": peak_rss_mib()}
    for source in spec["sources"]:
        seconds = []
        for _ in range(spec["calls"]):
            config = load_config(image_config(spec["size"], tempfile.mkdtemp(dir=spec["cache_dir"])))
            started = time.perf_counter()
            # "frame": the same paths handed over as a DataFrame (read here, in the timed call).
            data = spec["csv"] if source == "csv" else pd.read_csv(spec["csv"])
            run(config, data, use_cache=False, engine=get_engine("dask"))
            seconds.append(time.perf_counter() - started)
        figures[source] = seconds
    figures["driver_peak_rss_mib"] = peak_rss_mib()
    ray.shutdown()
    return figures


def plait_ray(csv: Path, size: int, sources: tuple[str, ...] = ("csv", "frame"), calls: int = 3) -> dict:
    from ray_overhead import private_ray_tmpdir

    if "RAY_TMPDIR" not in os.environ:  # never join a cluster someone else started on this machine
        private_ray_tmpdir()
    cache_dir = tempfile.mkdtemp(dir=OUT_DIR, prefix="images-cache-")
    spec = {"csv": str(csv), "size": size, "cache_dir": cache_dir, "sources": list(sources), "calls": calls}
    try:
        proc = subprocess.run([sys.executable, __file__, "--ray-worker", json.dumps(spec)], capture_output=True,
                              text=True, cwd=ROOT)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
        raise SystemExit(f"the Ray run failed (exit {proc.returncode})")
    # The last line the worker printed is its JSON; Ray may print its own lines before it.
    return json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))


# Preprocessing: the baselines --------------------------------------------------------------------


def decoded(job: tuple[str, int]) -> bytes:
    """One file's RGB pixels at ``size`` x ``size``, as bytes: the plain loop's whole work."""
    from PIL import Image

    path, size = job
    with Image.open(path) as image:
        pixels = image.convert("RGB").resize((size, size), Image.Resampling.BILINEAR)
    return np.asarray(pixels, dtype=np.uint8).tobytes()


def baseline_processes(paths: list[str], size: int) -> tuple[float, list[bytes]]:
    jobs = [(p, size) for p in paths]
    workers = os.cpu_count() or 1
    started = time.perf_counter()
    with Pool(workers) as pool:
        rows = pool.map(decoded, jobs, chunksize=max(1, len(jobs) // (4 * workers)))
    return time.perf_counter() - started, rows


def baseline_threads(paths: list[str], size: int) -> tuple[float, list[bytes]]:
    jobs = [(p, size) for p in paths]
    started = time.perf_counter()
    with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
        rows = list(pool.map(decoded, jobs))
    return time.perf_counter() - started, rows


def same_rows(a: list[bytes], b: list[bytes]) -> bool:
    digest = lambda rows: collections.Counter(hashlib.blake2b(r, digest_size=16).digest() for r in rows)  # noqa: E731
    return digest(a) == digest(b)


def summary(seconds: list[float], images: int) -> dict:
    best, median = min(seconds), statistics.median(seconds)
    return {"seconds": [round(s, 3) for s in seconds], "best_s": round(best, 3), "median_s": round(median, 3),
            "images_per_s": round(images / best), "images_per_s_median": round(images / median)}


def preprocessing(args) -> dict:
    results = {}
    for target, source in args.sizes:
        csv = ensure_images(args.images, source, args.seed)
        paths = paths_of(csv)
        # Untimed: the pixels plait caches are the baseline's, so both did the same work.
        _, cache_dir = plait_local(csv, target)
        check = same_rows(cached_rows(cache_dir), baseline_threads(paths, target)[1])
        shutil.rmtree(cache_dir, ignore_errors=True)
        times = {"plait_local": [], "baseline_processes": [], "baseline_threads": []}
        for _ in range(args.repeat):  # alternating, so that other work on the machine slows all alike
            seconds, cache_dir = plait_local(csv, target)
            shutil.rmtree(cache_dir, ignore_errors=True)
            times["plait_local"].append(seconds)
            times["baseline_processes"].append(baseline_processes(paths, target)[0])
            times["baseline_threads"].append(baseline_threads(paths, target)[0])
        runs = {name: summary(s, len(paths)) for name, s in times.items()}
        faster = max(("baseline_processes", "baseline_threads"), key=lambda n: runs[n]["images_per_s"])
        result = {"images": len(paths), "source_size": source, "target_size": target, **runs,
                  "faster_baseline": faster, "plait_over_baseline": round(runs["plait_local"]["images_per_s"] /
                                                                          runs[faster]["images_per_s"], 3),
                  "same_pixels_as_baseline": check}
        if args.ray:
            result["plait_ray"] = ray_figures(plait_ray(csv, target, calls=args.ray_calls), len(paths))
            result["ray_over_local"] = round(result["plait_ray"]["csv"]["images_per_s_first"] /
                                             runs["plait_local"]["images_per_s"], 3)
        results[f"{target}px"] = result
        print_preprocessing(result)
    if args.ray and args.memory_images:
        target, source = args.sizes[0]
        memory = {}
        for count in args.memory_images:
            run = plait_ray(ensure_images(count, source, args.seed), target, sources=("csv",), calls=1)
            memory[str(count)] = {"images": count, "target_size": target, "seconds": round(run["csv"][0], 3),
                                  "driver_peak_rss_mib": round(run["driver_peak_rss_mib"], 1),
                                  "driver_rss_before_call_mib": round(run["driver_rss_before_calls_mib"], 1)}
            print(f"ray driver memory, {count:,} images at {target}x{target}: peak {run['driver_peak_rss_mib']:.0f} MiB "
                  f"(after Ray's start, before the call: {run['driver_rss_before_calls_mib']:.0f} MiB), {run['csv'][0]:.1f}s")
        results["ray_driver_memory"] = memory
    return results


def ray_figures(run: dict, images: int) -> dict:
    figures = {"startup_seconds": round(run["startup_seconds"], 2), "driver_peak_rss_mib": round(run["driver_peak_rss_mib"], 1)}
    for source in ("csv", "frame"):
        seconds = run[source]
        figures[source] = {"seconds": [round(s, 3) for s in seconds], "images_per_s_first": round(images / seconds[0]),
                           "images_per_s_warm": round(images / min(seconds[1:] or seconds))}
    return figures


def print_preprocessing(r: dict) -> None:
    print(f"\n{r['images']:,} JPEGs of {r['source_size']}x{r['source_size']} -> {r['target_size']}x{r['target_size']} RGB "
          f"(pixels equal to the baseline's: {r['same_pixels_as_baseline']})")
    for name in ("plait_local", "baseline_processes", "baseline_threads"):
        run = r[name]
        print(f"  {name:20} {run['images_per_s']:>8,} images/s best  {run['images_per_s_median']:>8,} median  ({run['best_s']:.2f}s)")
    if "plait_ray" in r:
        ray = r["plait_ray"]
        for source in ("csv", "frame"):
            print(f"  {'plait_ray, ' + source:20} {ray[source]['images_per_s_first']:>8,} images/s first call, "
                  f"{ray[source]['images_per_s_warm']:,} warm  ({', '.join(f'{s:.2f}s' for s in ray[source]['seconds'])})")
        print(f"  (Ray's start, {ray['startup_seconds']:.1f}s, not counted; driver peak {ray['driver_peak_rss_mib']:.0f} MiB)")
    print(f"  plait local / {r['faster_baseline']}: {r['plait_over_baseline']:.2f} (target >= {TARGETS['preprocess_ratio']})")


# Training -------------------------------------------------------------------------------------


def training(args) -> dict:
    import pandas as pd
    import torch

    from plait.api import Model
    from plait.data.tensors import table_tensors

    target, source = args.train_size
    csv = ensure_images(args.train_images + args.validation_images, source, args.seed)
    frame = pd.read_csv(csv)
    train_set, validation_set = frame.iloc[:args.train_images], frame.iloc[args.train_images:]
    cache_dir = str(DATA_DIR / "images-train-cache")
    config = image_config(target, cache_dir)
    config["combiner"] = {"type": "concat", "num_fc_layers": 0}
    config["trainer"] = {"epochs": args.epochs, "batch_size": args.batch_size, "learning_rate": LEARNING_RATE, "early_stop": -1}
    config["backend"] = {"type": "local", "cache_dir": cache_dir}
    data = Model(config).preprocess(training_set=train_set, validation_set=validation_set)  # not timed
    features = data.metadata["features"]
    tensors = table_tensors(data.read_split("training"), features, ["image", "label"])
    classes = len(features["label"]["vocabulary"])
    threads = torch.get_num_threads()
    plait_runs, loop_runs = [], []
    for repeat in range(args.train_repeat):
        model = Model(config)
        started = time.perf_counter()
        result = model.train(training_set=train_set, validation_set=validation_set, progress_bar=False)
        wall = time.perf_counter() - started
        speeds = [r["rows_per_s"] for r in result.training_statistics if "rows_per_s" in r]
        plait_runs.append({"rows_per_s_per_epoch": [round(s, 1) for s in speeds],
                           "images_per_s": round(statistics.median(speeds[1:] or speeds), 1),
                           "data_wait_fraction": round(statistics.median(r["data_wait_fraction"] for r in result.training_statistics
                                                                         if "data_wait_fraction" in r), 4),
                           "train_call_s": round(wall, 1)})
        loop_runs.append(hand_written(tensors, classes, args, seed=repeat))
        print(f"run {repeat + 1}: plait {plait_runs[-1]['images_per_s']:.1f} images/s "
              f"(per epoch {plait_runs[-1]['rows_per_s_per_epoch']}), hand-written {loop_runs[-1]['images_per_s']:.1f} "
              f"(per epoch {loop_runs[-1]['rows_per_s_per_epoch']})")
    plait_best = max(plait_runs, key=lambda r: r["images_per_s"])
    loop_best = max(loop_runs, key=lambda r: r["images_per_s"])
    result = {"training_images": len(tensors["label"]), "size": target, "source_size": source, "batch_size": args.batch_size,
              "epochs": args.epochs, "torch_threads": threads, "plait": plait_best, "hand_written": loop_best,
              "plait_runs": plait_runs, "hand_written_runs": loop_runs,
              "plait_over_hand_written": round(plait_best["images_per_s"] / loop_best["images_per_s"], 3)}
    print(f"\ntraining ResNet-18 at {target}x{target}, batch {args.batch_size}, {result['training_images']:,} images, "
          f"{threads} torch threads: plait {plait_best['images_per_s']:.1f} images/s, hand-written "
          f"{loop_best['images_per_s']:.1f}; ratio {result['plait_over_hand_written']:.2f} (target >= {TARGETS['train_ratio']})")
    return result


def hand_written(tensors: dict, classes: int, args, seed: int) -> dict:
    """The plain PyTorch loop: epochs timed one by one; the first is left out of the figure."""
    import torch
    from torch import nn

    from plait.models.torchvision_encoders import import_torchvision

    torchvision = import_torchvision()
    torch.manual_seed(seed)
    model = torchvision.models.resnet18(weights=None)
    model.fc = nn.Linear(model.fc.in_features, classes)
    optimizer = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    images, labels = tensors["image"], tensors["label"].long()
    speeds = []
    model.train()
    for epoch in range(args.epochs):
        started = time.perf_counter()
        order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(seed * 1000 + epoch))
        for start in range(0, len(order), args.batch_size):
            index = order[start:start + args.batch_size]
            x = images.index_select(0, index).float() / 255.0
            loss = nn.functional.cross_entropy(model(x), labels.index_select(0, index))
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
        speeds.append(len(order) / (time.perf_counter() - started))
    return {"rows_per_s_per_epoch": [round(s, 1) for s in speeds],
            "images_per_s": round(statistics.median(speeds[1:] or speeds), 1)}


# Main -----------------------------------------------------------------------------------------


def size_pair(text: str) -> tuple[int, int]:
    target, _, source = text.partition(":")
    return int(target), int(source or target)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=("preprocess", "train", "all"), default="all")
    parser.add_argument("--images", type=int, default=2000, help="preprocess: image files per size (default 2,000)")
    parser.add_argument("--sizes", type=size_pair, nargs="+", default=[(64, 96), (224, 256)],
                        help="preprocess: target:source sizes in pixels (default 64:96 224:256)")
    parser.add_argument("--repeat", type=int, default=3, help="preprocess: runs of each local variant (default 3)")
    parser.add_argument("--no-ray", dest="ray", action="store_false", help="preprocess: leave out the Ray runs")
    parser.add_argument("--ray-calls", type=int, default=3,
                        help="preprocess: Ray calls in a row per source form, the later ones on warm workers (default 3)")
    parser.add_argument("--memory-images", type=int, nargs="*", default=[2000, 8000],
                        help="preprocess: image counts for the Ray driver's memory, at the first size (default 2000 8000)")
    parser.add_argument("--train-images", type=int, default=2000, help="train: training images (default 2,000)")
    parser.add_argument("--validation-images", type=int, default=64, help="train: validation images (default 64)")
    parser.add_argument("--train-size", type=size_pair, default=(64, 96), help="train: target:source size (default 64:96)")
    parser.add_argument("--epochs", type=int, default=3, help="train: epochs per run, the first not counted (default 3)")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train-repeat", type=int, default=1, help="train: runs of each loop, best kept (default 1)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=OUT_DIR / "images.json")
    parser.add_argument("--ray-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    counts = (args.images, args.repeat, args.ray_calls, args.train_images, args.validation_images, args.epochs,
              args.batch_size, args.train_repeat, *args.memory_images)
    if any(n <= 0 for n in counts):
        parser.error("counts (--images, --repeat, --ray-calls, --memory-images, --train-*, --epochs, --batch-size) "
                     "must be positive")
    if args.ray_worker:
        print(json.dumps(ray_worker(json.loads(args.ray_worker))))
        return 0
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    report = {"command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
              "load_average_before": os.getloadavg()}
    if args.part in ("preprocess", "all"):
        report["preprocess"] = preprocessing(args)
    if args.part in ("train", "all"):
        report["train"] = training(args)
    report["gpu"] = "not measured: no device lent to this session"
    report["machine"] = preprocess.machine()
    preprocess.write_report(args.out, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
