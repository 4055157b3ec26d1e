"""plait report: one self-contained page of a run or a search, which a browser shows without a
request, an error or a console message, with every string from the run escaped."""

from __future__ import annotations

import json
import os
import re

import pytest
import yaml

from plait.report import report_html


@pytest.fixture(scope="module")
def search_directory(tmp_path_factory):
    """A search's folder, hand-written: its statistics hold strings a page must escape."""
    folder = tmp_path_factory.mktemp("search")
    results = [{"trial_id": f"t{i}", "status": "completed", "metric_score": score, "error": None,
                "parameters": {"trainer.learning_rate": rate, "combiner.type": kind}}
               for i, (score, rate, kind) in enumerate([(0.9, 0.01, "concat"), (0.7, 0.001, "<b>tabnet</b>"),
                                                        (0.8, 0.05, "concat")])]
    results.append({"trial_id": "t3", "status": "error", "metric_score": None, "error": "<script>alert(1)</script>",
                    "parameters": {"trainer.learning_rate": 0.1, "combiner.type": "concat"}})
    stats = {"hyperopt_config": {"goal": "maximize", "metric": "accuracy", "output_feature": "y", "parameters": {
        "trainer.learning_rate": {"space": "loguniform", "lower": 0.001, "upper": 0.1},
        "combiner.type": {"space": "choice", "categories": ["concat", "<b>tabnet</b>"]}}},
        "metric": {"goal": "maximize", "metric": "accuracy", "output_feature": "y", "split": "validation"},
        "best": results[0], "hyperopt_results": results}
    (folder / "hyperopt_statistics.json").write_text(json.dumps(stats))
    (folder / "config.yaml").write_text(yaml.safe_dump({"hyperopt": {"metric": "accuracy"}}))
    return folder


@pytest.fixture(scope="module")
def run_report(classifier_run, tmp_path_factory):
    """The run's report, written by the command line after plait explain wrote into the run's
    explanations/ folder, as the README says: its path."""
    from plait.cli import main

    assert main(["explain", "--model_path", str(classifier_run / "model"), "--dataset",
                 str(classifier_run.parent.parent / "data.csv"), "--output_directory",
                 str(classifier_run / "explanations"), "--steps", "16"]) == 0
    path = tmp_path_factory.mktemp("report") / "run.html"
    assert main(["report", str(classifier_run), "--output", str(path)]) == 0
    return path


def test_a_run_report_has_each_part_with_the_test_splits_confusion_matrix(run_report, classifier_run):
    html = run_report.read_text()
    for heading in ("Run", "Config", "Data", "Learning curves", "Test results", "Feature importance", "Throughput"):
        assert f"<h2>{heading}</h2>" in html
    assert "label: confusion matrix (test split)" in html and "flag: ROC" in html and "flag: calibration" in html
    assert 'class="note"' not in html  # every part was found
    summary = json.loads((classifier_run / "explanations" / "explanation_summary.json").read_text())
    assert "<h3>label: integrated gradients (explanations/explanation_summary.json)</h3>" in html
    ranks = re.findall(r"<tr><td class=\"num\">(\d)</td><td>(\w+)</td>", html)
    assert ranks == [(str(i), name) for i, name in enumerate(summary["ranking"], start=1)]
    assert not re.search(r"""(src|href)=["'](?!data:)""", html)  # nothing outside the page


def test_a_search_report_escapes_what_the_search_wrote(search_directory):
    html = report_html(search_directory)
    assert "<h2>Trials</h2>" in html and "parallel coordinates" in html
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>tabnet</b>" not in html and "&lt;b&gt;tabnet&lt;/b&gt;" in html


def test_a_folder_that_is_no_run_is_one_error(tmp_path, cli):
    code, _, err = cli("report", tmp_path)
    assert code == 2 and err.startswith("plait: error: plait report") and "not a plait run directory" in err


CHROMIUM = "/usr/bin/chromium"
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
        "--disable-sync", "--no-first-run"]


@pytest.mark.skipif(not os.path.exists(CHROMIUM), reason=f"no Chromium at {CHROMIUM} (setup installs Debian's)")
def test_chromium_shows_both_reports_without_a_request_or_an_error(run_report, search_directory, tmp_path):
    from playwright.sync_api import sync_playwright

    from plait.report import write_report

    pages = [str(run_report), write_report(search_directory, tmp_path / "search.html")]
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=ARGS)
        try:
            for path in pages:
                page = browser.new_page(viewport={"width": 1280, "height": 900})
                events, requests = [], []
                page.on("console", lambda message: events.append(f"console {message.type}: {message.text}"))
                page.on("pageerror", lambda error: events.append(f"page error: {error}"))
                page.on("requestfailed", lambda request: events.append(f"failed: {request.url}"))
                page.on("request", lambda request: requests.append(request.url))
                url = f"file://{path}"
                page.goto(url, wait_until="load")
                images = page.eval_on_selector_all("img", "els => els.map(e => e.complete && e.naturalWidth > 0)")
                page.screenshot(path=str(tmp_path / f"{os.path.basename(path)}.png"), full_page=True)
                assert events == []
                assert [r for r in requests if not r.startswith("data:")] == [url]
                assert images and all(images)  # every figure decoded
        finally:
            browser.close()
