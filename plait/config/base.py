"""The base of every config model, and the translation of pydantic errors into plait's.

Config models are plain data: strict about unknown keys, defaults declared once on the field, no
environment lookups. :func:`format_errors` turns a pydantic ``ValidationError`` into one line per
problem, each naming the dotted path (``trainer.batch_size``), the bad value and the fix.
"""

from __future__ import annotations

import ast
import difflib
import functools
import inspect
import reprlib
import sys
import types
import typing
from pathlib import Path
from typing import Any, Literal, Union

from pydantic import AfterValidator, BaseModel, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, assignments are validated, numbers are finite.
    A field's description is the docstring under it (``attribute_docstrings``)."""

    # Not pydantic's use_attribute_docstrings: on Python < 3.13 it finds each class's source by
    # asking inspect which module each frame of the import belongs to, a scan of every module
    # loaded: 0.6 s of every process that imports the config after torch (each Ray worker).
    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True, defer_build=True,
                              allow_inf_nan=False)

    @classmethod
    def __pydantic_init_subclass__(cls, **kwargs: Any) -> None:
        super().__pydantic_init_subclass__(**kwargs)
        documented = attribute_docstrings(cls.__module__).get(cls.__qualname__, {})
        for name, field in cls.model_fields.items():
            if field.description is None and name in documented:
                field.description = documented[name]

    @classmethod
    def unknown_field_reason(cls, key: str) -> str | None:
        """Why ``key`` is refused here when it is a known setting elsewhere (None: a typo)."""
        return None


@functools.cache
def attribute_docstrings(module_name: str) -> dict[str, dict[str, str]]:
    """``{class qualname: {attribute: docstring}}`` for the classes written in a module's source:
    the string literal right under an annotated attribute. Read once per module."""
    path = getattr(sys.modules.get(module_name), "__file__", None)
    if not path or not path.endswith(".py"):
        return {}
    found: dict[str, dict[str, str]] = {}

    def visit(body: list, prefix: str) -> None:
        for node in body:
            if isinstance(node, ast.ClassDef):
                qualname = prefix + node.name
                found[qualname] = {stmt.target.id: inspect.cleandoc(doc.value.value)
                                   for stmt, doc in zip(node.body, node.body[1:])
                                   if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
                                   and isinstance(doc, ast.Expr) and isinstance(doc.value, ast.Constant)
                                   and isinstance(doc.value.value, str)}
                visit(node.body, qualname + ".")
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                visit(node.body, f"{prefix}{node.name}.<locals>.")

    visit(ast.parse(Path(path).read_text(encoding="utf-8")).body, "")
    return found


class TypedModel(StrictModel):
    """A config section chosen by its ``type`` field out of a discriminated union."""

    type: str


def ludwig_only(*accepted: Any, instead: str) -> AfterValidator:
    """The check of a Ludwig setting that plait does not implement.

    The values in ``accepted`` (Ludwig's default, and any value that means what plait does anyway)
    pass: a config Ludwig rendered writes every default out, and those must validate unchanged.
    Any other value is refused by name with ``instead``, what to use in its place; a setting is
    never silently dropped. Use: ``fc_use_bias: Annotated[bool, ludwig_only(True, instead=...)] = True``.
    """

    def check(value: Any) -> Any:
        if value not in accepted:
            shown_accepted = " or ".join(repr(a) for a in accepted)
            raise ValueError(f"got {shown(value)}; plait does not implement this Ludwig setting and accepts only "
                             f"{shown_accepted} (what it does anyway): {instead}")
        return value

    check.ludwig_only = (accepted, instead)  # read by the config reference (docs.py)
    return AfterValidator(check)


LUDWIG_TYPES_NOT_IMPLEMENTED: dict[str, dict[str, str]] = {}
"""For a section chosen by ``type`` (keyed by the section's name: ``combiner``, ``encoder``,
``optimizer``, ...): the Ludwig type names plait does not implement, each with what to use
instead. An unknown type found here is refused with that advice rather than a spelling hint."""


def ludwig_types_not_implemented(section: str, advice: dict[str, str]) -> None:
    """Register Ludwig type names of ``section`` that plait refuses, with what to use instead."""
    LUDWIG_TYPES_NOT_IMPLEMENTED.setdefault(section, {}).update(advice)


LUDWIG_DEFAULT = "ludwig_default"
"""Where plait's default differs from Ludwig's, the field records Ludwig's in its schema extra:
``Field(64, gt=0, json_schema_extra={LUDWIG_DEFAULT: 256})``. The config reference shows both,
and ``plait validate`` lists the settings a config leaves at such a default."""


FIELD_ERROR = "plait_field"


def field_error(path: str, message: str) -> PydanticCustomError:
    """The error a model validator raises about one of its fields (a dotted path below the
    model), so that the user sees that field's path rather than the model's."""
    return PydanticCustomError(FIELD_ERROR, "{message}", {"field": path, "message": message})


