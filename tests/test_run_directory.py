"""Where a run goes: ``--experiment-name`` cannot lead outside ``--output-directory``."""

from __future__ import annotations

import pytest

from plait.cli import main

CONFIG = {"input_features": [{"name": "x", "type": "number"}], "output_features": [{"name": "y", "type": "binary"}],
          "trainer": {"epochs": 1}}


@pytest.mark.parametrize("name", ["../escaped", "a/../../escaped", "ABSOLUTE", "back\\slash"])
def test_an_experiment_name_that_leaves_the_output_directory_is_refused(name, tmp_path, make_config, write_config,
                                                                        make_dataset, capsys):
    name = str(tmp_path / "escaped") if name == "ABSOLUTE" else name
    config = write_config(make_config(CONFIG["input_features"], CONFIG["output_features"], trainer=CONFIG["trainer"]))
    dataset = make_dataset({"x": [1.0, 2.0, 3.0, 4.0], "y": [0, 1, 0, 1]})
    output = tmp_path / "out"
    code = main(["train", "-c", config, "--dataset", dataset, "--output-directory", str(output), "--experiment-name", name])
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and "Traceback" not in err
    assert err.count("plait: error:") == 1 and err.startswith(f"plait: error: --experiment-name {name!r}: must be a plain "
                                                               "folder name"), err
    assert not list(tmp_path.glob("escaped*")) and not (tmp_path.parent / "escaped_run_0").exists()


def test_a_run_given_a_dataframe_describes_it_and_resumes_only_from_python(tmp_path):
    import pandas as pd

    from plait.errors import UsageError
    from plait.run_directory import RunDirectory

    run = RunDirectory.create(str(tmp_path), "frame")
    run.write_start("{}", {"dataset": pd.DataFrame({"x": [1, 2, 3]}), "test_set": "test.csv"}, 7, "hyperopt")
    assert run.description()["data"] == {"dataset": {"in_memory": "a pandas DataFrame of 3 rows and 1 columns"},
                                         "test_set": "test.csv"}
    with pytest.raises(UsageError, match="the run was given dataset as a pandas DataFrame of 3 rows and 1 "
                                         "columns, which its folder does not keep; resume it from Python"):
        run.saved_data("somewhere")
