"""The tests marked ``gpu`` (``pytest -m gpu``), only the files that hold such tests: collecting
the whole suite would import what the device lacks (moto, boto3...) for nothing. Without CUDA
they must skip cleanly, which the dry-run checks."""

from __future__ import annotations

import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from record import Recorder, StepContext

ROOT = Path(__file__).resolve().parents[3]
MARKER = "pytest.mark.gpu"


def run(recorder: Recorder, context: StepContext) -> None:
    found = recorder.part("pytest", run_marked, context)
    if found:
        recorder.summary(f"{found['passed']} passed, {found['failed']} failed, {found['skipped']} skipped "
                         f"of {found['tests']} in {len(found['files'])} file(s)")


def marked_files() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "tests").rglob("test_*.py") if MARKER in p.read_text())


def run_marked(context: StepContext) -> dict:
    files = marked_files()
    if not files:
        raise RuntimeError(f"no test under tests/ carries {MARKER}")
    report = context.work / "junit.xml"
    command = [sys.executable, "-m", "pytest", "-m", "gpu", "-v", "--durations=0", "-p", "no:cacheprovider",
               f"--junitxml={report}", "-o", "addopts=", *files]
    # pytest writes into the step's log as it goes: a run cut short by the limit still shows how far it got.
    proc = subprocess.run(command, cwd=ROOT, timeout=max(10, context.seconds_left() - 5))
    suite = ElementTree.parse(report).getroot()
    suite = suite if suite.tag == "testsuite" else suite.find("testsuite")
    counts = {k: int(suite.get(k, 0)) for k in ("tests", "failures", "errors", "skipped")}
    failed = counts["failures"] + counts["errors"]
    found = {"files": files, "tests": counts["tests"], "failed": failed, "skipped": counts["skipped"],
             "passed": counts["tests"] - failed - counts["skipped"], "exit_code": proc.returncode,
             "failures": [c.get("classname", "") + "::" + c.get("name", "") for c in suite.iter("testcase")
                          if c.find("failure") is not None or c.find("error") is not None]}
    if failed or proc.returncode not in (0, 5):
        raise RuntimeError(f"pytest -m gpu: {found} (its output is in the log)")
    if context.cpu and found["passed"]:
        raise RuntimeError(f"tests marked gpu passed without a GPU (they should skip): {found}")
    return found
