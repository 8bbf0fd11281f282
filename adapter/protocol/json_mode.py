"""JSON mode (spec §7.1): validating a body, splitting it into messages, rendering a read.

Each message is kept as its exact source text: the value's bytes as the client sent them,
without the surrounding whitespace. We do not re-serialise (`json.dumps` of `json.loads`),
because the conformance suite only compares parsed values (no test reads JSON bytes back,
apart from `[]` for an empty read), while a round trip through Python objects would alter or
break valid input: `1E2` becomes `100.0`, `-0` becomes `0`, `1e400` becomes `Infinity` (which
is not JSON), and an escaped lone surrogate such as `"\\ud800"` cannot be encoded as UTF-8.
Source text keeps numbers, escapes and key order exactly, so a read is byte-stable.

A top-level array is split element by element, counted as it goes: past `limit` elements the
body is refused (413) without reading further. Parsed whole first, an 8 KiB gzip body of 4
million zeros held the event loop 2.2 s and ~120 MB before its 413.

No value is parsed whole in one call either: the largest body (8 MiB) held as one value (an
object of 700,000 keys) took Python's parser 1.5 s, during which nothing else ran, and a thread
does not help (the parser never lets go of the GIL). The body is walked in steps instead
(`split_steps`): each step parses at most `STEP_CHARS` of text, the members of a container
one after another within that window, and a container that does not end within it is entered
and walked the same way. The caller yields to its event loop between steps; `split_append`
runs them all at once for callers that have none.
"""

from __future__ import annotations

import re
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Final, TypeVar

from adapter.protocol.errors import ErrorCode, ProtocolError
from adapter.protocol.json_bodies import DECODER, TOO_DEEP, invalid

_SPACE: Final = re.compile(r"[ \t\n\r]*")  # RFC 8259 whitespace; str.strip() would take more
# The most text one step parses: about 10 ms of the slowest shape (an object's short keys).
STEP_CHARS: Final = 64 * 1024
# Containers the walk enters, one inside another, at most (Python's own parser gives up
# near 1,000 too, deep in a request's handling).
MAX_DEPTH: Final = 1_000
# Members parsed one by one in a step at most (a few microseconds of Python each), when no run
# of them parses at once (strings holding brackets hide where runs end).
MEMBERS_PER_STEP: Final = 1_000
COMMAS_TRIED: Final = 16  # where a run of members may end, looked for from a window's end
_NUMBER_GOES_ON: Final = frozenset("0123456789.eE+-")
T = TypeVar("T")
Steps = Generator[None, None, T]  # yields between steps, returns the result


def split_append(body: bytes, limit: int) -> list[bytes]:
    """The messages of a POST body: the elements of a top-level array (at most `limit`), or
    the one value.

    An empty array is EMPTY_JSON_ARRAY, an empty body EMPTY_BODY, anything that is not
    exactly one JSON text (in UTF-8) INVALID_JSON, more than `limit` elements
    PAYLOAD_TOO_LARGE.
    """
    return run(append_steps(body, limit))


def split_initial(body: bytes, limit: int) -> list[bytes]:
    """The messages of a PUT body: as for an append, but `[]` or no body means none."""
    return run(split_steps(body, limit)) if body else []


def append_steps(body: bytes, limit: int) -> Steps[list[bytes]]:
    """`split_append` in steps."""
    if not body:
        raise ProtocolError(ErrorCode.EMPTY_BODY, "a JSON append needs a body")
    messages = yield from split_steps(body, limit)
    if not messages:
        raise ProtocolError(ErrorCode.EMPTY_JSON_ARRAY, "an empty JSON array appends nothing")
    return messages


def split_steps(body: bytes, limit: int) -> Steps[list[bytes]]:
    """The body's messages, found in steps of at most `STEP_CHARS` parsed each."""
    text = _text(body)
    start = _skip(text, 0)
    elements: list[tuple[int, int]] | None = [] if text.startswith("[", start) else None
    end = yield from _walk(text, start, elements, limit)
    _decode_end(text, end)
    if elements is None:
        return [text[start:end].encode()]
    return [text[first:last].encode() for first, last in elements]


@dataclass(frozen=True)
class SplitBody:
    """A JSON body split before its command is decided (in steps, by the HTTP edge): its
    messages, or the refusal the split met, raised where the split would have been made so
    that a request's errors come in the same order either way."""

    messages: tuple[bytes, ...] = ()
    refusal: ProtocolError | None = None

    def result(self) -> list[bytes]:
        if self.refusal is not None:
            raise self.refusal
        return list(self.messages)


def run(steps: Steps[T]) -> T:
    """All the steps at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]


def render_array(messages: Sequence[bytes]) -> bytes:
    """A read's body: the messages as one JSON array (`[]` when there are none)."""
    return b"[" + b",".join(messages) + b"]"