SHOWN_CHARACTERS = 80
"""How much of a value an error message echoes: enough to recognize it, never a whole file."""

_SHORT_REPR = reprlib.Repr()  # attributes, not keywords: Python 3.11's Repr takes none
_SHORT_REPR.maxlevel = 3
_SHORT_REPR.maxlist = _SHORT_REPR.maxtuple = _SHORT_REPR.maxdict = _SHORT_REPR.maxset = 6
_SHORT_REPR.maxstring = _SHORT_REPR.maxother = _SHORT_REPR.maxlong = SHOWN_CHARACTERS


def shown(value: Any) -> str:
    """``repr(value)`` for an error message, cut to about SHOWN_CHARACTERS and marked where cut.
    Bounded work too: a value from the config may be a 50 MB string or an alias-expanded list."""
    if isinstance(value, str) and len(value) > SHOWN_CHARACTERS:
        return f"{value[:SHOWN_CHARACTERS]!r}... ({len(value):,} characters)"
    if isinstance(value, (list, tuple, dict, set)):
        text = _SHORT_REPR.repr(value)  # reprlib marks what it leaves out with ...
        return text if len(text) <= 2 * SHOWN_CHARACTERS else f"{text[:2 * SHOWN_CHARACTERS]}... ({len(value):,} items)"
    text = repr(value)
    return text if len(text) <= SHOWN_CHARACTERS else f"{text[:SHOWN_CHARACTERS]}... ({len(text):,} characters)"


def suggest(word: str, choices: typing.Iterable[str]) -> str:
    """' did you mean X?' for the closest choice, or a list of the valid choices."""
    choices = sorted(choices)
    # Only a word of a name's length can be a typo of one (and difflib's work grows with its length).
    close = difflib.get_close_matches(str(word), choices, n=1, cutoff=0.6) if _name_sized(word) else []
    if close:
        return f"did you mean {close[0]}?"
    return "valid names are: " + ", ".join(choices)


def _name_sized(word: Any) -> bool:
    return isinstance(word, (int, float)) or (isinstance(word, str) and len(word) <= 4 * SHOWN_CHARACTERS)


def format_errors(err: ValidationError, data: Any, root: type[BaseModel]) -> list[str]:
    """One readable line per pydantic error."""
    lines: list[str] = []
    union_members: dict[str, tuple[Any, list[str]]] = {}
    for e in err.errors(include_url=False):
        path, parent_cls, value, member, cls = _walk(e["loc"], data, root)
        if any(part in SECRET_FIELDS for part in path.replace("[", ".").split(".")):
            value = _HIDDEN if value is not _MISSING else value
        if member is None:
            lines.append(_describe(e, path, parent_cls, value, cls))
        else:  # one error per member of a plain union: report them as one line
            union_members.setdefault(path, (value, []))[1].append(member)
    for path, (value, members) in union_members.items():
        kinds = " or ".join(m[len("literal[") : -1] if m.startswith("literal[") else m for m in members)
        lines.append(f"{path}: got {shown(value)}; expected {kinds}")
    return lines


SECRET_FIELDS = {"cache_credentials"}
"""Fields whose values never appear in error messages."""


class _Hidden:
    def __repr__(self) -> str:
        return "*** (hidden)"


_HIDDEN = _Hidden()


def _describe(e: dict, path: str, parent_cls: type | None, value: Any, cls: Any = None) -> str:
    kind = e["type"]
    if kind == "extra_forbidden":
        key = str(e["loc"][-1])
        reason = parent_cls.unknown_field_reason(key) if parent_cls and issubclass(parent_cls, StrictModel) else None
        fields = list(parent_cls.model_fields) if parent_cls else []
        return f"{path}: {reason or 'unknown field; ' + suggest(key, fields)}"
    if kind == FIELD_ERROR:
        field = e["ctx"]["field"]
        return f"{field if path == '<config>' else path + '.' + field}: {e['msg']}"
    if kind == "union_tag_invalid":
        advice = LUDWIG_TYPES_NOT_IMPLEMENTED.get(path.rsplit(".", 1)[-1].split("[")[0], {}).get(e["ctx"]["tag"])
        if advice:
            return f"{path}.type: Ludwig's {e['ctx']['tag']!r} is not implemented in plait; {advice}"
        tags = [t.strip(" '") for t in str(e.get("ctx", {}).get("expected_tags", "")).split(",")]
        return f"{path}.type: unknown type {shown(e['ctx']['tag'])}; {suggest(e['ctx']['tag'], tags)}"
    if kind == "union_tag_not_found":
        tags = sorted(str(t) for m in _union_members(cls) for t in _literal_values(m))
        return f"{path}.type: required field is missing" + (f"; valid types are: {', '.join(tags)}" if tags else "")
    if kind == "missing":
        return f"{path}: required field is missing"
    if kind == "literal_error":
        expected = [x.strip(" '") for x in str(e["ctx"]["expected"]).replace(" or ", ", ").split(",")]
        return f"{path}: got {shown(value)}; {suggest(value, expected)}"
    message = e["msg"].removeprefix("Value error, ")
    # A validator's own message already names the value; a whole section is too long to echo.
    if value is _MISSING or kind == "value_error" or isinstance(value, dict):
        return f"{path}: {message}"
    return f"{path}: {message} (got {shown(value)})"


