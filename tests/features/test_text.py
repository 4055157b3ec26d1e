"""Text features: tokenizers, vocabulary, padding and truncation, BPE trained on the data."""

from __future__ import annotations

import pyarrow as pa
import pytest

PAD, UNK = 0, 1


def text(make_processor, **preprocessing):
    return make_processor("text", preprocessing or None)


def words(meta: dict, row: list[int]) -> list[str]:
    return [meta["vocabulary"][i] for i in row if i != PAD]


def test_space_tokenizer_splits_on_whitespace_only(make_processor, padded_fit_transform):
    meta, out = padded_fit_transform(text(make_processor, tokenizer="space", lowercase=True), ["Hello  world", "hello, World!"])
    assert meta["vocabulary"] == ["<PAD>", "<UNK>", "hello", "hello,", "world", "world!"]
    assert [words(meta, row) for row in out] == [["hello", "world"], ["hello,", "world!"]]


def test_space_punct_tokenizer_makes_punctuation_its_own_token(make_processor, padded_fit_transform):
    meta, out = padded_fit_transform(text(make_processor, tokenizer="space_punct", lowercase=True), ["Hello, world!", "don't"])
    assert [words(meta, row) for row in out] == [["hello", ",", "world", "!"], ["don", "'", "t"]]


def test_space_punct_is_the_default_tokenizer(make_processor):
    assert text(make_processor).preprocessing.tokenizer == "space_punct"


def test_text_keeps_its_case_by_default_as_in_ludwig(make_processor, fit):
    assert fit(text(make_processor, tokenizer="space"), ["Cat cat cat"])["vocabulary"] == ["<PAD>", "<UNK>", "cat", "Cat"]


def test_lowercase_can_be_turned_on(make_processor, fit):
    meta = fit(text(make_processor, tokenizer="space", lowercase=True), ["Cat cat CAT"])
    assert meta["vocabulary"] == ["<PAD>", "<UNK>", "cat"]


def test_lowercase_can_be_turned_off(make_processor, fit):
    meta = fit(text(make_processor, tokenizer="space", lowercase=False), ["Cat cat cat"])
    assert meta["vocabulary"] == ["<PAD>", "<UNK>", "cat", "Cat"]


def test_vocabulary_is_padding_unknown_then_words_by_frequency(make_processor, fit):
    meta = fit(text(make_processor, tokenizer="space"), ["b a c", "a b", "a"])
    assert meta["vocabulary"] == ["<PAD>", "<UNK>", "a", "b", "c"]


def test_custom_padding_and_unknown_symbols(make_processor, fit):
    meta = fit(text(make_processor, tokenizer="space", padding_symbol="[PAD]", unknown_symbol="[UNK]"), ["a"])
    assert meta["vocabulary"] == ["[PAD]", "[UNK]", "a"]


def test_unseen_words_map_to_unknown(make_processor, padded_fit_transform):
    _, out = padded_fit_transform(text(make_processor, tokenizer="space"), ["a b c"], ["a zebra b"])
    assert out == [[2, UNK, 3]]


def test_most_common_caps_the_vocabulary(make_processor, padded_fit_transform):
    meta, out = padded_fit_transform(text(make_processor, tokenizer="space", most_common=2), ["a a a b b c"], ["c b a"])
    assert meta["vocabulary"] == ["<PAD>", "<UNK>", "a", "b"]
    assert out == [[UNK, 3, 2, PAD, PAD, PAD]]


def test_sequences_are_padded_on_the_right_to_the_longest_training_text(make_processor, padded_fit_transform):
    meta, out = padded_fit_transform(text(make_processor, tokenizer="space"), ["a b c", "a", ""])
    assert meta["sequence_length"] == 3
    assert out == [[2, 3, 4], [2, PAD, PAD], [PAD, PAD, PAD]]


def test_left_padding(make_processor, padded_fit_transform):
    _, out = padded_fit_transform(text(make_processor, tokenizer="space", padding="left"), ["a b c", "a"])
    assert out == [[2, 3, 4], [PAD, PAD, 2]]


def test_max_sequence_length_truncates_the_end(make_processor, padded_fit_transform):
    meta, out = padded_fit_transform(text(make_processor, tokenizer="space", max_sequence_length=2), ["a b c", "c"])
    assert meta["sequence_length"] == 2
    assert [words(meta, row) for row in out] == [["a", "b"], ["c"]]
    assert out[1][1] == PAD


def test_max_sequence_length_truncates_with_left_padding_too(make_processor, padded_fit_transform):
    meta, out = padded_fit_transform(text(make_processor, tokenizer="space", max_sequence_length=2, padding="left"), ["a b c", "c"])
    assert [words(meta, row) for row in out] == [["a", "b"], ["c"]]
    assert out[1][0] == PAD


def test_texts_longer_than_any_training_text_are_truncated(make_processor, padded_fit_transform):
    _, out = padded_fit_transform(text(make_processor, tokenizer="space"), ["a b"], ["a b a b a"])
    assert out == [[2, 3]]


def test_missing_text_is_all_padding_by_default(make_processor, padded_fit_transform):
    _, out = padded_fit_transform(text(make_processor, tokenizer="space"), ["a b", None])
    assert out == [[2, 3], [PAD, PAD]]


def test_fill_with_const_text(make_processor, padded_fit_transform):
    _, out = padded_fit_transform(text(make_processor, tokenizer="space", fill_value="b"), ["a b", None])
    assert out == [[2, 3], [3, PAD]]


