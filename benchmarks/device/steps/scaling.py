"""The strong-scaling table of ``benchmarks/strong_scaling.py`` on the device's 16 cores: the local
backend on one node's cores, then Ray on 1, 2, 4 and 8 "nodes" of 2 cores each, every node a
``ray start`` pinned with taskset, for preprocessing, DDP training and batch prediction.

strong_scaling.py's own functions run here one cluster size at a time, so that each size's
figures are recorded as soon as they exist: a table cut short by the time limit keeps the
sizes it reached. The driver hides the GPU from this step (the table is of CPU cores).
Sizes are chosen for the time budget: each cluster start, and each run's own process, costs
seconds that rows do not change.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from argparse import Namespace
from pathlib import Path

from record import Recorder, StepContext

SIZES = {"full": {"nodes": [1, 2, 4, 8], "cores_per_node": 2, "rows": 200_000, "train_rows": 20_000, "epochs": 2},
         "small": {"nodes": [1, 2], "cores_per_node": 1, "rows": 20_000, "train_rows": 2_000, "epochs": 2},
         "tiny": {"nodes": [1], "cores_per_node": 1, "rows": 2_000, "train_rows": 1_000, "epochs": 2}}
RAY_LAUNCHER = """#!{python}
import sys
from ray.scripts.scripts import main
sys.exit(main())
"""
"""strong_scaling.py starts nodes with the ``ray`` beside the interpreter; where Ray came with the
carry, that script is not there, and this one is written in its place."""


def run(recorder: Recorder, context: StepContext) -> None:
    found = recorder.part("strong_scaling", measure, recorder, context, SIZES[context.size])
    if found:
        cells = []
        for workload, row in found["table"].items():
            speedups = ", ".join(f"{n}: {r['speedup_vs_1_node']:.2f}x" for n, r in row["ray"].items())
            cells.append(f"{workload} {speedups}")
        recorder.summary("; ".join(cells))


def ensure_ray_launcher() -> str:
    launcher = Path(sys.executable).parent / "ray"
    if launcher.exists():
        return "found"
    launcher.write_text(RAY_LAUNCHER.format(python=sys.executable))
    launcher.chmod(0o755)
    return f"written at {launcher}"


def measuring_order(nodes: list[int]) -> list[int]:
    """The fewest nodes, then the most, then the rest: the table's two ends come first, so that
    a step cut short by its time limit still has the speed-up that matters most."""
    ordered = sorted(nodes)
    return ordered[:1] + ordered[-1:] + ordered[1:-1] if len(ordered) > 1 else ordered


def measure(recorder: Recorder, context: StepContext, size: dict) -> dict:
    import ray_overhead
    import strong_scaling

    if shutil.which("taskset") is None:
        raise RuntimeError("taskset (util-linux) is needed to pin the Ray nodes")
    usable = sorted(os.sched_getaffinity(0))
    needed = max(size["nodes"]) * size["cores_per_node"]
    if len(usable) < needed:
        raise RuntimeError(f"{needed} cores needed, {len(usable)} usable here")
    args = Namespace(first_core=usable[0], workloads=list(strong_scaling.WORKLOADS), repeat=1, object_store_gib=1,
                     **size)
    launcher = ensure_ray_launcher()
    strong_scaling.OUT_DIR.mkdir(parents=True, exist_ok=True)
    ray_overhead.private_ray_tmpdir()
    local = strong_scaling.measure_local(args)
    recorder.set(scaling_local=local)
    ray, longest = {}, 0.0
    for nodes in measuring_order(size["nodes"]):
        # More nodes take longer to start and to run on (more processes, more workers): a size
        # is begun only with half again the longest size so far still left.
        if context.seconds_left() < 1.5 * longest + 10:
            recorder.set(scaling_cut_short=f"stopped before {nodes} nodes: {context.seconds_left():.0f} s left, "
                                           f"the longest size took {longest:.0f} s")
            break
        started = time.perf_counter()
        ray[nodes] = strong_scaling.measure_ray(nodes, args)
        longest = max(longest, time.perf_counter() - started)
        recorder.set(scaling_ray={str(n): r for n, r in sorted(ray.items())})
    ray = dict(sorted(ray.items()))
    done = Namespace(**{**vars(args), "nodes": sorted(ray)})
    table = strong_scaling.summarize(local, ray, done)
    strong_scaling.print_table(table, done)
    return {"table": table, "nodes_measured": sorted(ray), "ray_launcher": launcher,
            "parameters": {k: v for k, v in vars(args).items() if k != "workloads"}}
