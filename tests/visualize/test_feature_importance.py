"""feature_importance: plait explain's summaries (of either method, written by Explanation.write)
drawn as bars whose order, lengths and title a reader sees."""

from __future__ import annotations

import json

import pytest

from plait.explain import SUMMARY_FILE, Explanation
from plait.visualize import importance, inputs

IG_SUMMARY = {"method": "ig", "output_feature": "y", "inputs": ["x0", "x1", "c0"],
              "explained": "the predicted class", "steps": 50,
              "baselines": {"x0": "0 (the mean)", "x1": "0 (the mean)", "c0": "the unknown value <UNK>"},
              "importance": {"x0": 0.21, "x1": 0.01, "c0": 0.34}, "ranking": ["c0", "x0", "x1"],
              "rows": 200, "max_abs_delta": 0.001}
PERMUTATION_SUMMARY = {"method": "permutation", "output_feature": "z", "inputs": ["x0", "x1", "c0"],
                       "metric": "loss", "reference": 0.4, "repeats": 3,
                       "importance": {"x0": 0.05, "x1": -0.002, "c0": 0.3}, "ranking": ["c0", "x0", "x1"]}


@pytest.mark.parametrize("summary, written", [(IG_SUMMARY, "feature_importance_ig_y.png"),
                                              (PERMUTATION_SUMMARY, "feature_importance_permutation_z.png")])
def test_the_cli_draws_a_summary_plait_explain_wrote(summary, written, cli, tmp_path):
    paths = Explanation(dict(summary)).write(tmp_path / "explained")
    code, out, err = cli("visualize", "-v", "feature_importance", "--explanation_summary", paths["summary"],
                         "-od", tmp_path / "figures", "-ff", "png")
    assert code == 0, err
    assert json.loads(out)["files"] == [str(tmp_path / "figures" / written)]
    assert (tmp_path / "figures" / written).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")


@pytest.mark.parametrize("summary, title, axis", [
    (IG_SUMMARY, "Feature importance of y: integrated gradients", "mean |integrated gradients attribution|"),
    (PERMUTATION_SUMMARY, "Feature importance of z: permutation importance", "worsening of loss when the input"),
])
def test_the_largest_bar_is_on_top_with_the_method_and_output_in_the_title(summary, title, axis):
    fig = importance.draw_importance(summary)
    ax = fig.axes[0]
    bars = sorted(ax.patches, key=lambda bar: -bar.get_y())  # top first
    names = [label.get_text() for label in sorted(ax.get_yticklabels(), key=lambda label: -label.get_position()[1])]
    assert names == summary["ranking"]
    assert [bar.get_width() for bar in bars] == pytest.approx([summary["importance"][n] for n in summary["ranking"]])
    assert ax.get_title() == title and ax.get_xlabel().startswith(axis)


def test_a_run_directory_or_the_file_is_read_and_the_name_is_plait_explains(tmp_path):
    assert inputs.EXPLANATION_SUMMARY == SUMMARY_FILE
    Explanation(dict(IG_SUMMARY)).write(tmp_path)
    assert inputs.explanation_summary(tmp_path) == inputs.explanation_summary(tmp_path / SUMMARY_FILE) == IG_SUMMARY
