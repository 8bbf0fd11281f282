"""Content codings: the one a request body may arrive in, and the one an answer is sent in.

A request body coded `gzip` or `zstd` is decoded before it is used and stored as the decoded
bytes (`x-gzip` is gzip's old name, RFC 9110 §8.4.1.3); `identity` is no coding. Any other
coding, or two codings stacked, is 415: a 2xx must mean the bytes meant are in the log.

An answer is coded in the coding the client's `Accept-Encoding` weighs highest among those
we send (RFC 9110 §12.5.3); on a tie, zstd, which is faster at a better ratio. `*` stands for
any coding the header does not name; `q=0` refuses one.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from adapter.protocol.errors import ErrorCode, ProtocolError

GZIP: Final = "gzip"
ZSTD: Final = "zstd"
# Ours to send, in our order of preference when a client weighs them alike.
SENT: Final = (ZSTD, GZIP)
_DECODED: Final = {GZIP: GZIP, "x-gzip": GZIP, ZSTD: ZSTD}


def request_coding(values: Iterable[str]) -> str | None:
    """Content-Encoding (every line of it): None for no coding (or `identity`), else the one
    coding we decode; 415 for any other, or for more than one."""
    codings = [c.strip(" \t").lower() for value in values for c in value.split(",")]
    coded = [coding for coding in codings if coding and coding != "identity"]
    if not coded:
        return None
    if len(coded) > 1 or coded[0] not in _DECODED:
        raise ProtocolError(
            ErrorCode.UNSUPPORTED_MEDIA_TYPE,
            f"Content-Encoding {', '.join(coded)} is not taken: send the body uncoded, "
            "or coded once in gzip or zstd",
        )
    return _DECODED[coded[0]]


def response_coding(accept_encoding: str | None) -> str | None:
    """The coding to send an answer in, or None (uncoded) when the client accepts neither."""
    weights = _weights(accept_encoding or "")
    best = max(SENT, key=lambda coding: _weight(weights, coding))  # the first of a tie
    return best if _weight(weights, best) > 0 else None


def accepts(accept_encoding: str | None, coding: str) -> bool:
    """Whether the client takes an answer in `coding`."""
    return _weight(_weights(accept_encoding or ""), coding) > 0


def _weight(weights: dict[str, float], coding: str) -> float:
    return weights.get(coding, weights.get("*", 0.0))


def _weights(header: str) -> dict[str, float]:
    """Each coding the header names, with its weight (1 when not given, 0 when unreadable)."""
    weights: dict[str, float] = {}
    for item in header.split(","):
        name, *params = (part.strip(" \t") for part in item.split(";"))
        if name:
            weights[name.lower()] = _quality(params)
    if "x-gzip" in weights and GZIP not in weights:
        weights[GZIP] = weights["x-gzip"]
    return weights


def _quality(params: list[str]) -> float:
    for param in params:
        key, _, value = param.partition("=")
        if key.strip(" \t").lower() == "q":
            try:
                return min(max(float(value.strip(" \t")), 0.0), 1.0)
            except ValueError:
                return 0.0
    return 1.0