def _text(body: bytes) -> str:
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as error:
        raise invalid(f"body is not UTF-8 (byte {error.start})") from None


class _Expect(Enum):
    """What the walk may meet next in the innermost container."""

    FIRST = "a member or the closer"
    MEMBER = "a member"  # after a comma
    NEXT = "a comma or the closer"
    COLON = "the colon after a key"
    VALUE = "a member's value"  # after its key and colon


class _Walk:
    """Where a walk through nested containers stands: the closers of the containers it is
    in, what comes next, and the spans of the outermost array's elements found so far (when
    they are wanted), at most `limit` of them."""

    def __init__(self, text: str, elements: list[tuple[int, int]] | None, limit: int) -> None:
        self.text, self.elements, self.limit = text, elements, limit
        self.closers: list[str] = []
        self.expect = _Expect.FIRST
        self.element_start = 0  # where the outermost container's current member began

    def enter(self, position: int) -> int:
        """Into the container opening at `position`; where its inside starts."""
        if len(self.closers) >= MAX_DEPTH:
            raise invalid(f"body JSON is {TOO_DEEP}")
        self.closers.append("]" if self.text[position] == "[" else "}")
        self.expect = _Expect.FIRST
        return position + 1

    def member_begins(self, position: int) -> None:
        if len(self.closers) == 1:
            self.element_start = position

    def comma(self) -> None:
        """A comma in the outermost array: another element follows, one past `limit` when it
        holds that many already (refused before anything of it is read)."""
        self.expect = _Expect.MEMBER
        if self.recording() and len(self.elements or ()) == self.limit:
            raise ProtocolError(
                ErrorCode.PAYLOAD_TOO_LARGE,
                f"a JSON array of more than {self.limit} messages; at most {self.limit} are "
                "written by one request",
            )

    def member_ends(self, end: int) -> None:
        self.expect = _Expect.NEXT
        if len(self.closers) == 1 and self.elements is not None:
            self.elements.append((self.element_start, end))

    def recording(self) -> bool:
        """Whether the members of the innermost container are the elements asked for."""
        return len(self.closers) == 1 and self.elements is not None

    def leave(self, end: int) -> None:
        """The innermost container closed just before `end`."""
        self.closers.pop()
        if self.closers:
            self.member_ends(end)


def _walk(
    text: str, position: int, elements: list[tuple[int, int]] | None, limit: int
) -> Steps[int]:
    """Where the JSON value at `position` ends, with the spans of its elements in `elements`
    when it is an array; every step parses at most `STEP_CHARS` of it."""
    if not text.startswith(("[", "{"), position):
        return _decode(text, position)  # a scalar: at C speed, whatever its length
    walk = _Walk(text, elements, limit)
    position = walk.enter(position)
    while True:
        position = _window(walk, position)
        if not walk.closers:
            return position
        yield  # only between windows: a body parsed in one costs its caller no turn


def _window(walk: _Walk, position: int) -> int:
    """The walk through one window of text from `position`: where it goes on (past the whole
    value once the outermost container closed). A token the window cuts is left whole for
    the next window, which starts with it."""
    window = walk.text[position : position + STEP_CHARS]
    whole = position + len(window) == len(walk.text)  # no text lies past the window
    at = 0
    runs = True  # runs of members parsed at once, until one attempt fails in this window
    walked = 0  # members parsed one by one
    while walk.closers:
        at = _skip(window, at)
        if at == len(window):
            if whole:
                raise invalid("body is not valid JSON: it ends inside a container")
            return position + at
        after = _punctuation(walk, window, at, position)
        if after is not None:
            at = after
            continue
        if runs and walk.expect in (_Expect.FIRST, _Expect.MEMBER) and not walk.recording():
            after = _run(walk, window, at, position)
            if after is not None:
                at = after
                continue
            runs = False
        if walk.expect in (_Expect.FIRST, _Expect.MEMBER):
            walk.member_begins(position + at)
        if walk.expect is not _Expect.VALUE and walk.closers[-1] == "}":
            if not window.startswith('"', at):
                raise invalid(f"body is not valid JSON: a key expected (char {position + at})")
            walk.expect = _Expect.COLON  # the key is a value like any, then a colon follows
        ends = _parsed(window, at, whole)
        if ends is not None:
            at = ends
            if walk.expect is not _Expect.COLON:
                walk.member_ends(position + ends)
            walked += 1
            if walked == MEMBERS_PER_STEP:
                return position + at  # a step's worth of Python per member: the next step
        elif at > 0:
            return _cut(walk, position + at)
        elif window.startswith(("[", "{")) and walk.expect is not _Expect.COLON:
            return walk.enter(position)  # larger than a window: walked inside
        else:
            return _scalar(walk, position)
    return position + at


