"""Comet offline: the archive ``comet upload`` would send, read as it is written (a zip of
JSON messages)."""

from __future__ import annotations

import json
import zipfile

import pytest

pytest.importorskip("comet_ml")


def messages(archive: zipfile.ZipFile) -> list[dict]:
    found = []
    for name in archive.namelist():
        if name.endswith("messages.json"):
            found += [json.loads(line) for line in archive.read(name).decode().splitlines() if line.strip()]
    return found


def test_an_offline_archive_holds_the_config_every_evaluation_and_the_model(tracked_experiment):
    run_dir = tracked_experiment.run_dir
    key = json.loads((run_dir / "tracking.json").read_text())["comet"]["run_id"]
    with zipfile.ZipFile(tracked_experiment.out / "comet" / f"{key}.zip") as archive:
        names, logged = archive.namelist(), messages(archive)
    payloads = [m.get("payload", m) for m in logged]
    parameters = {p["param"]["paramName"]: p["param"]["paramValue"] for p in payloads if "param" in p}
    assert parameters["trainer.epochs"] == "2"
    accuracy = [(p["metric"]["step"], p["metric"]["metricValue"]) for p in payloads
                if "metric" in p and p["metric"]["metricName"] == "validation/y/accuracy"]
    statistics = json.loads((run_dir / "training_statistics.json").read_text())
    assert [float(value) for _, value in accuracy] == pytest.approx(statistics["validation"]["y"]["accuracy"])
    assets = " ".join(names)
    for name in ["config.yaml", "training_statistics.json", "test_statistics.json",
                 *[p.name for p in (run_dir / "model").iterdir()]]:
        assert name in assets or any(name in json.dumps(p) for p in payloads), name
