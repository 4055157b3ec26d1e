"""Set features: multi-label cells, encoded as lists of vocabulary ids."""

from __future__ import annotations

import pyarrow as pa

from plait.data.tensors import column_tensor

TRAIN = ["red green", "green blue", "green", None, ""]


def set_feature(make_processor, output=False, **preprocessing):
    return make_processor("set", preprocessing or None, output=output)


def labels(meta: dict, row: list[int]) -> set[str]:
    return {meta["vocabulary"][i] for i in row}


def test_each_cell_holds_several_labels(make_processor, fit_transform):
    meta, out = fit_transform(set_feature(make_processor), TRAIN)
    assert meta["vocabulary"] == ["<UNK>", "green", "blue", "red"]
    assert [labels(meta, row) for row in out] == [{"red", "green"}, {"green", "blue"}, {"green"}, set(), set()]


def test_unseen_labels_of_an_input_map_to_unknown(make_processor, fit_transform):
    _, out = fit_transform(set_feature(make_processor), TRAIN, ["red purple"])
    assert out == [[3, 0]]


def test_unseen_labels_of_an_output_are_kept_past_the_vocabulary(make_processor, fit_transform):
    # Kept (as id len(vocabulary)), no longer dropped: evaluation counts them as missed.
    meta, out = fit_transform(set_feature(make_processor, output=True), TRAIN, ["red purple", "purple", "red"])
    assert meta["vocabulary"] == ["green", "blue", "red"]
    assert out == [[2, 3], [3], [2]]


def test_an_outputs_unseen_labels_count_once_per_distinct_item(make_processor, fit_transform):
    _, out = fit_transform(set_feature(make_processor, output=True), TRAIN,
                           ["purple red purple gold", "gold gold", None, "purple"])
    assert out == [[3, 2, 3], [3], [], [3]]


def test_an_outputs_target_tensor_counts_unseen_labels_in_a_trailing_column(make_processor, fit_transform):
    processor = set_feature(make_processor, output=True)
    meta, out = fit_transform(processor, TRAIN, ["red purple gold", "green", "purple"])
    target = column_tensor(pa.array(out, pa.list_(pa.int32())), {"type": "set", "output": True, **meta})
    assert target.tolist() == [[0, 0, 1, 2], [1, 0, 0, 0], [0, 0, 0, 1]]


def test_an_inputs_tensor_has_no_unseen_column(make_processor, fit_transform):
    meta, out = fit_transform(set_feature(make_processor), TRAIN, ["red purple"])
    tensor = column_tensor(pa.array(out, pa.list_(pa.int32())), {"type": "set", "output": False, **meta})
    assert tensor.tolist() == [[1, 0, 0, 1]]  # purple is the unknown item <UNK>, as before


def test_most_common_caps_the_labels(make_processor, fit_transform):
    meta, out = fit_transform(set_feature(make_processor, most_common=1), TRAIN, ["red green"])
    assert meta["vocabulary"] == ["<UNK>", "green"]
    assert out == [[0, 1]]


def test_comma_tokenizer_trims_spaces_and_skips_empty_items(make_processor, fit_transform):
    meta, out = fit_transform(set_feature(make_processor, tokenizer="comma"), ["new york, paris", "paris,,", " rome "])
    assert meta["vocabulary"] == ["<UNK>", "paris", "new york", "rome"]
    assert [labels(meta, row) for row in out] == [{"new york", "paris"}, {"paris"}, {"rome"}]


def test_lowercase(make_processor, fit):
    assert fit(set_feature(make_processor, lowercase=True), ["A b", "a B"])["vocabulary"] == ["<UNK>", "a", "b"]


def test_missing_cells_are_the_empty_set_by_default(make_processor, fit_transform):
    assert fit_transform(set_feature(make_processor), TRAIN, [None])[1] == [[]]


def test_fill_with_mode_uses_the_most_frequent_training_cell(make_processor, fit_transform):
    processor = set_feature(make_processor, missing_value_strategy="fill_with_mode")
    meta, out = fit_transform(processor, ["a b", "c", "a b", None])
    assert meta["fill_value"] == "a b"
    assert labels(meta, out[3]) == {"a", "b"}


def test_fill_with_const(make_processor, fit_transform):
    meta, out = fit_transform(set_feature(make_processor, fill_value="blue"), TRAIN, [None])
    assert labels(meta, out[0]) == {"blue"}


def test_output_is_lists_of_int32(make_processor, fit):
    processor = set_feature(make_processor)
    meta = fit(processor, TRAIN)
    assert processor.transform(processor.prepare(pa.array(["red"])), meta).type == pa.list_(pa.int32())


def test_statistics_do_not_depend_on_partitioning(make_processor, fit):
    processor = set_feature(make_processor, missing_value_strategy="fill_with_mode")
    assert fit(processor, TRAIN) == fit(processor, TRAIN[:2], [], TRAIN[2:])


def test_set_elements_split_on_underscores(make_processor, fit_transform):
    meta, out = fit_transform(make_processor("set", {"tokenizer": "underscore", "most_common": None}), ["a_b", "b"])
    assert meta["vocabulary"] == ["<UNK>", "b", "a"]
    assert out == [[2, 1], [1]]


def test_comma_and_underscore_tokenizers_take_a_column_read_in_several_chunks():
    from plait.features.text_ops import tokenize

    column = pa.chunked_array([["a, b", "c"], ["d,e", None]])
    for tokenizer, expected in (("comma", [["a", "b"], ["c"], ["d", "e"], []]),
                                ("underscore", [["a, b"], ["c"], ["d,e"], []])):
        assert tokenize(column, tokenizer, False).to_pylist() == expected
