"""The device check: plait on a GPU and on 16 cores, in one command of at most 9 minutes.

    python3 benchmarks/device/check.py --out $OUT                      # on the device (README.md)
    .venv/bin/python benchmarks/device/check.py --cpu                  # the dry-run here
    python3 benchmarks/device/check.py --out $OUT --steps ray.serve,llm.qlora_plain   # only these

Each step runs in a process of its own with a time limit (``STEPS``' budgets, on an H200 with
16 cores, plus what the steps before it left unused; three times as long with ``--cpu``), so
that a hang, a crash of the CUDA driver or a Ray cluster that never schedules costs one step,
not the call. A step is made of parts; a part that fails records its error and traceback and
the step goes on; a step that runs out of time is killed, and what its parts recorded before
stays. ``device_check.json`` is rewritten after every step, ``device_check.log`` holds
everything the steps printed, and a table of the steps ends the output.

With ``--cpu`` the GPU-only parts are skipped with their reason and the rest runs at a small
size; the probes step then checks what plait would choose with CUDA present (device, NCCL,
dtypes, GPU resources on Ray).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE))

from record import Recorder, StepContext, failure, write_json  # noqa: E402

DEFAULT_OUT = ROOT / "benchmarks" / "out"
CPU_SLOWDOWN = 3.0
"""The CPU dry-run's budgets are the device's times this (small sizes on 2 cores)."""
DEVICE_BUDGET_S = 520
"""The whole check on the device: under 9 minutes, inside `timeout 560` and the device tool's 10-minute command."""


@dataclass(frozen=True)
class Step:
    name: str
    budget_s: float
    """Seconds on the device (an H200 with 16 cores); the step is killed after them."""
    parts: tuple[str, ...]
    module: str = ""
    """The module of ``steps/`` that runs it (default: the step's name)."""
    by_default: bool = True
    """Whether a check without ``--steps`` runs it (scaling needs a call of its own)."""


STEPS = (
    Step("env", 45, ("versions", "gpu", "ranges", "api")),
    Step("probes", 15, ("local_device", "launched_device", "process_group", "autocast", "fp16", "ray_train_plan",
                        "ray_data_plan", "serve_replica")),
    Step("ecd", 80, ("wine", "synthetic", "precision")),
    Step("pytest_gpu", 90, ("pytest",)),
    Step("ray", 150, ("train", "predict", "serve"), module="ray_backend"),
    Step("strategies", 80, ("ddp", "fsdp", "zero2", "zero3")),
    Step("llm", 55, ("write_model", "lora_plain", "lora_plain_fp32", "lora_plait", "qlora_plain", "qlora_plait")),
    Step("scaling", 420, ("strong_scaling",), by_default=False),
)
"""In the order they run (the GPU first, the CPU table last). What each measures: README.md's
table (checked against these budgets and parts) and each module's docstring. The budgets are
what the first H200 run took (2026-11-27), with a margin; the scaling table takes a call of its
own (``--steps scaling``): its one-node column alone took 174 s there."""
STEP_NAMES = tuple(s.name for s in STEPS)


# ---- the driver --------------------------------------------------------------------------------------

def selection(text: str | None) -> dict[str, frozenset[str] | None]:
    """``--steps``: step names (every part) or ``step.part`` names, comma-separated."""
    if not text:
        return {s.name: None for s in STEPS if s.by_default}
    known = {s.name: s for s in STEPS}
    chosen: dict[str, set[str] | None] = {}
    for item in filter(None, (t.strip() for t in text.split(","))):
        name, _, part = item.partition(".")
        if name not in known:
            raise SystemExit(f"check: unknown step {name!r}; the steps are {', '.join(STEP_NAMES)}")
        if part and part not in known[name].parts:
            raise SystemExit(f"check: step {name} has no part {part!r}; its parts are {', '.join(known[name].parts)}")
        if not part:
            chosen[name] = None
        elif chosen.get(name, set()) is not None:
            chosen.setdefault(name, set()).add(part)
    return {s.name: (None if chosen[s.name] is None else frozenset(chosen[s.name])) for s in STEPS if s.name in chosen}


