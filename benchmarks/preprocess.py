"""Benchmark of plait preprocessing on a seeded synthetic dataset.

    .venv/bin/python benchmarks/preprocess.py                      # 1,000,000 rows, Parquet
    .venv/bin/python benchmarks/preprocess.py --rows 200000 --format csv --repeat 5
    .venv/bin/python benchmarks/preprocess.py --partitions 7 --check-identity
    .venv/bin/python benchmarks/preprocess.py --backend ray --processor dask --rows 5000000
    .venv/bin/python benchmarks/preprocess.py --backend ray --no-persist --memory-limit 1.5GiB --rows 20000000 --repeat 1

The dataset (8 number columns, 4 category columns, one text column, a binary output) is
generated once from ``numpy.random.default_rng`` seeded with ``--seed``, a million rows at a time,
into ``benchmarks/data/`` and re-used while the parameters match. Each measurement runs in its own subprocess so that peak RSS
(``ru_maxrss``) is that run's alone:

* cold: a fresh cache directory, so ``preprocess`` reads, cleans, fits (map-reduce), transforms
  and writes the cache entry;
* warm: the same call again, a cache hit.

With ``--backend ray`` each run starts a local Ray instance in its subprocess (as
``plait preprocess --backend ray`` does on a machine without a cluster) and reports the start-up
time apart from the preprocessing time; rows/s are given for both. A warm hit never starts Ray.

``--memory-limit`` runs each measured subprocess, and so every process of the Ray instance it
starts, in a new memory cgroup with that limit (cgroup v1 or v2; needs root or a delegated
cgroup). The kernel then kills the job if it ever needs more; plait sizes Ray's object store
from the same limit. The cgroup's peak usage is reported either way when a cgroup can be made.

Results are printed and written as JSON (default ``benchmarks/out/preprocess.json``) with the
machine's details. ``--check-identity`` also preprocesses with 1, 7 and the engine's own choice
of partitions and checks that every output file (Parquet and metadata.json) is byte-identical.

``--types`` is a separate mode (issue #18): the throughput of each feature type's processor
(sequence, text, bag, date, h3, timeseries, audio inputs; text, vector, category_distribution
outputs) on a seeded column of ``--rows`` rows (default 200,000; audio: ``--audio-files`` WAV
files), in this process, against a hand-written vectorized baseline that gives the same output;
see ``benchmarks/preprocess_types.py``. It writes ``benchmarks/out/preprocess_types.json``::

    .venv/bin/python benchmarks/preprocess.py --types                       # every type
    .venv/bin/python benchmarks/preprocess.py --types date,h3 --rows 20000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
DATA_DIR = HERE / "data"
OUT_DIR = HERE / "out"
GENERATOR_VERSION = 4  # bump when the generated data changes, so old files are not re-used

ROW_GROUP_ROWS = 128 * 1024
NUMBER_COLUMNS = [f"num_{i}" for i in range(8)]
CATEGORY_COLUMNS = {"cat_10": 10, "cat_100": 100, "cat_1000": 1000, "cat_5": 5}
TEXT_COLUMN = "text"
OUTPUT_COLUMN = "label"
VOCABULARY_SIZE = 5000
PUNCTUATION = [",", ".", "!", "?", ";", ":", "'s", "-", "(", ")"]
ACCENTED = list("éüñçøå")


# Data ----------------------------------------------------------------------------------------


def dataset_path(rows: int, seed: int, fmt: str) -> Path:
    return DATA_DIR / f"synthetic-v{GENERATOR_VERSION}-r{rows}-s{seed}.{fmt}"


CHUNK_ROWS = 1_000_000


def generate(rows: int, seed: int):
    """The synthetic dataset as Arrow tables of up to a million rows each, so that datasets
    larger than memory can be written: chunk ``i`` comes from ``default_rng([seed, i + 1])``;
    the text vocabulary from ``default_rng(seed)`` is shared by all chunks."""
    import numpy as np

    words = _vocabulary(np.random.default_rng(seed))
    for i, start in enumerate(range(0, rows, CHUNK_ROWS)):
        yield _chunk(np.random.default_rng([seed, i + 1]), min(CHUNK_ROWS, rows - start), words)


def _chunk(rng, rows: int, words):
    """One chunk of the dataset (vectorized: no Python loop over rows)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    columns = {}
    numbers = [
        rng.normal(0, 1, rows),
        rng.normal(50, 10, rows),
        rng.lognormal(0, 1, rows),
        rng.uniform(-100, 100, rows),
        rng.exponential(3, rows),
        rng.integers(0, 1000, rows).astype(np.float64),
        rng.standard_t(5, rows),
        rng.gamma(2, 2, rows),
    ]
    for i, (name, values) in enumerate(zip(NUMBER_COLUMNS, numbers)):
        missing = rng.random(rows) < 0.01 if i % 2 == 0 else None  # ~1% missing in half the columns
        columns[name] = pa.array(values, pa.float64(), mask=missing)
    for name, cardinality in CATEGORY_COLUMNS.items():
        # Zipf-ish frequencies, so vocabularies have a head and a tail.
        weights = 1.0 / np.arange(1, cardinality + 1) ** 0.8
        codes = rng.choice(cardinality, size=rows, p=weights / weights.sum())
        labels = pa.array([f"{name[4:]}_{j}" for j in range(cardinality)], pa.string())
        missing = rng.random(rows) < 0.005 if name == "cat_100" else None
        columns[name] = pa.array(labels.take(pa.array(codes)).to_numpy(zero_copy_only=False), pa.string(), mask=missing)
    columns[TEXT_COLUMN] = _text(rng, rows, words)
    signal = numbers[0] + 0.02 * numbers[3] + (np.asarray(pc.equal(columns["cat_5"], "5_0").to_numpy(zero_copy_only=False)) * 0.5)
    columns[OUTPUT_COLUMN] = pa.array(signal + rng.normal(0, 1, rows) > 0.3)
    return pa.table(columns)


