"""model_type: llm on Ray Train, on the session's real local Ray cluster: LoRA with DeepSpeed
ZeRO-3 across two workers surviving a killed worker; full fine-tuning of a category output with
FSDP across two workers; GRPO with DDP; DPO over a 4-bit base with DDP, then predicting as a Ray
Data job exactly as the local backend does. (These are also the suite's Ray Train runs of the
fsdp and deepspeed strategies: tests/backends/test_ray_training.py runs the rule with ddp and
horovod.)"""

from __future__ import annotations

import pytest

from hf_models import FRENCH, LORA, colour_rows, llm_config, preference_rows, write_colour_llama
from plait import Model
from test_ray_training import killing_a_worker_when

pytest.importorskip("ray")
pytestmark = pytest.mark.usefixtures("ray_cluster")


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return write_colour_llama(tmp_path_factory.mktemp("models") / "llama")


def on_ray(config: dict, tmp_path, strategy: dict) -> dict:
    return {**config, "backend": {"type": "ray", "cache_dir": str(tmp_path / "cache"),
                                  "trainer": {"num_workers": 2, "strategy": strategy}}}


def test_lora_with_zero3_resumes_after_a_killed_worker_and_saves_the_adapter_alone(base, tmp_path):
    pytest.importorskip("deepspeed")
    pytest.importorskip("peft")
    # Two epochs: the group is killed at the first epoch's checkpoint and the new one trains the
    # second from it (its validation loss about half the first's); each ZeRO-3 epoch costs ~4 s.
    trainer = {"type": "finetune", "epochs": 2, "batch_size": 8, "learning_rate": 0.02}
    zero3 = {"type": "deepspeed", "zero_optimization": {"stage": 3}}
    model = Model(on_ray(llm_config(base, adapter=LORA, trainer=trainer), tmp_path, zero3))
    run = tmp_path / "run"
    with killing_a_worker_when(run / "checkpoints" / "latest.json") as killed:
        result = model.train(colour_rows(20), run_dir=run, progress_bar=False)
    assert killed, "no worker was killed: training ended before the first checkpoint was seen"
    # Under load Ray Train may also restart a group whose start timed out, before any checkpoint:
    # the restart after the kill is the last one.
    restart = result.restarts[-1]
    assert restart["resumed_from_step"] > 0, "the new worker group resumed from the sharded checkpoint"
    assert [r["epoch"] for r in result.training_statistics] == [1, 2]
    assert all("lora_" in key for key in model.module.state_dict()), "the adapter alone comes back"
    assert result.training_statistics[-1]["validation"]["french"]["loss"] < result.training_statistics[0]["validation"]["french"]["loss"]
    # (An LLM's Ray Data prediction, equal to the local one, is the DPO test's below: one actor
    # pool's start, 10 to 30 s, is enough for the suite.)


def test_full_fine_tuning_with_fsdp_on_two_workers_learns_the_mapping(base, tmp_path):
    """As a category output: validation generates each row's answer to score its label, and with
    the weights sharded every worker steps generation until all have ended (else a hang)."""
    french = {"name": "french", "type": "category", "decoder": {"constrain_to_vocabulary": True},
              "preprocessing": {"vocab": FRENCH, "fallback_label": "rouge"}}
    model = Model(on_ray(llm_config(base, output_features=[french], trainer={
        "type": "finetune", "epochs": 3, "batch_size": 8, "learning_rate": 0.006}), tmp_path, {"type": "fsdp"}))
    history = model.train(colour_rows(25), progress_bar=False).training_statistics
    assert history[-1]["validation"]["french"]["sequence_accuracy"] == history[-1]["validation"]["french"]["accuracy"] == 1.0
    assert sum(p.numel() for p in model.module.parameters()) == sum(p.numel() for p in base_parameters(base)), \
        "the whole model is gathered from the shards"


def base_parameters(base):
    from safetensors.torch import load_file

    return load_file(str(base / "model.safetensors")).values()


def test_grpo_with_ddp_on_two_workers_samples_rewards_and_reports_the_reward(base, tmp_path):
    """Each worker samples its rows' completions and DDP averages the policy gradients; that GRPO
    learns is tests/models/test_llm_grpo.py's (one epoch here: the suite's time)."""
    trainer = {"type": "grpo", "epochs": 1, "batch_size": 8, "learning_rate": 0.02, "grpo_num_generations": 2}
    output = [{"name": "french", "type": "text", "preprocessing": {"max_sequence_length": 2}}]
    model = Model(on_ray(llm_config(base, adapter=LORA, trainer=trainer, output_features=output,
                                    generation={"max_new_tokens": 2}), tmp_path, "ddp"))
    history = model.train(colour_rows(3), progress_bar=False).training_statistics
    rewards = [record["validation"]["french"]["reward"] for record in history]
    assert len(rewards) == 1 and 0 <= rewards[0] <= 1
    assert [record["validation"]["combined"]["loss"] for record in history] == pytest.approx([1 - r for r in rewards])
    assert all("lora_" in key for key in model.module.state_dict()), "the adapter alone comes back"


def test_dpo_over_qlora_with_ddp_on_two_workers_trains_and_predicts_on_ray_as_locally(base, tmp_path):
    """Each worker loads the base in 4 bits, DDP wraps the adapter over it, and DPO's reference is
    that quantized base with the adapter off; the rejected completions stream through Ray Data
    with the rest. That QLoRA and DPO learn is tests/models' (one epoch here: the suite's time)."""
    pytest.importorskip("bitsandbytes")
    trainer = {"type": "dpo", "epochs": 1, "batch_size": 16, "learning_rate": 0.02}
    model = Model(on_ray(llm_config(base, adapter=LORA, trainer=trainer, quantization={"bits": 4}), tmp_path, "ddp"))
    history = model.train(preference_rows(colour_rows(10)), progress_bar=False).training_statistics
    assert [r["epoch"] for r in history] == [1] and 0 <= history[0]["validation"]["french"]["reward_accuracy"] <= 1
    on_ray_predictions = model.predict(colour_rows(1))  # a Ray Data job, each actor quantizing the base
    model.save(tmp_path / "model")
    assert Model.load(tmp_path / "model", backend="local").predict(colour_rows(1)).equals(on_ray_predictions)
