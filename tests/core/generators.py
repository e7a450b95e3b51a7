"""Driving the core's generator jobs in tests."""

from __future__ import annotations


def run(gen, on_record=None):
    """(return value, every record yielded) of a generator job, calling `on_record` on each record."""
    records = []
    try:
        while True:
            records.append(next(gen))
            if on_record is not None:
                on_record(records[-1])
    except StopIteration as stop:
        return stop.value, records


def drain(gen):
    """The return value of a generator job (its records are dropped)."""
    return run(gen)[0]
