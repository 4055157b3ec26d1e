"""ECD training on the GPU.

* wine: the README's example (examples/wine), trained and tested as ``plait experiment`` does.
* synthetic: ``benchmarks/train.py``'s table (200,000 rows, 3 epochs, batch 256 on the device),
  plait's ``Trainer.fit`` (evaluation excluded, as train.py times it) against the same
  hand-written loop moved to the GPU: the whole table on the device, a permutation, one
  ``index_select`` per column, forward, loss, backward, clip, Adam. Both read ``loss.item()``
  every step, as plait does (it checks the loss is finite). Interleaved, best of ``repeat`` (one
  on the device, where the wine part has initialised CUDA and cuBLAS already).
* precision: bf16 autocast and fp16 autocast with a gradient scaler against fp32, each trained
  from the same initial weights, the test split's accuracy and loss compared. plait runs bf16
  (``use_mixed_precision``) and fp16 where its config takes it (see probes.py); the hand loop
  runs all three. "Within noise": accuracy within 3 binomial standard errors of the test split
  (at least 0.005) and loss within 2%.
"""

from __future__ import annotations

import math
import time
from pathlib import Path

from record import Recorder, StepContext
from steps.common import device_for, synchronize

ROOT = Path(__file__).resolve().parents[3]
SIZES = {"full": {"rows": 200_000, "epochs": 3, "repeat": 1},  # the wine part has warmed CUDA up
         "small": {"rows": 20_000, "epochs": 2, "repeat": 1},
         "tiny": {"rows": 1_000, "epochs": 1, "repeat": 1}}
BATCH_SIZE = 256
SEED = 42
SPLIT = [0.9, 0.05, 0.05]
"""A test split of 10,000 rows at 200,000: its accuracy has a standard error of about 0.005."""
PRECISIONS = {"fp32": None, "bf16": "bfloat16", "fp16": "float16"}


def run(recorder: Recorder, context: StepContext) -> None:
    import logging

    logging.getLogger("plait").setLevel(logging.WARNING)
    size = SIZES[context.size]
    wine = recorder.part("wine", train_wine, context)
    speed = recorder.part("synthetic", compare_loops, context, size)
    precision = recorder.part("precision", compare_precisions, context, size)
    notes = []
    if wine:
        notes.append(f"wine acc {wine['test_accuracy']:.3f}")
    if speed:
        notes.append(f"plait {speed['plait_rows_per_s']:,.0f} rows/s = {speed['ratio']:.2f}x hand loop")
    if precision:
        notes.append("precisions within noise" if precision["all_within_noise"] else "precisions differ beyond noise")
    recorder.summary("; ".join(notes))


def train_wine(context: StepContext) -> dict:
    from plait import Model

    config = Model(str(ROOT / "examples/wine/config.yaml")).config.model_dump(mode="json", exclude_none=True)
    config["backend"] = {"type": "local", "cache_dir": str(context.work / "wine-cache")}
    started = time.perf_counter()
    model = Model(config)
    result = model.train(dataset=str(ROOT / "examples/wine/wine.csv"), progress_bar=False)
    seconds = time.perf_counter() - started
    test = model.evaluate(str(ROOT / "examples/wine/wine.csv"), split="test")["cultivar"]
    return {"device": "cpu" if context.cpu else "cuda", "train_s": round(seconds, 2),
            "epochs": len(result.training_statistics), "test_accuracy": test["accuracy"], "test_loss": test["loss"]}


# ---- the synthetic table --------------------------------------------------------------------------------

def synthetic(context: StepContext, size: dict, trainer: dict | None = None) -> tuple:
    """train.py's data and config (its split made larger for the test), with ``trainer`` settings."""
    import train  # benchmarks/train.py

    frame = train.make_data(size["rows"], SEED)
    config = train.make_config(size["epochs"], BATCH_SIZE, str(context.work / "cache"))
    config["preprocessing"]["split"]["probabilities"] = SPLIT
    config["trainer"].update(trainer or {})
    return frame, config


def compare_loops(context: StepContext, size: dict) -> dict:
    import train

    device = device_for(context)
    frame, config = synthetic(context, size)
    plait_runs, hand_runs = [], []
    for _ in range(size["repeat"]):
        model, result, run = train.train_plait(frame, config, SEED)
        plait_runs.append(run)
        hand_runs.append(hand_loop(model, result.preprocessed, device, size["epochs"], None))
    rows = result.preprocessed.rows("training") * size["epochs"]
    plait_speed = rows / min(r["training_s"] for r in plait_runs)
    hand_speed = rows / min(r["training_s"] for r in hand_runs)
    return {"device": device.type, "rows": result.preprocessed.rows("training"), "epochs": size["epochs"],
            "batch_size": BATCH_SIZE, "plait_rows_per_s": round(plait_speed), "hand_rows_per_s": round(hand_speed),
            "ratio": round(plait_speed / hand_speed, 3),
            "plait_fit_rows_per_s": round(rows / min(r["fit_s"] for r in plait_runs)),
            "final_losses": {"plait": plait_runs[0]["epoch_losses"][-1], "hand": hand_runs[0]["epoch_losses"][-1]}}


