"""training_statistics.json in Ludwig's layout, and runs written before it still read."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from plait.evaluation.statistics import evaluation_frequency, history_of, read_training_statistics, training_statistics

HISTORY = [
    {"epoch": 1, "step": 4, "rows": 100, "rows_per_s": 900.0, "data_wait_fraction": 0.01,
     "training": {"combined": {"loss": 0.9}}, "validation": {"y": {"loss": 0.8, "accuracy": 0.6}, "combined": {"loss": 0.8}}},
    {"epoch": 1, "step": 6, "training": {"combined": {"loss": 0.7}}},  # mid-epoch, without validation
    {"epoch": 2, "step": 8, "rows": 100, "rows_per_s": 950.0, "data_wait_fraction": 0.02,
     "training": {"combined": {"loss": 0.5}}, "validation": {"y": {"loss": 0.4, "accuracy": 0.9}, "combined": {"loss": 0.4}}},
]


def test_the_layout_is_ludwigs_with_one_value_per_evaluation_in_every_list():
    stats = training_statistics(HISTORY, {"frequency": 4.0, "period": "step"}, [{"resumed_from_step": 4}])
    assert stats["training"] == {"combined": {"loss": [0.9, 0.7, 0.5]}}
    assert stats["validation"]["y"] == {"loss": [0.8, None, 0.4], "accuracy": [0.6, None, 0.9]}
    assert stats["test"] == {} and stats["evaluation_frequency"] == {"frequency": 4.0, "period": "step"}
    assert stats["plait"]["step"] == [4, 6, 8] and stats["plait"]["rows_per_s"] == [900.0, None, 950.0]
    assert stats["plait"]["restarts"] == [{"resumed_from_step": 4}]
    assert "rows_per_s_per_worker" not in stats["plait"]  # one worker: no per-worker lists
    assert history_of(stats) == HISTORY


def test_a_run_written_before_reads_as_ludwigs_layout():
    assert read_training_statistics(HISTORY) == training_statistics(HISTORY)
    with pytest.raises(ValueError, match="not training statistics"):
        read_training_statistics({"accuracy": 1})


@pytest.mark.parametrize("trainer, expected", [
    ({}, {"frequency": 1.0, "period": "epoch"}),
    ({"steps_per_checkpoint": 50}, {"frequency": 50.0, "period": "step"}),
    ({"checkpoints_per_epoch": 4}, {"frequency": 0.25, "period": "epoch"}),
])
def test_the_evaluation_frequency_is_ludwigs(trainer, expected):
    options = SimpleNamespace(**{"steps_per_checkpoint": 0, "checkpoints_per_epoch": 0, **trainer})
    assert evaluation_frequency(options) == expected
