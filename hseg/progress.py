"""Progress of long work, as log lines that need no terminal.

How and why: docs/design.md, ``hseg.progress``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

#: the logger of every progress line
logger = logging.getLogger("hseg.progress")
#: seconds between two progress lines (and before the first)
INTERVAL_S = 5.0


class Progress:
    """One piece of long work's progress lines: :meth:`note` logs its message only when
    ``interval_s`` (default :data:`INTERVAL_S`) have passed since the last line it logged, or since
    it was made, so work shorter than that logs nothing and a long loop one line every few seconds.

    Example:
        >>> progress = Progress(interval_s=0.0)
        >>> progress.note("encoding sentences: %d of %d", 4096, 63246)  # logged at INFO on hseg.progress
    """

    def __init__(self, interval_s: float | None = None, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval_s = INTERVAL_S if interval_s is None else interval_s
        self._clock = clock
        self._last = clock()
        self._logged = False

    def note(self, message: str, *args: object) -> None:
        """``message % args`` at INFO on :data:`logger`, if the interval has passed (cheap otherwise)."""
        if not logger.isEnabledFor(logging.INFO):
            return
        now = self._clock()
        if now - self._last >= self.interval_s:
            self._last = now
            self._logged = True
            logger.info(message, *args)

    def finish(self, message: str, *args: object) -> None:
        """The last line, ``message % args``, logged only when :meth:`note` logged a line before: a reader
        of the lines then sees where the work ended (the counts a summary gives), not where it was last
        seen, and short work still logs nothing."""
        if self._logged and logger.isEnabledFor(logging.INFO):
            logger.info(message, *args)
