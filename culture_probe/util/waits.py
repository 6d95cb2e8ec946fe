"""What a server's `Retry-After` asks: read alike by the served scorer's retries and curation's
SPARQL client.
"""

from __future__ import annotations

import email.utils
import math
import time

LONGEST = 1e9  # seconds: a longer wait (an infinite one) is read as this one


def retry_after_seconds(value: str | None, *, scale: float = 1.0) -> float | None:
    """A Retry-After header (seconds, or an HTTP date; `scale` 1000 for `retry-after-ms`) in
    seconds, 0 for a time already past; None when absent or unreadable (NaN too).
    """
    if not value:
        return None
    try:
        seconds = float(value) / scale
    except ValueError:
        seconds = None
    if seconds is not None:
        return None if math.isnan(seconds) else min(max(0.0, seconds), LONGEST)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())
