"""A fine-tuned LLM served: its generated text, as `plait predict` gives it, one row or a batch."""

from __future__ import annotations

import pytest

from hf_models import COLORS, FRENCH, colour_rows, llm_config, write_colour_llama
from tests.serving.conftest import RunningServer

pytestmark = pytest.mark.usefixtures("one_torch_thread")


def test_an_llm_answers_with_its_generated_text_as_plait_predict_does(tmp_path, http):
    from plait.api import Model

    config = {**llm_config(write_colour_llama(tmp_path / "llama")),
              "backend": {"type": "local", "cache_dir": str(tmp_path / "cache")}}
    model = Model(config)
    model.train(colour_rows(16), progress_bar=False)
    expected = model.predict(colour_rows(1))
    assert expected["french_predictions"].tolist() == FRENCH  # learnt, so the answers below mean something
    with RunningServer(str(model.save(tmp_path / "model"))) as server:
        info = http.get(f"{server.url}/info").json()
        assert [(f["name"], f["type"]) for f in info["output_features"]] == [("french", "text")]
        rows = [http.post(f"{server.url}/predict", json={"colour": colour}).json() for colour in COLORS]
        batch = http.post(f"{server.url}/batch_predict", json=[{"colour": colour} for colour in COLORS]).json()
    assert [r["french_predictions"] for r in rows] == [r["french_predictions"] for r in batch] == FRENCH
    assert [r["french_probability"] for r in batch] == pytest.approx(expected["french_probability"].tolist(), rel=1e-5)
