"""Generation held to a format: a ``text_parser`` decoder's JSON schema or regular expression.

lm-format-enforcer walks the format character by character; here it learns the base model's
tokenizer (each token's text, and whether it starts a word), and at each generation step every
token that would take a row's text out of the format is ruled out. Its own transformers glue
imports names transformers 5 no longer has, so the tokenizer is read from the serialized
``tokenizers`` JSON plait keeps in the model's metadata, and the step is a logits processor of
plait's own, like a category output's ``LabelConstraint``.
"""

from __future__ import annotations

import functools

import torch

from plait.errors import BackendError, ModelError

START = -1
"""Stands for the prompt in the token sequences handed to the enforcer, which keys its states by
the whole sequence: rows share one start however their prompts differ."""


def import_lmformatenforcer():
    try:
        import lmformatenforcer
    except ImportError:
        raise BackendError("decoder.type text_parser holds generation to a format with lm-format-enforcer: "
                           "pip install plait[hf]") from None
    return lmformatenforcer


class FormatConstraint:
    """The format of a ``text_parser`` decoder, for the tokenizer ``tokenizer_json`` whose end
    token (a model id) is ``stop``."""

    def __init__(self, decoder, tokenizer_json: str, stop: int):
        self.decoder, self.tokenizer_json, self.stop = decoder, tokenizer_json, stop
        self.parser()  # a format the enforcer cannot read is refused now, not at the first answer

    def parser(self):
        enforcer = import_lmformatenforcer()
        key = "regex" if self.decoder.regex is not None else "json_schema"
        try:
            if key == "regex":
                return enforcer.RegexParser(self.decoder.regex)
            return enforcer.JsonSchemaParser(self.decoder.json_schema)
        except Exception as error:  # the enforcer's own errors have no common type
            raise ModelError(f"decoder.{key}: lm-format-enforcer cannot hold generation to it "
                             f"({type(error).__name__}: {str(error).strip() or 'unsupported'}); simplify the "
                             f"format to what it reads") from None

    def after(self, prompt_width: int) -> FormatSteps:
        """A logits processor for one ``generate`` call on prompts ``prompt_width`` tokens wide."""
        enforcer = import_lmformatenforcer()
        tokenizer = _tokenizer_data(self.tokenizer_json, self.stop)
        return FormatSteps(enforcer.TokenEnforcer(tokenizer, self.parser()), prompt_width, self.stop)


class FormatSteps:
    """One generation's steps: each row's tokens so far (after its prompt) -> the tokens allowed
    next; a row past its end token is left alone (it only pads)."""

    def __init__(self, enforcer, prompt_width: int, stop: int):
        self.enforcer, self.prompt_width, self.stop = enforcer, prompt_width, stop

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        ruled_out = torch.zeros_like(scores, dtype=torch.bool)
        for row, generated in enumerate(input_ids[:, self.prompt_width:].tolist()):
            if self.stop in generated:
                continue
            allowed = self.enforcer.get_allowed_tokens([START, *generated]).allowed_tokens
            ruled_out[row] = True
            ruled_out[row, [t for t in allowed if t < scores.shape[-1]]] = False
        return scores.masked_fill(ruled_out, float("-inf"))


@functools.lru_cache(maxsize=4)
def _tokenizer_data(tokenizer_json: str, stop: int):
    """What the enforcer needs of a tokenizer (built once per tokenizer: it decodes every token):
    each regular token's text as it reads after another token (with its leading space, if it
    starts a word) and whether it starts a word, and the decoding of token runs."""
    from tokenizers import Tokenizer

    enforcer = import_lmformatenforcer()
    tokenizer = Tokenizer.from_str(tokenizer_json)
    special = {i for i, token in tokenizer.get_added_tokens_decoder().items() if token.special}
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    tokens = [token for token in range(size) if token not in special]
    # A token's text after another's: what decoding the pair adds to decoding the first alone.
    first = tokens[0]
    lead = tokenizer.decode([first])
    regular = []
    for token in tokens:
        after = tokenizer.decode([first, token])[len(lead):]
        regular.append((token, after, len(after) > len(tokenizer.decode([token]))))

    def decode(tokens: list[int]) -> str:
        return tokenizer.decode(tokens).rstrip("\ufffd")  # a character cut between tokens is not text yet

    return enforcer.TokenEnforcerTokenizerData(regular, decode, stop, False, size)