def step_environment(step: Step, args, ray_tmp: str) -> dict:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_TMPDIR": ray_tmp, "TOKENIZERS_PARALLELISM": "false"}
    paths = [str(ROOT), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    env["PYTHONPATH"] = os.pathsep.join(dict.fromkeys(paths))  # `import plait` without installing it
    if args.cpu or step.name == "scaling":  # the scaling table is of CPU cores: no worker may take the GPU
        env["CUDA_VISIBLE_DEVICES"] = ""
    return env


def run_step(step: Step, parts, args, log, seconds: float) -> dict:
    """The step in its own process group, killed after ``seconds``; its recorded result."""
    work = Path(tempfile.mkdtemp(prefix=f"dk-{step.name}-"))
    ray_tmp = tempfile.mkdtemp(prefix="dk-", dir="/tmp")  # Ray's socket paths must stay short
    result_path = work / "result.json"
    command = [sys.executable, str(Path(__file__)), "--child", step.name, "--result", str(result_path),
               "--size", args.size, "--work", str(work), "--seconds", f"{seconds:.0f}"]
    command += ["--cpu"] if args.cpu else []
    command += ["--parts", ",".join(sorted(parts))] if parts else []
    log.write(f"\n===== step {step.name} ({time.strftime('%H:%M:%S')}, limit {seconds:.0f} s) =====\n")
    log.flush()
    started = time.perf_counter()
    child = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
                             env=step_environment(step, args, ray_tmp))
    status = "ok"
    try:
        code = child.wait(timeout=seconds)
    except subprocess.TimeoutExpired:
        code, status = None, "timeout"
        stop_group(child)
    except KeyboardInterrupt:  # Ctrl-C, or the command's own timeout (SIGTERM, see drive)
        code, status = None, "interrupted"
        stop_group(child)
    outcome = read_result(result_path)
    outcome.update(seconds=round(time.perf_counter() - started, 1), exit_code=code)
    if status == "ok" and code != 0:
        status = "failed"
    if status == "ok" and any(p.get("status") == "failed" for p in outcome.get("parts", {}).values()):
        status = "partial"
    outcome["status"] = status
    for folder in (work, ray_tmp):
        shutil.rmtree(folder, ignore_errors=True)
    return outcome


