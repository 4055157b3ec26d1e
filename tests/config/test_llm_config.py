"""The config of model_type: llm: Ludwig's keys and defaults, and every mistake named by its path."""

from __future__ import annotations

import pytest

from plait.config import LLMConfig, load_config
from plait.config.llm import template_fields
from plait.errors import ConfigError


def llm(**sections) -> dict:
    return {"model_type": "llm", "base_model": "/models/llama",
            "input_features": [{"name": "question", "type": "text"}],
            "output_features": [{"name": "answer", "type": "text"}], **sections}


def problems_of(config: dict) -> list[str]:
    with pytest.raises(ConfigError) as info:
        load_config(config)
    return info.value.problems


def test_a_template_may_read_other_columns_than_the_inputs_own_as_in_ludwig():
    config = load_config(llm(prompt={"template": "Context: {context}\nInstruction: {instruction}"}))
    assert config.template_columns == ["question", "context", "instruction"]


def test_a_minimal_config_takes_ludwigs_llm_defaults():
    config = load_config(llm())
    assert isinstance(config, LLMConfig)
    assert config.trainer.type == "none" and config.trainer.batch_size == 1 and config.trainer.eval_batch_size == 2
    assert config.adapter is None and config.quantization is None
    assert config.generation.max_new_tokens == 32 and config.generation.num_beams == 1
    assert config.prompt.text() == "{__sample__}"


def test_ludwig_rendered_feature_sections_are_accepted():
    config = load_config(llm(input_features=[{"name": "q", "type": "text", "encoder": {"type": "passthrough"}}],
                             output_features=[{"name": "a", "type": "text", "decoder": {"type": "text_extractor"},
                                               "loss": {"type": "next_token_softmax_cross_entropy"}}],
                             prompt={"retrieval": {"type": None, "k": 0}}))
    assert config.input_features[0].name == "q"


def test_each_adapter_type_takes_its_own_keys_and_lora_is_the_default():
    assert load_config(llm(adapter={"r": 4})).adapter.type == "lora"
    vera = load_config(llm(adapter={"type": "vera", "r": 64, "projection_prng_key": 3})).adapter
    assert (vera.r, vera.projection_prng_key) == (64, 3)
    ia3 = load_config(llm(adapter={"type": "ia3", "target_modules": ["k_proj", "down_proj"],
                                   "feedforward_modules": ["down_proj"]})).adapter
    assert ia3.feedforward_modules == ["down_proj"]
    assert load_config(llm(adapter={"type": "lokr", "alpha": 4})).adapter.alpha == 4.0


def test_a_lora_adapter_takes_ludwigs_keys():
    config = load_config(llm(adapter={"type": "lora", "r": 4, "alpha": 8, "dropout": 0.1, "target_modules": ["q_proj"],
                                      "postprocessor": {"merge_adapter_into_base_model": True}},
                             trainer={"type": "finetune", "epochs": 2}))
    assert config.adapter.r == 4 and config.adapter.postprocessor.merge_adapter_into_base_model
    assert config.trainer.type == "finetune" and config.trainer.epochs == 2


def test_the_template_reads_columns_the_sample_and_the_task():
    config = load_config(llm(prompt={"template": "{__task__}\nContext: {context}\nQ: {question}", "task": "Answer."}))
    assert config.template_columns == ["question", "context"]
    assert template_fields("Say {__sample__} in {language}") == ["__sample__", "language"]
    assert load_config(llm(prompt={"task": "Answer."})).prompt.text() == "{__task__}\n\n{__sample__}\n\n"


