"""Text features: rule-based tokenizers (space, space_punct, characters, ...) or BPE subwords,
padded id sequences; the vocabulary from the training split or a vocabulary file.

Vocabulary index 0 is padding and 1 the unknown token. BPE is trained on the training split's
word counts (the merged map-reduce statistics), never downloaded.
"""

from __future__ import annotations

import hashlib
import logging

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from plait.errors import DataError
from plait.features import hf_tokens
from plait.features import stats as st
from plait.features.base import FeatureProcessor
from plait.features.text_ops import as_strings, encode_tokens, first_values, fixed_size_list, row_lists, tokenize
from plait.utils.ragged import pad
from plait.utils.tokens import CACHED_EMBEDDING, ID_OFFSET, STOP_ID
from plait.utils.hf_models import MODEL_CONFIG, encoder_model_config, is_hf_encoder, tokenizer_fingerprint, tokenizer_json

log = logging.getLogger(__name__)


START_SYMBOL, STOP_SYMBOL = "<SOS>", "<EOS>"
"""An output's vocabulary has these after padding and unknown (indices 2 and 3): the generator
starts from the start token and ends a sequence with the stop token."""


class TextProcessor(FeatureProcessor):
    type = "text"

    def prepare(self, column: pa.Array) -> pa.Array:
        return as_strings(column)

    def _words(self, column: pa.Array) -> pa.ListArray:
        pp = self.preprocessing
        word_tokenizer = "space_punct" if pp.tokenizer == "bpe" else pp.tokenizer
        return tokenize(column, word_tokenizer, pp.lowercase)

    @property
    def _hf(self) -> bool:
        return self.preprocessing.tokenizer == "hf_tokenizer"

    def _hf_setting(self) -> str:
        """The setting that names the tokenizer's model, for errors: the encoder's, where the
        encoder set it."""
        section = "encoder" if is_hf_encoder(self.config.encoder) else "preprocessing"
        return f"input feature {self.name!r} {section}.pretrained_model_name_or_path"

    def partial_stats(self, column: pa.Array) -> dict:
        if self._hf:
            return self._hf_partial_stats(column)
        words = self._words(column)
        lengths = pc.list_value_length(words).fill_null(0)
        cap = self.preprocessing.max_sequence_length
        return {
            "counts": st.value_counts(pc.list_flatten(words)),
            "max_length": int(pc.max(lengths).as_py() or 0),
            "texts": st.value_counts(column) if self.preprocessing.missing_value_strategy == "fill_with_mode" else None,
            "rows": len(column),
            "too_long": int(pc.sum(pc.greater(lengths, cap)).as_py() or 0) if cap is not None else 0,
        }

    def merge_stats(self, a: dict, b: dict) -> dict:
        return {
            "counts": st.merge_counts(a["counts"], b["counts"]),
            "max_length": max(a["max_length"], b["max_length"]),
            "texts": st.merge_counts(a["texts"], b["texts"]),
            "rows": a.get("rows", 0) + b.get("rows", 0),
            "too_long": a.get("too_long", 0) + b.get("too_long", 0),
        }

    def _hf_partial_stats(self, column: pa.Array) -> dict:
        """Rows longer than the model takes are counted (the tokenizer runs twice: here uncut)."""
        pp = self.preprocessing
        cap = hf_tokens.sequence_cap(pp.pretrained_model_name_or_path, pp.max_sequence_length, self._hf_setting())
        serialized = tokenizer_json(pp.pretrained_model_name_or_path, self._hf_setting())
        counts = hf_tokens.token_counts(column.fill_null("").to_pylist(), serialized)
        return {"counts": None, "max_length": int(counts.max(initial=0)), "rows": len(column),
                "texts": st.value_counts(column) if pp.missing_value_strategy == "fill_with_mode" else None,
                "too_long": int((counts > cap).sum())}

    def finalize(self, stats: dict) -> dict:
        if self.is_output:
            return self._finalize_output(stats)
        pp = self.preprocessing
        if self._hf:
            meta = hf_tokens.finalize(pp.pretrained_model_name_or_path, pp.max_sequence_length, self._hf_setting())
            if stats.get("too_long"):
                log.warning("Input feature %r: %d of %d training rows have more than %d tokens (the model's context, "
                            "or preprocessing.max_sequence_length); they are cut to that length.",
                            self.name, stats["too_long"], stats["rows"], meta["sequence_length"])
            if is_hf_encoder(self.config.encoder):
                meta[MODEL_CONFIG] = encoder_model_config(self.config.encoder, self._hf_setting(),
                                                          len(meta["vocabulary"]) - ID_OFFSET)
                if pp.cache_encoder_embeddings:
                    self._cache_embeddings(meta)
            return {**meta, "fill_value": self.fill_value(stats["texts"])}
        specials = [pp.padding_symbol, pp.unknown_symbol]
        meta = {"fill_value": self.fill_value(stats["texts"])}
        if pp.tokenizer == "bpe":
            tokenizer = _train_bpe(stats["counts"], pp.most_common, specials)
            meta["bpe"] = tokenizer.to_str()
            meta["vocabulary"] = [t for t, _ in sorted(tokenizer.get_vocab().items(), key=lambda kv: kv[1])]
            # Subwords make sequences longer than words; leave room, within the cap.
            meta["sequence_length"] = _capped(max(1, 2 * stats["max_length"]), pp.max_sequence_length)
        else:
            words = read_vocabulary(pp.vocab_file) if pp.vocab_file else st.most_common(stats["counts"], pp.most_common)
            meta["vocabulary"] = specials + [str(w) for w in dict.fromkeys(words) if w not in specials]
            meta["sequence_length"] = _capped(max(1, stats["max_length"]), pp.max_sequence_length)
        if pp.sequence_length is not None:
            meta["sequence_length"] = pp.sequence_length
        meta["padding"] = pp.padding
        return meta

    def _cache_embeddings(self, meta: dict) -> None:
        """Mark the feature's encoder output as computed at preprocessing, where it never changes
        in training (a frozen pretrained model, reducing the sequence)."""
        encoder = self.config.encoder
        if not (encoder.caches_embeddings and encoder.use_pretrained):
            log.warning("Input feature %r: cache_encoder_embeddings has no effect: the encoder's output changes in "
                        "training or keeps the sequence (it needs trainable: false, use_pretrained: true and a "
                        "reduce_output other than attention or null)", self.name)
            return
        from plait.models.hf_encoders import output_width  # torch and transformers: only for this

        meta[CACHED_EMBEDDING] = output_width(encoder, meta)

    def _finalize_output(self, stats: dict) -> dict:
        """An output's vocabulary (with the start and stop tokens) and length. A generated
        sequence ends with the stop token, so it has room for one more; a tagged one does not."""
        pp = self.preprocessing
        specials = [pp.padding_symbol, pp.unknown_symbol, START_SYMBOL, STOP_SYMBOL]
        words = read_vocabulary(pp.vocab_file) if pp.vocab_file else st.most_common(stats["counts"], pp.most_common)
        generated = self.config.decoder.type == "generator"
        length = pp.sequence_length or _capped(max(1, stats["max_length"]), pp.max_sequence_length)
        if stats.get("too_long"):
            log.warning("Output feature %r: %d of %d training rows have more than %d tokens "
                        "(preprocessing.max_sequence_length); they are cut to that length.",
                        self.name, stats["too_long"], stats["rows"], pp.max_sequence_length)
        return {"fill_value": self.fill_value(stats["texts"]),
                "vocabulary": specials + [str(w) for w in dict.fromkeys(words) if w not in specials],
                "sequence_length": length + generated, "generated": generated, "padding": "right"}

    def cache_inputs(self) -> dict:
        if self._hf:
            encoder = self.config.encoder if is_hf_encoder(self.config.encoder) else None
            return {"hf_tokenizer": tokenizer_fingerprint(self.preprocessing.pretrained_model_name_or_path,
                                                          self._hf_setting()),
                    # the model config stored with the tokens (plait.utils.hf_models.encoder_model_config)
                    "hf_model": encoder and [encoder.type, encoder.use_pretrained, getattr(encoder, "architecture", {})]}
        if not self.preprocessing.vocab_file:
            return {}
        return {"vocab_file": hashlib.sha256("\n".join(read_vocabulary(self.preprocessing.vocab_file)).encode()).hexdigest()}

    def transform(self, column: pa.Array, metadata: dict) -> pa.Array:
        column = self.fill(column, metadata["fill_value"])
        if "hf_tokenizer" in metadata:
            tokens = hf_tokens.encode(column.fill_null("").to_pylist(), metadata["hf_tokenizer"],
                                      metadata["sequence_length"])
            if CACHED_EMBEDDING in metadata:
                from plait.models.hf_encoders import embed_tokens  # torch and transformers: only for this

                return embed_tokens(self.config.encoder, metadata, tokens, self.name)
            return tokens
        if "bpe" in metadata:
            flat, lengths = _bpe_encode(column, metadata["bpe"], self.preprocessing.lowercase)
        else:
            flat, lengths = encode_tokens(self._words(column), metadata["vocabulary"], unknown=1)
        length = metadata["sequence_length"]
        if metadata.get("generated"):  # the tokens, cut to leave room for the stop token, then it
            flat, lengths = _with_stop(flat, lengths, length - 1)
        if "padding" in metadata:  # each row's tokens, cut to the length: the batches pad them
            return row_lists(*first_values(flat, lengths, length), pa.int32())
        # The metadata of a model saved before token lists were stored: rows padded to the length.
        left = self.preprocessing.padding == "left" and not self.is_output
        return fixed_size_list(pad(flat, lengths, length, 0, left), pa.int32())


