"""Frozen records to and from JSON by their declared dataclass fields, so a record class need not spell
out a mapping per field (:class:`JsonRecord`).

``to_json``: every field under its own name, in declaration order; tuples as lists, dicts copied, nested
records (anything with ``to_json``) as theirs. ``from_json`` reads leniently (a document from an older
tunelab, or one cut short, still loads). A missing key takes the field's default, else: "" for a
``str``, 0 for an ``int`` / ``float``, False for a ``bool``, an empty tuple or dict, a nested record read
from nothing, None for an optional (``X | None``) or ``Any`` field. A present value is converted to its
field's type: ``str(v)``, ``int(v or 0)``, ``float(v or 0)``, ``bool(v)``, ``tuple(v or ())`` (its items
``int`` in a ``tuple[int, ...]``), ``dict(v or {})`` (keys and values ``str`` in a ``dict[str, str]``), a
nested record from its mapping; an optional field as stored (an optional tuple or nested record read as
one where the value is truthy / not None).

Per class, where a field's JSON differs from that rule (class attributes, see :class:`JsonRecord`):
``json_names`` (a field under another key), ``json_properties`` (a computed value written after a field),
``json_unless_none`` (a field written only when it is not None), ``json_left_out`` (a field not in the
JSON at all) and ``json_readers`` (a field read by a function of the whole document).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, Self, TypeVar

R = TypeVar("R", bound="JsonRecord")
_Reader = Callable[[Mapping[str, Any]], Any]


class JsonRecord:
    """Mixin for a frozen dataclass: ``to_json`` / ``from_json`` by its fields (the module's rules)."""

    __slots__ = ()

    json_names: ClassVar[Mapping[str, str]] = {}  # field -> its JSON key, where not its name
    json_properties: ClassVar[Mapping[str, str]] = {}  # property -> the field it is written after
    json_unless_none: ClassVar[frozenset[str]] = frozenset()  # no key while the field is None
    json_left_out: ClassVar[frozenset[str]] = frozenset()  # never written; read as the field's default
    json_readers: ClassVar[Mapping[str, _Reader]] = {}  # field -> its value from the whole document

    def to_json(self) -> dict[str, Any]:
        return fields_to_json(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Self:
        return fields_from_json(cls, data)


def fields_to_json(record: JsonRecord) -> dict[str, Any]:
    """The record's JSON by the rules (for a class whose own ``to_json`` adds to it)."""
    cls = type(record)
    after = {f: p for p, f in cls.json_properties.items()}
    data: dict[str, Any] = {}
    for f in dataclasses.fields(typing.cast(Any, record)):
        value = getattr(record, f.name)
        if f.name in cls.json_left_out or (value is None and f.name in cls.json_unless_none):
            continue
        data[cls.json_names.get(f.name, f.name)] = _written(value)
        if f.name in after:
            data[after[f.name]] = _written(getattr(record, after[f.name]))
    return data


def fields_from_json(cls: type[R], data: Mapping[str, Any]) -> R:
    """The record of ``data`` by the rules (for a class whose own ``from_json`` prepares the document)."""
    values: dict[str, Any] = {}
    for f, kind in _field_kinds(typing.cast(type, cls)):
        if f.name in cls.json_left_out:
            continue
        reader = cls.json_readers.get(f.name)
        key = cls.json_names.get(f.name, f.name)
        values[f.name] = reader(data) if reader is not None else _read(kind, f, data, key)
    return typing.cast(Any, cls)(**values)


def _written(value: Any) -> Any:
    if hasattr(value, "to_json"):
        return value.to_json()
    if isinstance(value, tuple):
        return [_written(v) for v in value]
    if isinstance(value, dict):
        return dict(value)
    return value


@functools.cache
def _field_kinds(cls: type) -> tuple[tuple[dataclasses.Field[Any], Any], ...]:
    # Resolved once per class: the annotations are strings (``from __future__ import annotations``).
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def _read(kind: Any, f: dataclasses.Field[Any], data: Mapping[str, Any], key: str) -> Any:
    if key not in data and (default := _default(f)) is not dataclasses.MISSING:
        return default
    value = data.get(key)
    origin = typing.get_origin(kind)
    if origin in (types.UnionType, typing.Union):  # X | None: as stored, a tuple or record made one
        inner = next(a for a in typing.get_args(kind) if a is not type(None))
        if typing.get_origin(inner) is tuple:
            return None if value is None else tuple(value)
        if hasattr(inner, "from_json"):
            return inner.from_json(value) if value else None
        return value
    if kind is Any:
        return value
    if origin is tuple:
        item = typing.get_args(kind)[0]
        if hasattr(item, "from_json"):
            return tuple(item.from_json(v) for v in value or ())
        return tuple(int(v) for v in value or ()) if item is int else tuple(value or ())
    if origin is dict or kind is dict:
        if typing.get_args(kind) == (str, str):
            return {str(k): str(v) for k, v in (value or {}).items()}
        return dict(value or {})
    if hasattr(kind, "from_json"):
        return kind.from_json(value or {})
    if kind is str:
        return "" if key not in data else str(value)
    if kind is bool:
        return bool(value)
    if kind in (int, float):
        return kind(value or 0)
    raise TypeError(f"{f.name}: no JSON reading for a field of type {kind!r}")
