"""The one reader of JSON request bodies: every malformed body is INVALID_JSON (400).

A body that is not UTF-8, not exactly one JSON text, or that uses Python's extensions to JSON
(`NaN`, `Infinity`) is refused; so is one nested deeper than the parser can follow, which
Python's decoder reports as a `RecursionError` (100,000 `[` in a few hundred kilobytes): left
to the errors middleware it would be a 500. Control bodies (trims, bucket configurations,
mounts) use `read_json`; JSON-mode appends split their bodies with the same decoder
(`json_mode.py`), so both refuse the same inputs.
"""

from __future__ import annotations

import json
from typing import Any, Final

from adapter.protocol.errors import ErrorCode, ProtocolError


def _reject_constant(name: str) -> object:
    raise ValueError(f"{name} is not JSON")


# Python's decoder accepts NaN, Infinity and -Infinity by default: they are not JSON.
DECODER: Final = json.JSONDecoder(parse_constant=_reject_constant)
TOO_DEEP: Final = "nested too deeply"


def read_json(body: bytes, what: str) -> Any:
    """The JSON value of `body`; `what` names the body in the error's message."""
    try:
        return DECODER.decode(body.decode("utf-8"))
    except UnicodeDecodeError as error:
        raise invalid(f"{what}: not UTF-8 (byte {error.start})") from None
    except ValueError as error:  # JSONDecodeError is a ValueError, as is a rejected NaN
        raise invalid(f"{what}: not valid JSON: {error}") from None
    except RecursionError:
        raise invalid(f"{what}: {TOO_DEEP}") from None


def invalid(message: str) -> ProtocolError:
    return ProtocolError(ErrorCode.INVALID_JSON, message)
