"""Quantized LLMs on the CPU (bitsandbytes): QLoRA trains an adapter over a 4 or 8 bit base, the
saved model is the adapter alone and loads on a quantized or a full-precision base, and the base
can be written back in float16 (``save_dequantized_base_model``)."""

from __future__ import annotations

import pytest
import torch
from safetensors.torch import load_file

from hf_models import FRENCH, LORA, LORA_TRAINER, colour_rows, local_llm_config, predicted_french, write_colour_llama
from plait.api import Model
from plait.errors import UsageError
from plait.models.saved import WEIGHTS

bitsandbytes = pytest.importorskip("bitsandbytes")
pytestmark = pytest.mark.usefixtures("one_torch_thread")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_colour_llama(tmp_path_factory.mktemp("models") / "llama")


def attention_layer(model):
    """The first attention block's query projection, under the adapter (if any)."""
    layer = model.module._causal_lm().model.layers[0].self_attn.q_proj
    return getattr(layer, "base_layer", layer)


def test_qlora_on_a_4_bit_base_learns_and_its_adapter_loads_on_a_full_precision_base(base, cache_dir, tmp_path):
    model = Model(local_llm_config(base, cache_dir, adapter=LORA, trainer=LORA_TRAINER, quantization={"bits": 4}))
    model.train(colour_rows(), progress_bar=False)
    assert isinstance(attention_layer(model), bitsandbytes.nn.Linear4bit)
    assert predicted_french(model) == FRENCH
    model.save(tmp_path / "model")
    saved = load_file(str(tmp_path / "model" / WEIGHTS))
    assert saved and all("lora_" in key for key in saved), "the saved model is the adapter alone"
    again = Model.load(tmp_path / "model")
    assert isinstance(attention_layer(again), bitsandbytes.nn.Linear4bit), "quantized as it trained"
    full = Model.load(tmp_path / "model", quantization=None)
    assert type(attention_layer(full)) is torch.nn.Linear and full.config.quantization is None
    assert predicted_french(again) == predicted_french(full) == FRENCH


def test_a_lora_trained_on_a_full_base_loads_on_an_8_bit_one(base, cache_dir, tmp_path):
    model = Model(local_llm_config(base, cache_dir, adapter=LORA, trainer=LORA_TRAINER))
    model.train(colour_rows(), progress_bar=False)
    model.save(tmp_path / "model")
    quantized = Model.load(tmp_path / "model", quantization={"bits": 8})
    assert isinstance(attention_layer(quantized), bitsandbytes.nn.Linear8bitLt)
    assert predicted_french(quantized) == FRENCH


def test_a_model_that_saved_all_its_weights_cannot_change_its_base(base, cache_dir, tmp_path):
    model = Model(local_llm_config(base, cache_dir, trainer={**LORA_TRAINER, "epochs": 1}))
    model.train(colour_rows(2), progress_bar=False)
    model.save(tmp_path / "model")
    with pytest.raises(UsageError, match="saved all its weights, so its base cannot be loaded another way"):
        Model.load(tmp_path / "model", quantization={"bits": 4})


def test_the_dequantized_base_is_a_float16_model_that_answers_as_the_quantized_one(base, cache_dir, tmp_path):
    quantized = Model(local_llm_config(base, cache_dir, trainer={"type": "none"}, quantization={"bits": 4}))
    quantized.train(colour_rows(1), progress_bar=False)
    quantized.save_dequantized_base_model(tmp_path / "dequantized")
    weights = load_file(str(tmp_path / "dequantized" / "model.safetensors"))
    assert {w.dtype for w in weights.values()} == {torch.float16}
    assert (tmp_path / "dequantized" / "tokenizer.json").is_file()
    original = load_file(str(base / "model.safetensors"))
    name = "model.layers.0.self_attn.q_proj.weight"
    rounding = (weights[name].float() - original[name]).abs()
    assert 0 < rounding.mean() < original[name].abs().mean() / 4, "the 4-bit rounding, not other weights"
    plain = Model(local_llm_config(tmp_path / "dequantized", cache_dir, trainer={"type": "none"}))
    plain.train(colour_rows(1), progress_bar=False)
    assert predicted_french(plain) == predicted_french(quantized)


def test_save_dequantized_base_model_needs_a_quantized_local_llm_config(base, cache_dir, tmp_path):
    from plait.errors import ModelError

    with pytest.raises(ModelError, match="the config has no quantization section"):
        Model(local_llm_config(base, cache_dir)).save_dequantized_base_model(tmp_path / "out")