def _vocabulary(rng):
    """~5,000 words of 2-10 letters, 2% of them with an accented letter (so some rows are not ASCII)."""
    import numpy as np
    import pyarrow as pa

    letters = np.array(list("abcdefghijklmnopqrstuvwxyz"))
    lengths = rng.integers(2, 11, VOCABULARY_SIZE * 2)
    spelled = letters[rng.integers(0, 26, (VOCABULARY_SIZE * 2, 10))]
    words = sorted({"".join(w[:n]) for w, n in zip(spelled, lengths)})[:VOCABULARY_SIZE]
    words = [str(w) for w in rng.permutation(words)]
    for i in rng.choice(len(words), size=len(words) // 50, replace=False):  # over the vocabulary, not the rows
        at = int(rng.integers(len(words[i])))
        words[i] = words[i][:at] + str(rng.choice(ACCENTED)) + words[i][at + 1 :]
    return pa.array(words, pa.string())


def _text(rng, rows: int, words):
    """5-15 tokens a row from the vocabulary with Zipf-ish frequencies, some capitalized, with
    punctuation attached to ~8% of the words, a full stop ending ~half the rows, and ~0.5% of
    the rows missing."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    weights = 1.0 / np.arange(1, len(words) + 1) ** 1.07
    counts = rng.integers(5, 16, rows)
    total = int(counts.sum())
    tokens = words.take(pa.array(rng.choice(len(words), size=total, p=weights / weights.sum())))
    capital = rng.random(total) < 0.05
    tokens = pc.if_else(pa.array(capital), pc.utf8_capitalize(tokens), tokens)
    suffix = pa.array(np.array([""] + PUNCTUATION, dtype=object)[np.where(rng.random(total) < 0.08, rng.integers(1, len(PUNCTUATION) + 1, total), 0)], pa.string())
    tokens = pc.binary_join_element_wise(tokens, suffix, "")
    offsets = pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))
    texts = pc.binary_join(pa.ListArray.from_arrays(offsets, tokens), " ")
    ending = pa.array(np.where(rng.random(rows) < 0.5, ".", ""), pa.string())
    texts = pc.binary_join_element_wise(texts, ending, "")
    return pc.if_else(pa.array(rng.random(rows) < 0.005), pa.scalar(None, pa.string()), texts)


def ensure_dataset(rows: int, seed: int, fmt: str) -> Path:
    """Generate the dataset unless a file with the same parameters exists; returns its path.

    Generation runs in a subprocess: a child inherits its parent's resident size as the start
    of its ``ru_maxrss``, so this process stays small for the measured children to report
    their own peaks."""
    path = dataset_path(rows, seed, fmt)
    if not path.exists():
        spec = json.dumps({"rows": rows, "seed": seed, "format": fmt})
        subprocess.run([sys.executable, __file__, "--generate", spec], check=True, cwd=ROOT)
    return path


def write_dataset(rows: int, seed: int, fmt: str) -> None:
    path = dataset_path(rows, seed, fmt)
    import pyarrow.csv as csv
    import pyarrow.parquet as pq

    DATA_DIR.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    writer, arrow_bytes = None, 0
    for table in generate(rows, seed):
        arrow_bytes += table.nbytes
        if writer is None:
            # Row groups of 128 Ki rows (about 23 MB in memory here), as Spark or Dask writers
            # make them; pyarrow's default of 1 Mi rows would make each Ray read task hold 180 MB.
            writer = pq.ParquetWriter(tmp, table.schema) if fmt == "parquet" else csv.CSVWriter(tmp, table.schema)
        if fmt == "parquet":
            writer.write_table(table, row_group_size=ROW_GROUP_ROWS)
        else:
            writer.write_table(table)
    writer.close()
    tmp.rename(path)
    path.with_name(path.name + ".json").write_text(json.dumps({"arrow_bytes": arrow_bytes}))
    print(f"generated {path.relative_to(ROOT)} ({rows:,} rows, {path.stat().st_size / 2**20:.1f} MiB on disk, "
          f"{arrow_bytes / 2**20:.0f} MiB in memory) in {time.perf_counter() - started:.1f}s")


def config(cache_dir: str, backend: dict | None = None) -> dict:
    return {
        "input_features": [
            *({"name": name, "type": "number"} for name in NUMBER_COLUMNS),
            *({"name": name, "type": "category"} for name in CATEGORY_COLUMNS),
            {"name": TEXT_COLUMN, "type": "text", "preprocessing": {"tokenizer": "space_punct"}},
        ],
        "output_features": [{"name": OUTPUT_COLUMN, "type": "binary"}],
        "backend": {"type": "local", "cache_dir": cache_dir, **(backend or {})},
    }


# Measurements ---------------------------------------------------------------------------------


def worker(spec: dict) -> dict:
    """One measured preprocess call (run in a fresh subprocess); returns its figures."""
    import resource

    started = time.perf_counter()
    from plait.config import load_config
    from plait.data.engines import get_engine
    from plait.data.preprocess import preprocess

    imported = time.perf_counter() - started
    startup = 0.0
    if spec.get("backend", "local") == "ray":
        processor = {"type": spec["processor"], "persist": spec["persist"], "parallelism": spec["partitions"]}
        cfg = load_config(config(spec["cache_dir"], {"type": "ray", "processor": processor}))

        def engine():  # started only on a cache miss, as plait does
            nonlocal startup
            from plait.backends.ray.cluster import connect

            begun = time.perf_counter()
            connect()
            startup = time.perf_counter() - begun
            return get_engine(processor["type"], parallelism=processor["parallelism"], persist=processor["persist"])
    else:
        cfg = load_config(config(spec["cache_dir"]))
        options = {"num_partitions": spec["partitions"], "threads": spec.get("threads")}
        engine = get_engine("local", **{k: v for k, v in options.items() if v})
    before = resource.getrusage(resource.RUSAGE_SELF)
    started = time.perf_counter()
    result = preprocess(cfg, spec["dataset"], engine=engine)
    seconds = time.perf_counter() - started - startup
    after = resource.getrusage(resource.RUSAGE_SELF)
    peak = after.ru_maxrss  # KiB on Linux
    hwm = next((line.split()[1] for line in _lines("/proc/self/status") if line.startswith("VmHWM:")), None)
    return {
        "seconds": seconds,
        "startup_seconds": startup,
        "peak_rss_mib": peak / 1024,
        "vm_hwm_mib": int(hwm) / 1024 if hwm else None,
        "cpu_seconds": (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime),
        "rss_before_mib": before.ru_maxrss / 1024,
        "import_seconds": imported,
        "from_cache": result.from_cache,
        "entry": result.location,
        "rows_out": {split: result.rows(split) for split in result.metadata["splits"]},
    }


def measure(spec: dict) -> dict:
    """Run one measurement in a subprocess, inside a fresh memory cgroup when one can be made."""
    group = MemoryCgroup.create(spec.get("memory_limit"))
    try:
        proc = subprocess.run(
            [sys.executable, __file__, "--worker", json.dumps(spec)], capture_output=True, text=True, cwd=ROOT,
            preexec_fn=group.join if group else None,
        )
        peak = group.peak() if group else None
    finally:
        if group:
            group.remove()
    if proc.returncode != 0:
        sys.stderr.write(proc.stdout[-5000:] + proc.stderr[-5000:])
        killed = " (killed: over the memory limit?)" if proc.returncode in (-9, 137) else ""
        raise SystemExit(f"the {spec['phase']} run failed (exit {proc.returncode}){killed}")
    # The last line the worker printed is its JSON; Ray may print its own lines before it.
    result = json.loads(next(line for line in reversed(proc.stdout.splitlines()) if line.startswith("{")))
    result["cgroup_peak_mib"] = peak / 2**20 if peak is not None else None
    return result


class MemoryCgroup:
    """A memory cgroup for one measured run: everything the run starts (a Ray instance's raylet,
    object store and workers included) is charged to it, so its peak is the whole job's."""

    def __init__(self, path: Path, version: int):
        self.path, self.version = path, version

    @classmethod
    def create(cls, limit: int | None) -> "MemoryCgroup | None":
        v2, v1 = Path("/sys/fs/cgroup/cgroup.controllers"), Path("/sys/fs/cgroup/memory")
        name = f"plait-bench-{os.getpid()}-{time.monotonic_ns()}"
        try:
            if v1.is_dir():
                group = cls(v1 / name, 1)
                group.path.mkdir()
                if limit:
                    (group.path / "memory.limit_in_bytes").write_text(str(limit))
            elif v2.is_file():
                group = cls(Path("/sys/fs/cgroup") / name, 2)
                group.path.mkdir()
                if limit:
                    (group.path / "memory.max").write_text(str(limit))
                    (group.path / "memory.swap.max").write_text("0")
            else:
                raise OSError("no cgroup filesystem")
        except OSError as exc:
            if limit:
                raise SystemExit(f"--memory-limit needs a memory cgroup this user can create ({exc}); run as root") from None
            return None
        return group

    def join(self) -> None:  # runs in the child between fork and exec
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def peak(self) -> int | None:
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        try:
            return int((self.path / name).read_text())
        except (OSError, ValueError):
            return None

    def remove(self) -> None:
        """Kill what the run left behind (Ray's processes outlive the driver by a moment) and
        delete the group."""
        import signal

        for _ in range(50):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                return
            if not pids:
                break
            for pid in pids:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.1)
        try:
            self.path.rmdir()
        except OSError:
            pass


