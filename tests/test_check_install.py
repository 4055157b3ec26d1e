"""plait check_install: the extras, the engines' imports, the Ray cluster, the GPUs, and a small
training run, as one report."""

from __future__ import annotations

import sys

import pytest

from plait import check_install


def test_this_installation_passes_every_check(cli):
    code, out, err = cli("check_install")
    assert code == 0, out + err
    assert out.rstrip().endswith("CHECK INSTALL COMPLETE... SUCCESS")
    lines = out.splitlines()
    assert any(line.split()[:2] == ["ray", "ray"] for line in lines)  # the ray extra's package and version
    assert any(line.startswith("import transformers") and " ok " in line for line in lines)
    assert any(line.startswith("GPUs") for line in lines)
    assert any(line.startswith("train and predict") and " ok " in line for line in lines)


def test_an_engine_that_fails_to_import_fails_the_check(tmp_path, monkeypatch):
    (tmp_path / "broken_engine.py").write_text("raise ImportError('libbroken.so: cannot open shared object file')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(check_install.ENGINES, "broken_engine", "broken_engine")
    report = check_install.check_install(train=False)
    failed = [check for check in report.checks if check.ok is False]
    assert [check.what for check in failed] == ["import broken_engine"]
    assert "libbroken.so" in failed[0].detail and not report.ok
    assert report.text().endswith("CHECK INSTALL COMPLETE... FAILURE")
    sys.modules.pop("broken_engine", None)
