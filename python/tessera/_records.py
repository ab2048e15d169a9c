"""The conversion every typed object of the API shares: from the server's JSON and back.

The server adds fields over time (``classified_as`` and ``power_limit_w`` came after the
first release), so an object built from an answer keeps any key it does not know in
``extra`` instead of failing: a client older than its server must keep working. Keys a
class knows but whose value needs converting (a nested object, a list of them) are listed in
``_nested``.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Callable, Dict, List, Mapping, Type, TypeVar

R = TypeVar("R", bound="Record")


class Record:
    """Mixin for the API's dataclasses: ``from_dict`` keeps unknown keys, ``to_dict`` omits
    unset (None) fields so that the server applies its own defaults."""

    # field name -> converter from the JSON value to the field's type
    _nested: Dict[str, Callable[[Any], Any]] = {}

    @classmethod
    def from_dict(cls: Type[R], data: Mapping[str, Any]) -> R:
        if not isinstance(data, Mapping):
            raise TypeError(f"{cls.__name__}: expected a JSON object, got {type(data).__name__}")
        names = {f.name for f in dataclasses.fields(cls) if f.init} - {"extra"}  # type: ignore[arg-type]
        known: Dict[str, Any] = {}
        extra: Dict[str, Any] = {}
        for key, value in data.items():
            if key in names:
                convert = cls._nested.get(key)
                known[key] = convert(value) if convert is not None and value is not None else value
            else:
                extra[key] = value
        return cls(**known, extra=extra)  # type: ignore[call-arg]

    def to_dict(self) -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for f in dataclasses.fields(self):  # type: ignore[arg-type]
            if f.name == "extra" or not f.init:
                continue
            value = getattr(self, f.name)
            if value is None:
                continue
            out[f.name] = plain(value)
        out.update(getattr(self, "extra", {}) or {})
        return out


def plain(value: Any) -> Any:
    """JSON-ready form of a field's value (nested records, lists of them)."""
    if isinstance(value, Record):
        return value.to_dict()
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def list_of(cls: Type[R]) -> Callable[[Any], List[R]]:
    """A converter for a list of ``cls`` objects (e.g. a job's allocation)."""
    return lambda values: [cls.from_dict(v) for v in values]
