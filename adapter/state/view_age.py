"""How recently this instance's view of the streams was known to be current.

A stream's tail as this instance knows it comes from its own commits (slots it owns) and from
the meta follower (everyone else's). The follower can fall behind without anyone noticing: the
meta topic's leader stopped, or a commit acknowledged by a transaction coordinator that then
stalled before writing the markers that make its records readable. A read answered from that
view would say `Stream-Up-To-Date` at a tail that an acknowledged append has passed.

So the follower measures, over and over, that it has followed everything written to the meta
topic as of a moment: it asks for the meta topic's high watermark (every record written,
markers not needed) *after* noting the moment, then waits until it has followed that far
(each transaction open then committed or aborted, markers included). Every append
acknowledged before that moment is then in the catalog. `current()` says whether the last such
moment is at most `max_age_s` old; past that the instance cannot tell whether a tail it knows
is still the tail, and reads do not claim it is.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class ViewAge:
    def __init__(self, max_age_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_age_s = max_age_s
        self.clock = clock
        self._since: float | None = None  # every acknowledged change before it is followed

    def reached(self, asked_at: float) -> None:
        """Everything written to the meta topic before `asked_at` (this clock) is followed."""
        if self._since is None or asked_at > self._since:
            self._since = asked_at

    def age_s(self) -> float | None:
        """Seconds since the view was last known current; None if it never was."""
        return None if self._since is None else self.clock() - self._since

    def current(self) -> bool:
        age = self.age_s()
        return age is not None and age <= self.max_age_s
