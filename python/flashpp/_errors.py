"""Errors raised on the Python side, with the same classes and message format
("flashpp: <argument>: <rule>") as the ones translated from the C++ core."""

from ._core import BackendError, Error, InvalidTypeError, InvalidValueError, NotSupportedError

_CLASSES = {
    "value": InvalidValueError,
    "type": InvalidTypeError,
    "not_supported": NotSupportedError,
    "runtime": BackendError,
}


def make_error(kind: str, argument: str, rule: str) -> Error:
    """Builds the exception for `kind` ('value', 'type', 'not_supported', 'runtime')."""
    exc = _CLASSES[kind](f"flashpp: {argument}: {rule}")
    exc.argument = argument
    exc.kind = kind
    return exc


def fail(kind: str, argument: str, rule: str):
    raise make_error(kind, argument, rule)


__all__ = [
    "Error",
    "InvalidValueError",
    "InvalidTypeError",
    "NotSupportedError",
    "BackendError",
    "make_error",
    "fail",
]
