"""What training shows a person: the log line of each evaluation."""

from __future__ import annotations

from plait.training.reporting import log_line


def test_the_log_line_shows_progress_speed_and_the_main_metrics_of_each_output():
    record = {"epoch": 2, "step": 18, "training": {"combined": {"loss": 0.31204}}, "rows": 5000,
              "rows_per_s": 5120.4, "data_wait_fraction": 0.0123,
              "validation": {"y": {"loss": 0.25, "accuracy": 0.9, "precision": 0.8},
                             "combined": {"loss": 0.25}}}
    assert log_line(record) == ("epoch 2 | step 18 | train loss 0.3120 | 5,120 rows/s, 1.2% waiting on data"
                                " | y: loss 0.2500, accuracy 0.9000")


def test_without_speed_or_validation_the_line_has_progress_and_the_training_loss():
    assert log_line({"epoch": 1, "step": 9, "training": {"combined": {"loss": 0.5}}}) == "epoch 1 | step 9 | train loss 0.5000"
