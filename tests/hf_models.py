"""Tiny random-weight Hugging Face models and their tokenizers, written at test time: nothing is
downloaded. A BERT-like encoder (WordPiece) for the ECD text encoders."""

from __future__ import annotations

import json
from pathlib import Path

WORDS = ["good", "bad", "great", "awful", "movie", "film", "plot", "the", "a", "was", "very", "not", "and", "it",
         "acting", "fine", "boring", "fun", "slow", "long"]
"""The words of the tiny vocabulary; other words become [UNK] or word pieces of their letters."""
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def wordpiece_tokenizer(words: list[str] = WORDS):
    """A BERT-style fast tokenizer over ``words``, the letters and their ## pieces."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

    letters = sorted(set("abcdefghijklmnopqrstuvwxyz0123456789.,!?'"))
    vocab = SPECIALS + list(dict.fromkeys(words + letters + [f"##{c}" for c in letters]))
    tokenizer = Tokenizer(models.WordPiece({token: i for i, token in enumerate(vocab)}, unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B [SEP]", special_tokens=[("[CLS]", 2), ("[SEP]", 3)])
    tokenizer.decoder = decoders.WordPiece()
    return tokenizer


def write_tiny_bert(folder: Path, weights: bool = True, tokenizer: bool = True, seed: int = 0, **config) -> Path:
    """A BERT-like model of random weights (hidden size 32, two layers) and its tokenizer in
    ``folder``, as save_pretrained writes them."""
    import torch

    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    BertConfig, BertModel, BertTokenizerFast = transformers.BertConfig, transformers.BertModel, transformers.BertTokenizerFast

    folder.mkdir(parents=True, exist_ok=True)
    fast = BertTokenizerFast(tokenizer_object=wordpiece_tokenizer(), unk_token="[UNK]", pad_token="[PAD]",
                             cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    settings = {"vocab_size": len(fast), "hidden_size": 32, "num_hidden_layers": 2, "num_attention_heads": 2,
                "intermediate_size": 64, "max_position_embeddings": 64, "pad_token_id": 0, **config}
    torch.manual_seed(seed)
    model = BertModel(BertConfig(**settings))
    if weights:
        model.save_pretrained(folder)
    else:
        model.config.save_pretrained(folder)
    if tokenizer:
        fast.save_pretrained(folder)
    return folder


def write_tiny_t5(folder: Path, tokenizer_from: Path) -> Path:
    """An encoder-decoder (T5-like) model of random weights, with the tokenizer of another folder."""
    import shutil

    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    vocabulary = json.loads((tokenizer_from / "tokenizer.json").read_text())["model"]["vocab"]
    config = transformers.T5Config(vocab_size=len(vocabulary), d_model=32, d_kv=16, d_ff=64, num_layers=1,
                                   num_decoder_layers=1, num_heads=2, pad_token_id=0, decoder_start_token_id=0)
    transformers.T5Model(config).save_pretrained(folder)
    shutil.copy(tokenizer_from / "tokenizer.json", folder / "tokenizer.json")
    return folder


def write_to_hub_cache(cache: Path, name: str, **config) -> Path:
    """A tiny BERT placed in a Hugging Face cache folder as `hf download NAME` leaves it there
    (models--<org>--<name>/snapshots/<revision>, with refs/main naming the revision)."""
    revision = "0" * 40
    repo = cache / f"models--{name.replace('/', '--')}"
    write_tiny_bert(repo / "snapshots" / revision, **config)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(revision)
    return repo / "snapshots" / revision


LLAMA_SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def word_tokenizer(words: list[str]):
    """A Llama-style fast tokenizer over whole words: <s> starts every text, </s> is the end
    token, and decoding joins words with spaces."""
    from tokenizers import Tokenizer, models, pre_tokenizers, processors

    vocab = LLAMA_SPECIALS + list(dict.fromkeys(words))
    tokenizer = Tokenizer(models.WordLevel({token: i for i, token in enumerate(vocab)}, unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(LLAMA_SPECIALS)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tokenizer


def byte_level_tokenizer(texts: list[str], vocab_size: int = 300):
    """A GPT-2-style byte-level BPE tokenizer learnt from ``texts`` (every byte is a token, so it
    writes any text, JSON included), with the Llama special tokens: <s> starts every text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=None))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=LLAMA_SPECIALS, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    tokenizer.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    return tokenizer