@pytest.mark.parametrize("sections, problem", [
    ({"prompt": {"template": "Q: {question!r}"}}, "prompt.template: the template has {question!r}"),
    ({"prompt": {"template": "Q: {question"}}, "prompt.template: the template is malformed"),
    ({"prompt": {"template": "Q: no placeholder"}}, "prompt.template: names no column of the data and not "
                                                   "{__sample__}"),
    ({"prompt": {"template": "{__task__} only", "task": "Answer."}}, "prompt.template: names no column of the data"),
    ({"prompt": {"template": "Q: {question} A: {answer}"}}, "prompt.template: names the output column {answer}"),
    ({"prompt": {"template": "{question}", "task": "Answer."}}, "prompt.template: prompt.task is set but the template "
                                                                "has no {__task__}"),
    ({"trainer": {"epochs": 3}}, "trainer.type: is none (no training, Ludwig's default for an LLM) but "
                                 "trainer.epochs is set; set trainer.type: finetune to train"),
    ({"trainer": {"type": "fine_tune"}}, "trainer.type: unknown type 'fine_tune'; did you mean finetune?"),
    ({"adapter": {"type": "adalora"}}, "adapter: got type 'adalora'; plait implements the adapters lora, ia3, loha, "
                                       "lokr, vera"),
    ({"adapter": {"type": "lora", "rank": 4}}, "adapter.rank: unknown field"),
    ({"adapter": {"type": "ia3", "r": 4}}, "adapter.r: unknown field"),
    ({"adapter": {"type": "qlora"}}, "adapter.type: unknown type 'qlora'; did you mean lora?"),
    ({"trust_remote_code": True}, "trust_remote_code: got True; plait does not implement this Ludwig setting"),
    ({"combiner": {"type": "concat"}}, "combiner: unknown field"),
    ({"quantization": {"bits": 3}}, "quantization.bits: got 3"),
    ({"quantization": {"backend": "torchao", "mode": "int8_weight_only"}}, "quantization.backend: got 'torchao'"),
    ({"adapter": {"type": "lora", "init_lora_weights": "eva"}}, "adapter.init_lora_weights: got 'eva'; eva and corda"),
    ({"adapter": {"type": "lora", "init_lora_weights": "pissa"}, "quantization": {"bits": 4}},
     "adapter.init_lora_weights: is pissa with quantization"),
    ({"adapter": {"type": "lora", "loraplus_lr_ratio": 4}}, "adapter.loraplus_lr_ratio: got 4"),
    ({"adapter": {"type": "waveft"}}, "adapter: got type 'waveft'"),
    ({"trainer": {"type": "grpo"}}, "adapter: is null with trainer.type grpo"),
    ({"trainer": {"type": "orpo", "rejected_column": "question"}}, "trainer.rejected_column: is 'question', the input"),
    ({"output_features": [{"name": "answer", "type": "text", "decoder": {"type": "text_parser", "grammar": "root ::= x"}}]},
     "output_features[0]: decoder.grammar: a grammar is not read"),
    ({"output_features": [{"name": "answer", "type": "text", "decoder": {"type": "text_parser"}}]},
     "output_features[0].decoder.json_schema: a text_parser decoder needs exactly one format, json_schema or regex; "
     "got neither"),
    ({"output_features": [{"name": "answer", "type": "text", "decoder": {"type": "text_parser", "regex": "(yes|no"}}]},
     "output_features[0].decoder.regex: is not a regular expression"),
    ({"hyperopt": {"parameters": {"adapter.r": {"space": "choice", "categories": [4, 8]}}, "metric": "accuracy",
                   "output_feature": "answer"}}, "hyperopt.metric: got 'accuracy', which output feature answer does not"),
    ({"defaults": {"text": {"preprocessing": {"max_sequence_lenght": 3}}}},
     "defaults.text.preprocessing.max_sequence_lenght: unknown field"),
    ({"defaults": {"text": {"encoder": {"type": "bert"}}}}, "defaults.text.encoder.type: got 'bert'"),
    ({"quantization": {"bits": 4}, "trainer": {"type": "finetune"}},
     "quantization: a quantized base model cannot train its own weights"),
    ({"quantization": {"bits": 8}, "adapter": {"type": "lora", "postprocessor": {"merge_adapter_into_base_model": True}}},
     "adapter.postprocessor.merge_adapter_into_base_model: is true with quantization"),
    ({"quantization": {"bits": 4}, "adapter": {"type": "lora"}, "backend": {"type": "ray", "trainer": {"strategy": "fsdp"}}},
     "quantization: is set with the fsdp strategy, which shards the parameters across workers"),
    ({"quantization": {"bits": 4}, "adapter": {"type": "lora"},
      "backend": {"type": "ray", "trainer": {"strategy": {"type": "deepspeed", "zero_optimization": {"stage": 3}}}}},
     "quantization: is set with the deepspeed strategy"),
])
def test_a_mistake_is_named_by_its_path(sections, problem):
    assert any(p.startswith(problem) for p in problems_of(llm(**sections))), problems_of(llm(**sections))


def test_defaults_reach_the_input_and_hyperopt_is_kept():
    config = load_config(llm(defaults={"text": {"preprocessing": {"max_sequence_length": 64, "lowercase": True}}},
                             input_features=[{"name": "question", "type": "text", "preprocessing": {"lowercase": False}}],
                             hyperopt={"parameters": {"adapter.r": {"space": "choice", "categories": [4, 8]}},
                                       "metric": "sequence_accuracy", "goal": "maximize", "output_feature": "answer"}))
    prompt, target = config.input_features[0].preprocessing, config.output_features[0].preprocessing
    assert (prompt.max_sequence_length, prompt.lowercase) == (64, False), "the feature's own setting wins"
    assert target.max_sequence_length != 64 and target.missing_value_strategy == "drop_row", "the target keeps its own"
    assert config.hyperopt.metric == "sequence_accuracy"


def test_ludwigs_lora_keys_mean_what_they_mean_in_ludwig():
    lora = load_config(llm(adapter={"type": "lora", "r": 4, "bias": "all"})).adapter
    assert (lora.alpha, lora.bias_type, lora.init_lora_weights) == (None, "all", "default")
    assert load_config(llm(adapter={"type": "lora", "init_lora_weights": True})).adapter.init_lora_weights == "default"
    assert load_config(llm(adapter={"type": "tinylora"})).adapter.u == 64


def test_an_llm_has_one_text_input_and_one_text_or_category_output():
    two = llm(input_features=[{"name": "a", "type": "text"}, {"name": "b", "type": "text"}])
    assert any(p.startswith("input_features:") for p in problems_of(two))
    # Ludwig's category_llm preprocessing needs the labels and the fallback label.
    assert "output_features[0].preprocessing: required field is missing" in problems_of(
        llm(output_features=[{"name": "a", "type": "category"}]))
    assert "output_features[0].preprocessing.fallback_label: required field is missing" in problems_of(
        llm(output_features=[{"name": "a", "type": "category", "preprocessing": {"vocab": ["x"]}}]))
    unknown_label = {"name": "a", "type": "category", "preprocessing": {"vocab": ["x"], "fallback_label": "y"},
                     "decoder": {"match": {"z": {"type": "contains", "value": "z"}}}}
    assert any(p.startswith("output_features[0].decoder.match.z: names a label that is not in preprocessing.vocab")
               for p in problems_of(llm(output_features=[unknown_label])))
    assert problems_of(llm(output_features=[{"name": "a", "type": "number"}])) == [
        "output_features[0].type: unknown type 'number'; valid names are: category, text"]
    assert any("the same name" in p for p in problems_of(llm(output_features=[{"name": "question", "type": "text"}])))
