"""The release lifecycle both the API and the jobs go through (dp_spark/release/lifecycle.py): the
warnings first, the charge before the release, and how a charged release ended recorded whatever
happened, with the release's own error the one the caller sees."""

from __future__ import annotations

from fractions import Fraction

import pytest

from dp_spark.errors import GuardRefused
from dp_spark.release import lifecycle


class Recorder:
    """A Charger that writes down what it was asked, and can fail to record an end."""

    what = "release"

    def __init__(self, fail_to_record: bool = False):
        self.calls: list[tuple] = []
        self.fail_to_record = fail_to_record

    def charge(self):
        self.calls.append(("charge",))
        return "charge-1"

    def ended(self, charge, status, exc):
        self.calls.append(("ended", charge, status, type(exc).__name__))
        if self.fail_to_record:
            raise OSError("store unreachable")

    def released(self, charge, report):
        self.calls.append(("released", charge, report))


def test_the_charge_comes_before_the_release_and_its_end_is_recorded():
    charger, seen = Recorder(), []

    def release():
        seen.append(list(charger.calls))  # what had happened when the release started
        return {"report": "r"}

    assert lifecycle.charged(charger, release, lambda result: result["report"], print) == {"report": "r"}
    assert seen == [[("charge",)]]
    assert charger.calls == [("charge",), ("released", "charge-1", "r")]


@pytest.mark.parametrize("error, status", [(GuardRefused("too many rows outside"), "refused"),
                                           (RuntimeError("executor lost"), "failed"),
                                           (KeyboardInterrupt(), "failed")])
def test_a_release_that_raises_stays_charged_and_is_recorded_as_it_ended(error, status):
    charger = Recorder()

    def release():
        raise error

    with pytest.raises(type(error)):
        lifecycle.charged(charger, release, lambda result: result, print)
    assert charger.calls == [("charge",), ("ended", "charge-1", status, type(error).__name__)]


def test_a_record_that_cannot_be_written_leaves_the_release_s_own_error_and_a_warning():
    charger, lines = Recorder(fail_to_record=True), []

    def release():
        raise RuntimeError("executor lost")

    with pytest.raises(RuntimeError, match="executor lost"):
        lifecycle.charged(charger, release, lambda result: result, lines.append)
    assert lines == ["WARNING: could not mark the release failed in the budget store (store unreachable); it stays "
                     "charged there"]


def test_without_a_charger_the_release_runs_as_it_is():
    assert lifecycle.charged(None, lambda: 7, lambda result: {}, print) == 7


def test_the_warnings_come_from_the_seed_and_the_epsilon_alone():
    lines: list[str] = []
    lifecycle.announce(lines.append, seeded=False, epsilon=Fraction(1))
    assert lines == []
    lifecycle.announce(lines.append, seeded=True, epsilon=Fraction(50))
    assert lines[0] == lifecycle.SEEDED_WARNING and lines[1].startswith("WARNING: epsilon 50 protects next to nothing")