def _with_stop(flat: np.ndarray, lengths: np.ndarray, room: int) -> tuple[np.ndarray, np.ndarray]:
    """Each row's first ``room`` tokens followed by the stop token."""
    kept = np.minimum(lengths, room)
    rows = np.repeat(np.arange(len(lengths)), kept)
    within = np.arange(int(kept.sum())) - np.repeat(np.cumsum(kept) - kept, kept)
    source = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)[rows] + within
    target = np.concatenate([[0], np.cumsum(kept + 1)[:-1]]).astype(np.int64)[rows] + within
    out = np.full(int(kept.sum()) + len(lengths), STOP_ID, dtype=np.int32)
    out[target] = flat[source]
    return out, kept + 1


def _capped(length: int, cap: int | None) -> int:
    return length if cap is None else min(cap, length)


def read_vocabulary(path: str) -> list[str]:
    """The tokens of a vocabulary file: the first space-separated word of each non-empty line."""
    import fsspec

    try:
        with fsspec.open(path, "r", encoding="utf-8") as f:
            lines = [line.strip() for line in f]
    except (OSError, UnicodeDecodeError) as exc:
        raise DataError(f"preprocessing.vocab_file {path!r} cannot be read ({exc}); give a UTF-8 text file "
                        f"with one token per line") from None
    return [line.split(" ")[0] for line in lines if line]