def parse_bytes(text: str) -> int:
    """'1.5GiB', '800MiB', '2G', '1000000' as bytes."""
    units = {"": 1, "k": 10**3, "m": 10**6, "g": 10**9, "kib": 2**10, "mib": 2**20, "gib": 2**30, "ki": 2**10, "mi": 2**20, "gi": 2**30}
    number = text.strip().rstrip("bB") if not text.lower().endswith("ib") else text.strip()
    digits = number.rstrip("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")
    unit = number[len(digits):].lower()
    if unit not in units:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (try 1.5GiB or 800MiB)")
    return int(float(digits) * units[unit])


def summary(runs: list[dict], rows: int) -> dict:
    times = [r["seconds"] for r in runs]
    best, median = min(times), statistics.median(times)
    with_startup = statistics.median(r["seconds"] + r["startup_seconds"] for r in runs)
    peaks = [r["cgroup_peak_mib"] for r in runs if r["cgroup_peak_mib"] is not None]
    return {
        "best_seconds": best,
        "median_seconds": median,
        "best_rows_per_s": rows / best,
        "median_rows_per_s": rows / median,
        "median_startup_seconds": statistics.median(r["startup_seconds"] for r in runs),
        "median_rows_per_s_with_startup": rows / with_startup,
        "best_cpu_seconds": min(r["cpu_seconds"] for r in runs),
        "peak_rss_mib_max": max(r["peak_rss_mib"] for r in runs),
        "job_peak_mib_max": max(peaks) if peaks else None,
        "runs": runs,
    }