def test_fill_with_mode_uses_the_most_frequent_training_text(make_processor, padded_fit_transform):
    processor = text(make_processor, tokenizer="space", missing_value_strategy="fill_with_mode")
    meta, out = padded_fit_transform(processor, ["a b", "c", "a b", None])
    assert meta["fill_value"] == "a b"
    assert out[3] == out[0]


def test_output_is_each_rows_tokens_as_int32_lists_cut_to_the_length(make_processor, fit):
    processor = text(make_processor, tokenizer="space", max_sequence_length=2)
    meta = fit(processor, ["a b c"])
    out = processor.transform(processor.prepare(pa.array(["a", "a b c", None])), meta)
    assert out.type == pa.list_(pa.int32()) and out.to_pylist() == [[2], [2, 3], []]


def test_statistics_do_not_depend_on_partitioning(make_processor, fit):
    rows = ["the cat sat", "on the mat", None, "The dog!", "a cat, a dog", ""]
    for tokenizer in ("space", "space_punct", "bpe"):
        processor = text(make_processor, tokenizer=tokenizer, most_common=20)
        assert fit(processor, rows) == fit(processor, rows[:1], rows[1:4], [], rows[4:]), tokenizer


# ---- BPE ------------------------------------------------------------------------------------

CORPUS = ["lower lowest newer newest", "widest wider low new", "slower slowest"] * 4


@pytest.fixture
def bpe(make_processor, fit, no_network):
    processor = text(make_processor, tokenizer="bpe", most_common=40, lowercase=True)
    return processor, fit(processor, CORPUS)


def test_bpe_is_trained_on_the_data_without_downloading_anything(bpe):
    _, meta = bpe
    vocab = meta["vocabulary"]
    assert vocab[:2] == ["<PAD>", "<UNK>"]
    assert "bpe" in meta  # the trained tokenizer travels in the metadata
    assert set("lowerstnid") <= set(vocab)  # every character of the corpus
    assert any(len(token) > 2 and token in "lowest newest widest" for token in vocab)  # learned merges
    assert len(vocab) <= 40 + 2


def test_bpe_tokens_spell_the_words(bpe, padded_transform):
    processor, meta = bpe
    [row] = padded_transform(processor, ["lowest wider"], meta)
    assert "".join(words(meta, row)) == "lowestwider"
    assert len(row) == meta["sequence_length"]


def test_bpe_lowercases_and_maps_unseen_characters_to_unknown(bpe, padded_transform):
    processor, meta = bpe
    upper, lower, unseen = padded_transform(processor, ["LOWEST", "lowest", "zq"], meta)
    assert upper == lower
    assert [i for i in unseen if i != PAD] == [UNK, UNK]


def test_bpe_most_common_is_the_subword_vocabulary_size(make_processor, fit):
    small = fit(text(make_processor, tokenizer="bpe", most_common=12), CORPUS)
    large = fit(text(make_processor, tokenizer="bpe", most_common=40), CORPUS)
    assert len(small["vocabulary"]) <= 14 < len(large["vocabulary"])


def test_bpe_on_a_megabyte_without_spaces_finishes_and_spells_it(make_processor, fit, padded_transform, no_network):
    """One cell of 1 MB with no space (a pasted blob) is one word: BPE learns from its pieces of
    BPE_WORD_CHARACTERS (else training runs for hours), and still encodes it whole."""
    import random
    import time

    from plait.features.text import BPE_WORD_CHARACTERS

    blob = "".join(random.Random(0).choices("abcdefghij", k=1_000_000))
    processor = text(make_processor, tokenizer="bpe", most_common=2000)
    started = time.process_time()  # this process's CPU time: the suite runs it beside other work
    meta = fit(processor, [blob, "a short row"])
    [row, _] = padded_transform(processor, [blob, "a short row"], meta)
    assert time.process_time() - started < 60
    assert max(len(token) for token in meta["vocabulary"]) <= BPE_WORD_CHARACTERS
    spelled = "".join(words(meta, row))
    assert len(row) == meta["sequence_length"] and PAD not in row  # the blob's first subwords fill the sequence
    assert len(spelled) >= len(row) and blob.startswith(spelled)


@pytest.mark.parametrize("tokenizer, tokens", [
    ("characters", [" ", "_", "a", "b", "c"]),
    ("underscore", ["a b", "c"]),
    ("untokenized", [" a b_c "]),
    ("stripped", ["a b_c"]),
    ("comma", ["a b_c"]),
])
def test_ludwigs_rule_based_tokenizers(make_processor, fit, tokenizer, tokens):
    meta = fit(make_processor("text", {"tokenizer": tokenizer, "lowercase": False}), [" a b_c "])
    assert sorted(meta["vocabulary"][2:]) == tokens


def test_a_vocab_file_gives_the_vocabulary_in_its_order(make_processor, padded_fit_transform, tmp_path):
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("zebra 10\napple\n\n<UNK>\n", encoding="utf-8")
    meta, out = padded_fit_transform(make_processor("text", {"vocab_file": str(vocab)}), ["apple pie"])
    assert meta["vocabulary"] == ["<PAD>", "<UNK>", "zebra", "apple"]
    assert out == [[3, 1]]


def test_sequence_length_pads_and_truncates_to_exactly_that(make_processor, fit, padded_fit_transform):
    assert [len(row) for row in padded_fit_transform(make_processor("text", {"sequence_length": 3}), ["a", "a b c d e"])[1]] == [3, 3]
    assert fit(make_processor("text", {"max_sequence_length": None}), ["w " * 300])["sequence_length"] == 300