BPE_WORD_CHARACTERS = 100
"""BPE learns subwords from words of at most this many characters; a longer word (a hash, a
base64 blob, a text without spaces) is learned from as its pieces of this length. The trainer's
work grows with each word's length times the merges it makes, so a single 1 MB word would keep it
busy for hours, and no useful subword is this long. Encoding still reads every word whole."""


def _train_bpe(counts, vocab_size: int, specials: list[str]):
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE(unk_token=specials[1]))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size + len(specials), special_tokens=specials, show_progress=False)
    words = sorted(_in_pieces(counts).items()) if counts is not None else []
    # The trainer takes text; each word is repeated by its count (in chunks) so that training
    # sees exactly the merged word frequencies, in an order independent of partitioning.
    chunks = ((word + " ") * min(count - start, 10_000) for word, count in words for start in range(0, count, 10_000))
    tokenizer.train_from_iterator(chunks, trainer=trainer)
    return tokenizer


def _in_pieces(counts) -> dict[str, int]:
    """The word counts, with each word longer than BPE_WORD_CHARACTERS counted as its pieces."""
    if counts.empty or counts.index.str.len().max() <= BPE_WORD_CHARACTERS:
        return dict(counts.items())
    pieces: dict[str, int] = {}
    for word, count in counts.items():
        for start in range(0, len(word), BPE_WORD_CHARACTERS):
            piece = word[start : start + BPE_WORD_CHARACTERS]
            pieces[piece] = pieces.get(piece, 0) + int(count)
    return pieces


def _bpe_encode(column: pa.Array, serialized: str, lowercase: bool) -> tuple[np.ndarray, np.ndarray]:
    from tokenizers import Tokenizer

    tokenizer = Tokenizer.from_str(serialized)
    words = tokenize(column, "space_punct", lowercase)
    texts = pc.binary_join(words, " ").fill_null("").to_pylist()
    ids = [encoding.ids for encoding in tokenizer.encode_batch(texts, add_special_tokens=False)]
    lengths = np.fromiter((len(i) for i in ids), dtype=np.int64, count=len(ids))
    flat = np.fromiter((t for row in ids for t in row), dtype=np.int32, count=int(lengths.sum()))
    return flat, lengths


class SequenceProcessor(TextProcessor):
    """Sequence features: tokens, read and encoded as text features are (space-separated by default)."""

    type = "sequence"
