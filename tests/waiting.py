"""Polling for tests that drive a running query: wait on a condition, never on a fixed sleep."""

import time


def wait_for(pred, timeout: float = 10.0, every: float = 0.05):
    """``pred()``'s first truthy value within ``timeout`` seconds; AssertionError if none."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise AssertionError("condition not reached in time")
