"""Turning a command-line string (or a YAML value) into a declared field's type: the one conversion behind
``TrainConfig``'s fields and the engine specs' options."""

from __future__ import annotations

import types
import typing
from typing import Any


def coerce_value(raw: Any, annotation: Any) -> Any:
    """``raw`` as ``annotation`` (bool, int, float, str, an optional of one, or a tuple of str from a comma
    list); a value that does not fit raises ``ValueError("expected a TYPE")``."""
    args = [a for a in typing.get_args(annotation) if a is not type(None)]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType) and type(None) in typing.get_args(annotation):
        if raw is None or (isinstance(raw, str) and raw.lower() in ("none", "null", "")):
            return None
        annotation = args[0]
    if typing.get_origin(annotation) is tuple:
        return tuple(raw.split(",")) if isinstance(raw, str) else tuple(raw)
    if not isinstance(raw, str):
        if annotation is float and isinstance(raw, int) and not isinstance(raw, bool):
            return float(raw)
        if annotation in (int, float, str, bool) and not isinstance(raw, annotation):
            raise ValueError(f"expected a {annotation.__name__}")
        return raw
    if annotation is bool:
        lowered = raw.lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError("expected a bool")
    if annotation in (int, float):
        try:
            return annotation(raw)
        except ValueError:
            raise ValueError(f"expected a {annotation.__name__}") from None
    return raw
