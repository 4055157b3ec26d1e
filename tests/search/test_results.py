"""A trial's record when Tune has none of its reports (the time budget ended the search while
the trial reported): its own run directory still holds its evaluations."""

from plait.api import Model
from plait.search.results import _own_history
from plait.run_directory import RunDirectory


def test_a_trial_without_reports_in_tune_is_scored_from_its_last_checkpoint(search_config, table, tmp_path):
    config = search_config({})
    config.pop("hyperopt")
    Model(config).train(table, run_dir=tmp_path / "trial", progress_bar=False)
    history = _own_history(RunDirectory(tmp_path / "trial"), ("validation", "y", "accuracy"))
    assert [h["epoch"] for h in history] == [1, 2]
    assert all(0 <= h["metric_score"] <= 1 for h in history)