def _run(walk: _Walk, window: str, at: int, position: int) -> int | None:
    """Past a run of the innermost container's members from `at`, parsed in one call: up to
    a comma of the same depth, or through the container's closer; None if neither parses.
    Each member walked alone costs a few microseconds of Python, a run of thousands costs
    what the C parser takes for their text. A run parsed as a container of its own is valid
    here too: the parser is in the same state at `at` either way."""
    closer = walk.closers[-1]
    if window.startswith(closer, at):
        return None  # a closer where a member is due (after a comma): the walk refuses it
    opener = "[" if closer == "]" else "{"
    for cut in _commas(window, at):
        if _parses_whole(opener + window[at:cut] + closer):
            walk.expect = _Expect.MEMBER
            return cut + 1
    try:
        _, end = DECODER.raw_decode(opener + window[at:])
    except (ValueError, RecursionError):
        return None
    closed = at + end - 1  # past the closer, in the window
    walk.leave(position + closed)
    return closed


def _commas(window: str, at: int) -> list[int]:
    """Commas after `at` where the brackets since `at` balance (strings aside, which the
    parse then tells), the window's last first: at most two, among its last `COMMAS_TRIED`."""
    found: list[int] = []
    end = len(window)
    for _ in range(COMMAS_TRIED):
        cut = window.rfind(",", at, end)
        if cut <= at:
            break
        if _balanced(window, at, cut):
            found.append(cut)
            if len(found) == 2:
                break
        end = cut
    return found


def _balanced(window: str, start: int, end: int) -> bool:
    opened = window.count("[", start, end) + window.count("{", start, end)
    return opened == window.count("]", start, end) + window.count("}", start, end)


def _parses_whole(text: str) -> bool:
    try:
        _, end = DECODER.raw_decode(text)
    except (ValueError, RecursionError):
        return False
    return end == len(text)


def _punctuation(walk: _Walk, window: str, at: int, position: int) -> int | None:
    """Past the closer, comma or colon at `at` if one is due there; None if a value is."""
    expect, closer = walk.expect, walk.closers[-1]
    if expect in (_Expect.FIRST, _Expect.NEXT) and window.startswith(closer, at):
        walk.leave(position + at + 1)
        return at + 1
    wanted = {_Expect.NEXT: ",", _Expect.COLON: ":"}.get(expect)
    if wanted is None:
        return None
    if not window.startswith(wanted, at):
        wants = f"',' or '{closer}'" if wanted == "," else "':'"
        raise invalid(f"body is not valid JSON: {wants} expected (char {position + at})")
    if wanted == ",":
        walk.comma()
    else:
        walk.expect = _Expect.VALUE
    return at + 1


def _cut(walk: _Walk, position: int) -> int:
    """A key or value cut by the window's end: the next window starts with it, expecting
    what this one did there."""
    if walk.expect is _Expect.COLON:
        walk.expect = _Expect.MEMBER  # the key is read again
    return position


def _scalar(walk: _Walk, position: int) -> int:
    """A key or scalar value longer than a window (or invalid), parsed whole from the text:
    strings parse at C speed, so this step stays short."""
    end = _decode(walk.text, position)
    if walk.expect is not _Expect.COLON:
        walk.member_ends(end)
    return end


def _parsed(window: str, at: int, whole: bool) -> int | None:
    """Where the value at `at` ends if it ends within the window, followed by more of it that
    cannot be part of it (a number cut by the window's end, `1.` of `1.5`, would parse as a
    shorter one); else None."""
    try:
        _, end = DECODER.raw_decode(window, at)
    except (ValueError, RecursionError):  # invalid, too deep, or cut: told apart by the walk
        return None
    if whole:
        return end
    return end if end < len(window) and window[end] not in _NUMBER_GOES_ON else None


def _decode(text: str, position: int) -> int:
    """Where the JSON value starting at `position` ends."""
    try:
        _, end = DECODER.raw_decode(text, position)
    except ValueError as error:  # JSONDecodeError is a ValueError, as is a rejected NaN
        raise invalid(f"body is not valid JSON: {error}") from None
    except RecursionError:
        raise invalid(f"body JSON is {TOO_DEEP}") from None
    return end


def _decode_end(text: str, position: int) -> None:
    """Nothing but whitespace may follow the body's one value."""
    if _skip(text, position) != len(text):
        raise invalid(f"body is not valid JSON: extra data (char {position})")


def _skip(text: str, position: int) -> int:
    return _SPACE.match(text, position).end()  # type: ignore[union-attr]