def check_identity(dataset: str, variants: dict[str, dict]) -> dict:
    """Preprocess once per variant (a partition count, a backend) into its own cache; compare
    every file's bytes with the first variant's."""
    entries = {}
    with tempfile.TemporaryDirectory(dir=OUT_DIR, prefix="identity-") as tmp:
        for label, spec in variants.items():
            run = measure({"phase": f"identity-{label}", "dataset": dataset, "cache_dir": f"{tmp}/{label}", **spec})
            entry = Path(run["entry"])
            entries[label] = {str(f.relative_to(entry)): f.read_bytes() for f in sorted(entry.rglob("*")) if f.is_file()}
        first, *others = entries
        mismatched = sorted(
            {name for n in others for name in entries[first].keys() | entries[n].keys() if entries[first].get(name) != entries[n].get(name)}
        )
    return {
        "variants": list(variants),
        "files": sorted(entries[first]),
        "identical": not mismatched,
        "mismatched": mismatched,
    }


def identity_variants(args) -> dict[str, dict]:
    if args.backend == "local":
        return {f"local-{n or 'auto'}": {"partitions": n} for n in (1, 7, None)}
    ray = {"backend": "ray", "processor": args.processor, "persist": args.persist, "partitions": args.partitions}
    return {"local": {"partitions": None}, f"ray-{args.processor}": ray}


