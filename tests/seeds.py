"""How many seeds a randomized test runs. The guide puts 50-seed loops in ``-m slow``: the default run takes the
first ten seeds of each, ``-m slow`` all fifty (the same data: seed ``n`` is the same rows in both)."""

from __future__ import annotations

import pytest

ALL = range(50)
DEFAULT = range(10)


def seed_sets(every: range = ALL, default: range = DEFAULT):
    """Parametrize a test that loops over ``seeds``: ``default`` in the default run, ``every`` under ``-m slow``."""
    return pytest.mark.parametrize("seeds", [
        pytest.param(default, id=f"{len(default)}_seeds"),
        pytest.param(every, id=f"{len(every)}_seeds", marks=pytest.mark.slow)])


def seed_params(every: range = ALL, default: int = len(DEFAULT)) -> list:
    """One parameter per seed: the first ``default`` in the default run, the others under ``-m slow``."""
    return [pytest.param(s, marks=() if s < default else pytest.mark.slow) for s in every]