def stop_group(child: subprocess.Popen) -> None:
    """End the step's process group (the step and what it started: Ray, workers) by its id."""
    for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 5)):
        try:
            os.killpg(child.pid, sig)
        except ProcessLookupError:
            return
        try:
            child.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def read_result(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return {"parts": {}}


def interrupt(*_) -> None:
    raise KeyboardInterrupt


def drive(args) -> int:
    """The chosen steps one after the other; stopped from outside (SIGTERM, Ctrl-C), it ends the
    step running, records what it had and prints the table."""
    signal.signal(signal.SIGTERM, interrupt)
    chosen = selection(args.steps)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = {"kit": "benchmarks/device/check.py", "mode": "cpu" if args.cpu else "gpu", "size": args.size,
              "command": sys.argv, "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "budget_s": args.budget,
              "steps": {}}
    started = time.monotonic()
    selected = [s for s in STEPS if s.name in chosen]
    with (out / "device_check.log").open("w") as log:
        for index, step in enumerate(selected):
            left = args.budget - (time.monotonic() - started)
            # What the steps after this one are owed; this one gets the rest (its budget and what
            # the earlier steps left unused), and at least its budget while time is left.
            owed = sum(s.budget_s for s in selected[index + 1:]) * args.slowdown
            seconds = min(left, max(left - owed, step.budget_s * args.slowdown))
            if seconds < 10:
                report["steps"][step.name] = {"status": "skipped", "reason": f"out of time ({args.budget:.0f} s in all)"}
                continue
            print(f"[{time.monotonic() - started:5.0f} s] {step.name} (at most {seconds:.0f} s) ...", flush=True)
            report["steps"][step.name] = run_step(step, chosen[step.name], args, log, seconds)
            report["seconds"] = round(time.monotonic() - started, 1)
            write_json(out / "device_check.json", report)
            if report["steps"][step.name]["status"] == "interrupted":
                break
    report["seconds"] = round(time.monotonic() - started, 1)
    write_json(out / "device_check.json", report)
    print_table(report)
    print(f"wrote {out / 'device_check.json'} and {out / 'device_check.log'}")
    return 0 if all(s["status"] in ("ok", "skipped") for s in report["steps"].values()) else 1


def print_table(report: dict) -> None:
    print(f"\ndevice check ({report['mode']}, size {report['size']}): {report['seconds']:.0f} s of {report['budget_s']:.0f}")
    print(f"  {'step':11} {'status':11} {'seconds':>8}  summary")
    for name, step in report["steps"].items():
        parts = step.get("parts", {})
        bad = [f"{p} {v['status']}" for p, v in parts.items() if v.get("status") in ("failed", "running")]
        skipped = [p for p, v in parts.items() if v.get("status") == "skipped"]
        text = step.get("summary") or step.get("reason") or step.get("error", "")
        notes = "; ".join(filter(None, [text, ", ".join(bad), f"skipped: {', '.join(skipped)}" if skipped else ""]))
        print(f"  {name:11} {step['status']:11} {step.get('seconds', 0):>8.1f}  {notes[:220]}")


# ---- a step's own process ------------------------------------------------------------------------------

def child(args) -> int:
    """Run one step's parts (``steps/<name>.py``'s ``run``), recording as it goes."""
    sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
    # The driver's SIGTERM at the time limit unwinds the step, so that what it started is stopped
    # on the way out (a Ray cluster's nodes, a server): they would outlive a plain kill.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    context = StepContext(cpu=args.cpu, size=args.size, work=Path(args.work),
                          deadline=time.monotonic() + float(args.seconds) - 5,
                          parts=frozenset(args.parts.split(",")) if args.parts else None)
    recorder = Recorder(Path(args.result), context)
    recorder.set(parts={})
    try:
        import importlib

        step = next(s for s in STEPS if s.name == args.child)
        importlib.import_module(f"steps.{step.module or step.name}").run(recorder, context)
    except Exception as error:  # noqa: BLE001 (recorded for the driver, which reports it)
        recorder.set(**failure(error))
        print(recorder.data["traceback"], file=sys.stderr)
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(DEFAULT_OUT), help="where device_check.json and .log go (default benchmarks/out)")
    parser.add_argument("--cpu", action="store_true", help="the dry-run on CPU: GPU-only parts skipped, small sizes")
    parser.add_argument("--steps", help=f"steps or step.part names, comma-separated (steps: {', '.join(STEP_NAMES)})")
    parser.add_argument("--size", choices=("full", "small", "tiny"), help="default: full, or small with --cpu")
    parser.add_argument("--budget", type=float, help="seconds for all the chosen steps (default: the sum of their budgets, "
                                                     f"{DEVICE_BUDGET_S} at most on the device, times --slowdown)")
    parser.add_argument("--slowdown", type=float, help=f"the steps' budgets times this (default 1, or {CPU_SLOWDOWN:g} with --cpu)")
    parser.add_argument("--child", choices=STEP_NAMES, help=argparse.SUPPRESS)
    for hidden in ("--result", "--work", "--seconds", "--parts"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.size = args.size or ("small" if args.cpu else "full")
    args.slowdown = args.slowdown or (CPU_SLOWDOWN if args.cpu else 1.0)
    chosen_budget = sum(s.budget_s for s in STEPS if s.name in selection(args.steps)) * args.slowdown
    args.budget = args.budget or min(chosen_budget, DEVICE_BUDGET_S * args.slowdown)
    return child(args) if args.child else drive(args)


if __name__ == "__main__":
    sys.exit(main())