def arrow_bytes(path: Path) -> int:
    """The dataset's size in memory as Arrow, recorded by the generator beside the file."""
    return json.loads(path.with_name(path.name + ".json").read_text())["arrow_bytes"]


def write_report(path: Path, report: dict) -> None:
    """Write a benchmark's JSON report whole (a temporary name, then renamed) and say where."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(report, indent=2) + "\n")
    tmp.rename(path)
    print(f"wrote {path}")


def machine() -> dict:
    import numpy
    import pandas
    import pyarrow

    import plait

    cpu = next((line.split(":", 1)[1].strip() for line in _lines("/proc/cpuinfo") if line.startswith("model name")), platform.processor())
    memory = next((line.split(":", 1)[1].strip() for line in _lines("/proc/meminfo") if line.startswith("MemTotal")), None)
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "cpu_model": cpu,
        "memory": memory,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "numpy": numpy.__version__,
        "pyarrow": pyarrow.__version__,
        "pandas": pandas.__version__,
        "plait": plait.__version__,
        "git_commit": _git("rev-parse", "HEAD"),
        "git_dirty": bool(_git("status", "--porcelain", "--", "plait")),
    }


def _lines(path: str) -> list[str]:
    try:
        return Path(path).read_text().splitlines()
    except OSError:
        return []


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, cwd=ROOT, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rows", type=int, default=None, help="rows of synthetic data (default 1,000,000; --types: 200,000)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated data (default 0)")
    parser.add_argument("--format", choices=("parquet", "csv"), default="parquet", help="file format of the dataset plait reads")
    parser.add_argument("--partitions", type=int, default=None, help="LocalEngine num_partitions (default: auto)")
    parser.add_argument("--threads", type=int, default=None, help="LocalEngine threads (default: auto)")
    parser.add_argument("--repeat", type=int, default=3, help="measure N times; report the best and the median")
    parser.add_argument("--backend", choices=("local", "ray"), default="local", help="local (default) or ray (a local Ray instance started per run)")
    parser.add_argument("--processor", choices=("dask", "modin"), default="dask", help="the Ray backend's engine (default dask)")
    parser.add_argument("--persist", action=argparse.BooleanOptionalAction, default=True,
                        help="backend.processor.persist on Ray (default true; --no-persist streams from the source)")
    parser.add_argument("--memory-limit", type=parse_bytes, default=None,
                        help="run each measurement in a memory cgroup with this limit, e.g. 1.5GiB (needs root)")
    parser.add_argument("--out", type=Path, default=None,
                        help="JSON results (default benchmarks/out/preprocess.json; --types: preprocess_types.json)")
    parser.add_argument("--check-identity", action="store_true", help="also check output is identical with 1, 7 and auto partitions")
    parser.add_argument("--types", nargs="?", const="all", default=None,
                        help="measure each feature type's processor against a hand-written baseline instead "
                             "(all types, or a comma-separated list such as date,h3)")
    parser.add_argument("--audio-files", type=int, default=200, help="--types: WAV files of the audio type (default 200)")
    parser.add_argument("--worker", help=argparse.SUPPRESS)
    parser.add_argument("--generate", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.generate:
        spec = json.loads(args.generate)
        write_dataset(spec["rows"], spec["seed"], spec["format"])
        return 0
    if args.worker:
        print(json.dumps(worker(json.loads(args.worker))))
        return 0
    if args.types:
        args.rows = 200_000 if args.rows is None else args.rows
        if args.rows <= 0 or args.repeat <= 0 or args.audio_files <= 0:
            parser.error("--rows, --repeat and --audio-files must be positive")
        # One partition runs on one core (the engines spread partitions over the cores). Left to
        # themselves, torch's and BLAS's thread pools fight over a busy machine's cores and swing
        # the audio figures tenfold. Set before numpy and torch are first imported.
        for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ.setdefault(variable, "1")
        import preprocess_types  # here, not above: it imports this module for the generators

        return preprocess_types.run(args)
    args.rows = 1_000_000 if args.rows is None else args.rows
    args.out = args.out or OUT_DIR / "preprocess.json"
    if args.backend == "local" and (args.processor != "dask" or not args.persist):
        parser.error("--processor and --no-persist apply to --backend ray")
    if args.rows <= 0 or args.repeat <= 0 or any(v is not None and v <= 0 for v in (args.partitions, args.threads)):
        parser.error("--rows, --repeat, --partitions and --threads must be positive")

    dataset = ensure_dataset(args.rows, args.seed, args.format)
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    load_before = os.getloadavg()  # other work on the machine skews the figures; say how much there was
    cold, warm = [], []
    for i in range(args.repeat):
        cache_dir = tempfile.mkdtemp(dir=OUT_DIR, prefix="cache-")
        try:
            spec = {"dataset": str(dataset), "cache_dir": cache_dir, "partitions": args.partitions, "threads": args.threads,
                    "backend": args.backend, "processor": args.processor, "persist": args.persist,
                    "memory_limit": args.memory_limit}
            cold.append(measure({**spec, "phase": "cold"}))
            warm.append(measure({**spec, "phase": "warm"}))
        finally:
            shutil.rmtree(cache_dir, ignore_errors=True)
        if cold[-1]["from_cache"] or not warm[-1]["from_cache"]:
            raise SystemExit("the cold run hit the cache or the warm run missed it; the figures would be wrong")
        startup = f", Ray start-up {cold[-1]['startup_seconds']:.2f}s" if args.backend == "ray" else ""
        group = f", job peak {cold[-1]['cgroup_peak_mib']:.0f} MiB" if cold[-1]["cgroup_peak_mib"] else ""
        print(
            f"run {i + 1}/{args.repeat}: cold {cold[-1]['seconds']:.3f}s{startup} (driver CPU {cold[-1]['cpu_seconds']:.2f}s, "
            f"driver peak RSS {cold[-1]['peak_rss_mib']:.0f} MiB{group}), "
            f"warm {warm[-1]['seconds']:.4f}s (peak RSS {warm[-1]['peak_rss_mib']:.0f} MiB)"
        )
    for run in cold + warm:
        run.pop("entry")
    results = {
        "benchmark": "preprocess",
        "backend": args.backend,
        **({"processor": args.processor, "persist": args.persist} if args.backend == "ray" else {}),
        "memory_limit_bytes": args.memory_limit,
        "dataset": {
            "path": str(dataset.relative_to(ROOT)),
            "format": args.format,
            "rows": args.rows,
            "seed": args.seed,
            "bytes": dataset.stat().st_size,
            "arrow_bytes": arrow_bytes(dataset),
            "columns": {"number": len(NUMBER_COLUMNS), "category": len(CATEGORY_COLUMNS), "text": 1, "binary_output": 1},
        },
        "partitions": args.partitions or "auto",
        "threads": args.threads or "auto",
        "repeat": args.repeat,
        "cold": summary(cold, args.rows),
        "warm": summary(warm, args.rows),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "load_average": {"before": load_before, "after": os.getloadavg()},
    }
    if args.check_identity:
        results["identity"] = check_identity(str(dataset), identity_variants(args))
    results["machine"] = machine()  # last: it imports numpy, pyarrow and pandas into this process
    for phase in ("cold", "warm"):
        s = results[phase]
        startup = (f", with Ray start-up {s['median_rows_per_s_with_startup']:,.0f} rows/s"
                   if s["median_startup_seconds"] else "")
        job = f", job peak {s['job_peak_mib_max']:.0f} MiB" if s["job_peak_mib_max"] else ""
        print(
            f"{phase:>4}: best {s['best_seconds']:.4f}s ({s['best_rows_per_s']:,.0f} rows/s), "
            f"median {s['median_seconds']:.4f}s ({s['median_rows_per_s']:,.0f} rows/s{startup}), "
            f"driver CPU {s['best_cpu_seconds']:.3f}s, driver peak RSS {s['peak_rss_mib_max']:.0f} MiB{job}"
        )
    if "identity" in results:
        identity = results["identity"]
        verdict = "identical" if identity["identical"] else f"DIFFERENT: {', '.join(identity['mismatched'])}"
        print(f"{', '.join(identity['variants'])}: {len(identity['files'])} files {verdict}")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2) + "\n")
    print(f"wrote {args.out}")
    return 0 if results.get("identity", {}).get("identical", True) else 1


if __name__ == "__main__":
    sys.exit(main())
