"""Ray on the GPU.

* train: ``train.py``'s table on a Ray Train group of one worker with ``use_gpu``: rows/s per
  epoch, and the proof that its process group is NCCL's (``NCCL_DEBUG=INFO`` written to files
  here by the worker: NCCL only writes them when it runs).
* predict: Ray Data prediction with the GPU model against the same weights predicting on Ray's
  CPUs (``use_gpu: false``): labels equal, probabilities within float tolerance. In the dry-run,
  Ray on CPU against the local backend.
* serve: ``plait serve --backend ray --gpus-per-replica 1`` in a process of its own (one replica
  on the GPU), a row's ``/predict`` answer against ``Model.predict``'s, and the median latency of
  single-row requests.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

from record import Recorder, StepContext
from steps.common import free_port

ROOT = Path(__file__).resolve().parents[3]
SIZES = {"full": {"rows": 50_000, "epochs": 2, "predict_rows": 50_000, "requests": 200},
         "small": {"rows": 5_000, "epochs": 2, "predict_rows": 5_000, "requests": 20},
         "tiny": {"rows": 1_500, "epochs": 1, "predict_rows": 500, "requests": 5}}
SEED = 42


def run(recorder: Recorder, context: StepContext) -> None:
    import logging

    logging.getLogger("plait").setLevel(logging.WARNING)
    context = recorder.context = context.needing("train", {"predict", "serve"})
    size = SIZES[context.size]
    nccl_logs = context.work / "nccl"
    nccl_logs.mkdir()
    if not context.cpu:  # before Ray starts: its workers inherit the environment
        os.environ.update(NCCL_DEBUG="INFO", NCCL_DEBUG_FILE=str(nccl_logs / "nccl.%h.%p.log"))
    state: dict = {}
    try:
        trained = recorder.part("train", train_on_ray, context, size, nccl_logs, state)
        predicted = recorder.part("predict", compare_predictions, context, size, state)
    finally:
        if "model" in state:
            state["model"].close()  # this process's Ray goes before serve starts its own
    served = recorder.part("serve", serve_replica, context, size, state)
    notes = []
    if trained:
        notes.append(f"train {trained['rows_per_s']:,.0f} rows/s on {trained['device']} ({trained['process_group']})")
    if predicted:
        notes.append(f"predictions {'equal' if predicted['labels_equal'] else 'DIFFER'}")
    if served:
        notes.append(f"serve p50 {served['latency_ms_p50']:.1f} ms")
    recorder.summary("; ".join(notes))


def ray_config(context: StepContext, size: dict, use_gpu: bool) -> dict:
    import train  # benchmarks/train.py

    config = train.make_config(size["epochs"], 256, str(context.work / "cache"))
    config["trainer"].update(early_stop=-1)
    config["backend"] = {"type": "ray", "cache_dir": str(context.work / "cache"),
                         "trainer": {"num_workers": 1, "use_gpu": use_gpu, "strategy": "ddp"}}
    return config


def train_on_ray(context: StepContext, size: dict, nccl_logs: Path, state: dict) -> dict:
    import train

    from plait import Model

    frame = train.make_data(size["rows"], SEED)
    model = Model(ray_config(context, size, use_gpu=not context.cpu))
    state.update(model=model, frame=frame)
    started = time.perf_counter()
    result = model.train(dataset=frame, random_seed=SEED, progress_bar=False)
    figures = train.epoch_figures(result.training_statistics)
    # NCCL writes its INFO lines to NCCL_DEBUG_FILE, or to the worker's stdout (Ray's session logs).
    ray_logs = Path(os.environ["RAY_TMPDIR"]).glob("ray/session_*/logs/worker*") if "RAY_TMPDIR" in os.environ else []
    logs = [*nccl_logs.glob("nccl.*.log"), *ray_logs]
    nccl = sum(p.read_text(errors="replace").count("NCCL INFO") for p in logs if p.is_file())
    if not context.cpu and not nccl:
        raise RuntimeError(f"no NCCL INFO line in {nccl_logs} or Ray's worker logs: the worker's process group "
                           "is not NCCL's, or it ran no collective")
    return {"device": "cpu" if context.cpu else "cuda", "process_group": "gloo" if context.cpu else "nccl",
            "nccl_info_lines": nccl, "train_call_s": round(time.perf_counter() - started, 1),
            "rows_per_s": round(figures["rows_per_s"]), "data_wait_fraction": figures["data_wait_fraction"],
            "validation": result.training_statistics[-1].get("validation", {}).get(train.OUTPUT_COLUMN)}


def twin(model, config: dict):
    """The same weights and metadata under another config (its backend)."""
    from plait import Model

    other = Model(config)
    other.metadata, other.module = model.metadata, model.module
    return other


def compare_predictions(context: StepContext, size: dict, state: dict) -> dict:
    import numpy as np
    import train

    model = state["model"]
    frame = train.make_data(size["predict_rows"], SEED + 1, with_label=False)
    reference = twin(model, {**ray_config(context, size, False), "backend": {"type": "local"}}) if context.cpu \
        else twin(model, ray_config(context, size, use_gpu=False))
    started = time.perf_counter()
    got = model.predict(frame)
    seconds = time.perf_counter() - started
    started = time.perf_counter()
    expected = reference.predict(frame)
    reference_seconds = time.perf_counter() - started
    label = f"{train.OUTPUT_COLUMN}_predictions"
    numbers = [c for c in got.columns if c != label]
    difference = max((float(np.max(np.abs(got[c].to_numpy(float) - expected[c].to_numpy(float)))) for c in numbers), default=0.0)
    equal = bool((got[label] == expected[label]).all())
    result = {"rows": len(frame), "on": "cpu (ray)" if context.cpu else "gpu (ray data)",
              "against": "local backend" if context.cpu else "cpu (ray data)", "rows_per_s": round(len(frame) / seconds),
              "reference_rows_per_s": round(len(frame) / reference_seconds), "labels_equal": equal,
              "max_abs_difference": difference}
    if not equal or difference > 1e-4:
        raise AssertionError(f"predictions differ: {result}")
    state["expected"] = expected
    return result


def serve_replica(context: StepContext, size: dict, state: dict) -> dict:
    import requests
    import train

    model = state["model"]
    folder = context.work / "model"
    model.save(folder)
    rows = train.make_data(size["requests"], SEED + 2, with_label=False)
    local = twin(model, {**ray_config(context, size, False), "backend": {"type": "local"}}).predict(rows)
    port = free_port()
    command = [sys.executable, "-m", "plait", "serve", "--model-path", str(folder), "--backend", "ray", "--port", str(port),
               "--num-replicas", "1", "--gpus-per-replica", "0" if context.cpu else "1", "--cpus-per-replica", "1"]
    server = subprocess.Popen(command, cwd=ROOT, start_new_session=True)
    answers, latencies = [], []
    try:
        url = f"http://127.0.0.1:{port}"
        started = time.perf_counter()
        wait_for(url + "/", server, context)
        start_s = time.perf_counter() - started
        for _, row in rows.iterrows():
            started = time.perf_counter()
            answer = requests.post(f"{url}/predict", json=row.where(row.notna(), None).to_dict(), timeout=30)
            latencies.append(1000 * (time.perf_counter() - started))
            answer.raise_for_status()
            answers.append(answer.json())
    finally:  # what was measured must be recorded before the step's limit: Serve's shutdown is slow
        stop(server, grace_s=min(30, max(1, context.seconds_left() - 10)))
    label = f"{train.OUTPUT_COLUMN}_predictions"
    matching = sum(a[label] == b for a, b in zip(answers, local[label]))
    result = {"replica": "cpu" if context.cpu else "1 GPU", "start_s": round(start_s, 1), "requests": len(answers),
              "latency_ms_p50": round(statistics.median(latencies), 2), "latency_ms_max": round(max(latencies), 2),
              "labels_as_local_predict": f"{matching}/{len(answers)}"}
    if matching != len(answers):
        raise AssertionError(f"served labels differ from Model.predict's: {result}")
    return result


def wait_for(url: str, server: subprocess.Popen, context: StepContext) -> None:
    import requests

    deadline = time.monotonic() + min(120, max(30, context.seconds_left() - 10))
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise RuntimeError(f"plait serve exited with {server.returncode} before answering")
        try:
            if requests.get(url, timeout=5).status_code == 200:
                return
        except requests.RequestException:  # not listening yet, or too busy starting to answer
            pass
        time.sleep(0.5)
    raise TimeoutError(f"plait serve did not answer at {url} in time")


def stop(server: subprocess.Popen, grace_s: float = 30) -> None:
    """SIGTERM (plait serve removes its application and stops its Ray), then after ``grace_s``
    SIGKILL, by group id."""
    for sig, wait in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5)):
        try:
            os.killpg(server.pid, sig)
            server.wait(timeout=wait)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue
