"""What several distributed tests share: one run of the rule on Ray Train with two ddp workers.

Ray Train costs about 20 s a run on this machine before it trains a step; the tests that need
this run (two ddp workers learn the rule; torchrun trains as Ray ddp does) share one.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from distributed_rule import rule_config, rule_data  # a module beside this file


@pytest.fixture(scope="session")
def ray_ddp_rule_run(tmp_path_factory, ray_cluster):
    """The rule (rule_config, two workers, ddp, 6 epochs) trained on Ray Train into a run
    directory: .model, .result, .run_dir, .accuracy (on the test split) and .recorder (the
    callbacks the run called, tests/recorder.py)."""
    from plait import Model
    from recorder import Recorder

    folder = tmp_path_factory.mktemp("ray-ddp-rule")
    config = rule_config(folder, workers=2)
    config["backend"]["trainer"]["strategy"] = "ddp"
    recorder = Recorder()
    model = Model(config, callbacks=[recorder])
    result = model.train(dataset=rule_data(), run_dir=folder / "run", progress_bar=False)
    accuracy = model.evaluate(rule_data(), split="test")["y"]["accuracy"]
    return SimpleNamespace(model=model, result=result, run_dir=folder / "run", accuracy=accuracy, recorder=recorder)