_MISSING = object()


def _walk(loc: tuple, data: Any, cls: Any) -> tuple[str, type | None, Any, str | None, Any]:
    """Follow an error location through the input data and the model classes.

    Discriminated unions insert their tag into pydantic's location (``encoder.dense.size``); the
    tag is dropped here so the path reads as the user wrote it (``encoder.size``), also where the
    user left the type out and a validator filled in the default. Plain unions insert a label per
    member (``batch_size.int``); the location stops there and the label is returned.
    """
    parts: list[str] = []
    node, parent_cls = data, None
    for item in loc:
        user_key = isinstance(node, dict) and item in node
        if isinstance(item, str) and not user_key:
            tagged = _tagged_member(cls, item)
            if tagged is not None or (isinstance(node, dict) and node.get("type") == item):
                cls = tagged if tagged is not None else cls
                continue  # a union tag, not a key the user wrote
            if _is_plain_union(cls) or (node is not _MISSING and not isinstance(node, (dict, list))):
                return "".join(parts), parent_cls, node, item, cls  # a plain union's member label
        if isinstance(item, int):
            parts.append(f"[{item}]")
            cls = _element_type(cls)
        else:
            parts.append(("." if parts else "") + _key_shown(item))
            cls = _member_for(cls, node)
            parent_cls = cls if _is_model(cls) else None
            cls = cls.model_fields[item].annotation if parent_cls and item in cls.model_fields else None
        node = _child(node, item)
    return "".join(parts) or "<config>", parent_cls, node, None, cls


def _key_shown(key: Any) -> str:
    """A key for a dotted path, cut like an echoed value (a YAML key can be any length)."""
    key = str(key)
    return key if len(key) <= SHOWN_CHARACTERS else f"{key[:SHOWN_CHARACTERS]}... ({len(key):,} characters)"


def _child(node: Any, item: Any) -> Any:
    try:
        return node[item]
    except (KeyError, IndexError, TypeError):
        return _MISSING


def _is_model(cls: Any) -> bool:
    return isinstance(cls, type) and issubclass(cls, BaseModel)


def _unwrap(cls: Any) -> Any:
    while typing.get_origin(cls) is typing.Annotated:
        cls = typing.get_args(cls)[0]
    return cls


def _element_type(cls: Any) -> Any:
    cls = _unwrap(cls)
    if typing.get_origin(cls) in (Union, types.UnionType):  # an optional list: its list member
        lists = [a for a in typing.get_args(cls) if typing.get_origin(_unwrap(a)) in (list, tuple)]
        cls = _unwrap(lists[0]) if len(lists) == 1 else cls
    args = typing.get_args(cls)
    if typing.get_origin(cls) in (list, tuple) and args:
        return args[0]
    return None


def _union_members(cls: Any) -> list:
    """The non-None members of a (possibly Annotated or Optional) union, a union inside it
    flattened (``Annotated[Union[A, B], ...] | None``); [] for other types."""
    cls = _unwrap(cls)
    if typing.get_origin(cls) not in (Union, types.UnionType):
        return []
    members = []
    for arg in typing.get_args(cls):
        if arg is not type(None):
            members += _union_members(arg) or [_unwrap(arg)]
    return members


def _is_plain_union(cls: Any) -> bool:
    """A union without a discriminator, of two or more types: pydantic labels its members."""
    if typing.get_origin(cls) is typing.Annotated:
        if any(getattr(meta, "discriminator", None) for meta in typing.get_args(cls)[1:]):
            return False
    return len(_union_members(cls)) > 1


def _tagged_member(cls: Any, tag: Any) -> Any:
    """The model of a discriminated union whose ``type`` takes the value ``tag``, or None."""
    if _is_model(_unwrap(cls)) and tag in _literal_values(_unwrap(cls)):
        return _unwrap(cls)  # a union of one member is that member, but pydantic still tags its errors
    for member in _union_members(cls):
        if _is_model(member) and tag in _literal_values(member):
            return member
    return None


def _member_for(cls: Any, node: Any) -> Any:
    """The model class a (possibly Optional or union) annotation resolves to for this data."""
    cls = _unwrap(cls)
    if typing.get_origin(cls) in (Union, types.UnionType):
        members = _union_members(cls)
        tag = node.get("type") if isinstance(node, dict) else None
        for member in members:
            if _is_model(member) and tag in _literal_values(member):
                return member
        models = [m for m in members if _is_model(m)]
        return models[0] if len(models) == 1 else None
    return cls


def _literal_values(model: type[BaseModel]) -> tuple:
    field = model.model_fields.get("type")
    if field is None or typing.get_origin(field.annotation) is not Literal:
        return ()
    return typing.get_args(field.annotation)