def write_tiny_llama(folder: Path, words: list[str], weights: bool = True, tokenizer: bool = True, seed: int = 0,
                     fast=None, **config) -> Path:
    """A Llama-like causal LM of random weights (hidden size 32, two layers) over ``words`` (or
    the tokenizer ``fast``) and its tokenizer in ``folder``, as save_pretrained writes them."""
    import torch

    from plait.models.hf_encoders import import_transformers

    transformers = import_transformers()
    folder.mkdir(parents=True, exist_ok=True)
    fast = fast or word_tokenizer(words)
    settings = {"vocab_size": fast.get_vocab_size(), "hidden_size": 32, "intermediate_size": 64,
                "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 2,
                "max_position_embeddings": 128, "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2,
                "tie_word_embeddings": False, **config}
    torch.manual_seed(seed)
    model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**settings))
    if weights:
        model.save_pretrained(folder)
    else:
        model.config.save_pretrained(folder)
    if tokenizer:
        fast.save(str(folder / "tokenizer.json"))
    return folder


COLORS = ["red", "green", "blue", "black", "white", "yellow", "pink", "brown"]
FRENCH = ["rouge", "vert", "bleu", "noir", "blanc", "jaune", "rose", "brun"]
"""A trivial mapping an LLM learns: a colour's name to its French name."""


def write_colour_llama(folder: Path, **config) -> Path:
    """A tiny Llama whose vocabulary holds the colour task's words."""
    return write_tiny_llama(folder, ["translate", ":", "in", "french", *COLORS, *FRENCH], **config)


def colour_rows(repeats: int = 40):
    """``repeats`` rows of each colour and its French name (columns colour, french)."""
    import pandas as pd

    return pd.DataFrame([(c, f) for _ in range(repeats) for c, f in zip(COLORS, FRENCH)], columns=["colour", "french"])


def preference_rows(rows):
    """``rows`` of the colour task with a ``rejected`` column: the next colour's French name."""
    return rows.assign(rejected=rows["french"].map(lambda french: FRENCH[(FRENCH.index(french) + 1) % len(FRENCH)]))


def llm_config(base: Path, **sections) -> dict:
    """An LLM config of the colour task on ``base``, fine-tuned (``sections`` replace its parts)."""
    return {"model_type": "llm", "base_model": str(base),
            "input_features": [{"name": "colour", "type": "text"}],
            "output_features": [{"name": "french", "type": "text"}],
            "prompt": {"template": "translate : {colour}"},
            "trainer": {"type": "finetune", "epochs": 3, "batch_size": 16, "learning_rate": 0.003},
            **sections}


LORA = {"type": "lora", "r": 8, "target_modules": ["q_proj", "v_proj", "lm_head"]}
"""LoRA on the colour task: on the attention and the output layer, since a random tiny model's
frozen output layer alone gives near-uniform logits whatever its hidden states."""
LORA_TRAINER = {"type": "finetune", "epochs": 3, "batch_size": 16, "learning_rate": 0.02}
"""A trainer that teaches the colour task to LoRA (or QLoRA) in three epochs."""


def local_llm_config(base: Path, cache_dir: str, **sections) -> dict:
    """``llm_config`` on the local backend with its cache in ``cache_dir``."""
    return llm_config(base, backend={"type": "local", "cache_dir": cache_dir}, **sections)


def predicted_french(model) -> list[str]:
    """The model's text for each colour, in COLORS' order."""
    return model.predict(colour_rows(1))["french_predictions"].tolist()