def hand_loop(model, data, device, epochs: int, precision: str | None) -> dict:
    """train.py's hand-written loop on ``device``, with autocast in ``precision`` (and a gradient
    scaler for float16). The plait ``model`` gives the config, metadata and test harness."""
    import torch

    from plait.data.tensors import table_tensors
    from plait.models.ecd import ECD
    from plait.training.run import seed_everything
    from plait.training.schedule import learning_rate

    trainer = model.config.trainer
    seed_everything(SEED)
    module = ECD(model.config, model.metadata).to(device)
    names = module.input_names + module.output_names
    tensors = {n: t.to(device) for n, t in table_tensors(data.read_split("training"), model.metadata["features"], names).items()}
    rows = len(tensors[names[0]])
    opt = trainer.optimizer
    optimizer = torch.optim.Adam(module.parameters(), lr=learning_rate(trainer, world_size=1), betas=opt.betas,
                                 eps=opt.eps, weight_decay=opt.weight_decay)
    dtype = getattr(torch, precision) if precision else None
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "float16")
    module.train()
    losses, seconds = [], 0.0
    for epoch in range(epochs):
        synchronize(device)
        started = time.perf_counter()
        order = torch.randperm(rows, generator=torch.Generator().manual_seed(SEED * 100_003 + epoch)).to(device)
        total, steps = 0.0, 0
        for first in range(0, rows, BATCH_SIZE):
            batch = {n: t.index_select(0, order[first:first + BATCH_SIZE]) for n, t in tensors.items()}
            with torch.autocast(device.type, dtype=dtype, enabled=dtype is not None):
                logits = module({n: batch[n] for n in module.input_names})
            loss, _ = module.loss(logits, {n: batch[n] for n in module.output_names})
            scaler.scale(loss).backward()
            scaler.unscale_(optimizer)  # the clip sees the true gradients
            torch.nn.utils.clip_grad_norm_(module.parameters(), trainer.gradient_clipping.clipglobalnorm)
            scaler.step(optimizer)
            scaler.update()
            optimizer.zero_grad(set_to_none=True)
            total, steps = total + loss.item(), steps + 1
        synchronize(device)
        seconds += time.perf_counter() - started
        losses.append(total / steps)
    return {"training_s": seconds, "epoch_losses": losses, "module": module}


# ---- precisions -------------------------------------------------------------------------------------------

def compare_precisions(context: StepContext, size: dict) -> dict:
    from steps.probes import FP16_SETTING

    device = device_for(context)
    runs = {}
    plait_fp16 = _plait_takes_fp16()
    for name, dtype in PRECISIONS.items():
        settings = {"fp32": {}, "bf16": {"use_mixed_precision": True}, "fp16": FP16_SETTING}[name]
        if name != "fp16" or plait_fp16:
            runs[f"plait_{name}"] = plait_run(context, size, settings)
        runs[f"hand_{name}"] = hand_run(runs["plait_fp32"]["model"], device, size, dtype)
    checks = {name: within_noise(run, runs[name.split("_")[0] + "_fp32"]) for name, run in runs.items()
              if not name.endswith("fp32")}
    table = {name: {k: v for k, v in run.items() if k != "model"} for name, run in runs.items()}
    notes = {} if plait_fp16 else {"plait_fp16": "not run: plait's trainer has no fp16 autocast yet "
                                                "(benchmarks/device/PROPOSED_PLAIT_CHANGES.md)"}
    return {"device": device.type, "runs": table, "within_noise": checks, "all_within_noise": all(checks.values()),
            **notes}


def _plait_takes_fp16() -> bool:
    from plait.config import load_config
    from plait.errors import ConfigError
    from steps.probes import FP16_SETTING

    try:
        load_config({"input_features": [{"name": "x", "type": "number"}],
                     "output_features": [{"name": "y", "type": "binary"}], "trainer": FP16_SETTING})
        return True
    except ConfigError:
        return False


def plait_run(context: StepContext, size: dict, settings: dict) -> dict:
    import train

    frame, config = synthetic(context, size, settings)
    model, result, run = train.train_plait(frame, config, SEED)
    rows = result.preprocessed.rows("training") * size["epochs"]
    return {"model": model, "rows_per_s": round(rows / run["training_s"]), "final_loss": run["epoch_losses"][-1],
            **test_metrics(model, frame)}


def hand_run(model, device, size: dict, dtype: str | None) -> dict:
    """The hand loop in ``dtype``; its weights then tested through the plait model's harness
    (the plait model's own weights are put back afterwards)."""
    import train

    frame = train.make_data(size["rows"], SEED)
    data = model.preprocess(frame, random_seed=SEED)  # a cache hit: the plait run preprocessed it
    own = {k: v.clone() for k, v in model.module.state_dict().items()}
    run = hand_loop(model, data, device, size["epochs"], dtype)
    model.module.load_state_dict(run.pop("module").state_dict())
    try:
        metrics = test_metrics(model, frame)
    finally:
        model.module.load_state_dict(own)
    rows = data.rows("training") * size["epochs"]
    return {"rows_per_s": round(rows / run["training_s"]), "final_loss": run["epoch_losses"][-1], **metrics}


def test_metrics(model, frame) -> dict:
    import train

    found = model.evaluate(frame, split="test", random_seed=SEED)[train.OUTPUT_COLUMN]
    return {"test_accuracy": round(found["accuracy"], 5), "test_loss": round(found["loss"], 5),
            "test_rows": int(round(len(frame) * SPLIT[2]))}


def within_noise(run: dict, reference: dict) -> bool:
    p, n = reference["test_accuracy"], max(1, reference["test_rows"])
    tolerance = max(0.005, 3 * math.sqrt(p * (1 - p) / n))
    return abs(run["test_accuracy"] - p) <= tolerance and abs(run["test_loss"] / reference["test_loss"] - 1) <= 0.02
