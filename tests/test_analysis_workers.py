"""The thread pool of independent units of analysis work: order, errors, worker counts."""

from __future__ import annotations

import threading
import time

import pytest

from uaprobe.analysis.workers import ordered_map, worker_count


def test_results_keep_the_order_of_the_items_whatever_finishes_first():
    def unit(i: int) -> tuple[int, str]:
        time.sleep(0.02 * (5 - i))  # the first items finish last
        return i * i, threading.current_thread().name

    for workers in (1, 2, 3):
        got = ordered_map(unit, range(6), workers=workers)
        assert [r for r, _ in got] == [0, 1, 4, 9, 16, 25]
    threads = {name for _, name in ordered_map(unit, range(6), workers=2)}
    assert len(threads) == 2  # two units at once


def test_an_error_in_a_unit_is_raised_to_the_caller():
    def unit(i: int) -> int:
        if i == 3:
            raise KeyError("unit 3")
        return i

    with pytest.raises(KeyError, match="unit 3"):
        ordered_map(unit, range(5), workers=2)


def test_worker_counts():
    assert ordered_map(str, [], workers=2) == []
    assert worker_count() >= 1
    with pytest.raises(ValueError, match="at least 1"):
        ordered_map(str, [1], workers=0)
