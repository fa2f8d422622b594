"""The lifecycle of one release, the same whether the API or a job asks for it:

1. announce: the warnings a reader of the log must see first (a fixed seed; an epsilon that
   protects next to nothing);
2. refuse before the charge: the family's guards, the domain's fit, the expected error (a noise
   parameter the samplers refuse fails here) and the output's size, all from the parameters and
   the public domains; the caller adds its own checks of the source (schema, output location,
   the executors' Python) in the same phase;
3. charge, release, record: the whole cost is charged to the dataset's budget before a record is
   read, and how the release ended (released, failed, refused) is recorded afterwards. A charge
   is never taken back: once the release has started, noise may have been drawn, or the data may
   have decided a refusal.

The project's promise "refused before the charge" is steps 1 and 2 coming before 3; both callers
(dp_spark.api.run and dp_spark.jobs.runner) go through these functions, so the promise has one
copy. What a charge is depends on the caller: a :class:`Charger` (a DatasetBudget in a notebook, the
budget store for a job).
"""

from __future__ import annotations

from collections.abc import Callable
from fractions import Fraction
from typing import Any, Protocol, TypeVar

from dp_spark.core.accounting import Accounting, epsilon_warning
from dp_spark.errors import GuardRefused
from dp_spark.release.engine import accuracy_section
from dp_spark.release.family import Domains, Execution, Family, check_domain_fits, describe_output_size, output_size
from dp_spark.release.guards import Guards

Progress = Callable[[str], None]
Result = TypeVar("Result")

SEEDED_WARNING = ("WARNING: fixed seed: this release is for testing only and NOT private (whoever learns the "
                  "seed can regenerate the noise)")


def announce(progress: Progress, seeded: bool, epsilon: Fraction) -> None:
    """The warnings that come before anything else a release logs."""
    if seeded:
        progress(SEEDED_WARNING)
    warning = epsilon_warning(epsilon)
    if warning:
        progress(warning)


def refuse_before_charge(family: Family, params: Any, domains: Domains, epsilon: Fraction,
                         split: dict[str, Fraction], execution: Execution, accounting: Accounting,
                         limits: Guards, progress: Progress) -> None:
    """Every refusal that the parameters and the public domains decide, before any charge. The
    expected error is worked out again in the release; here it is computed so that a failure in
    it comes before the charge."""
    limits.check_family(family.name, params.algorithm)
    check_domain_fits(family, params, domains, execution)
    accuracy_section(family, params, epsilon, domains, split, accounting=accounting)
    progress(f"output: {describe_output_size(output_size(family, params, domains, execution))}")


class Charger(Protocol):
    """Where a release's cost is charged, and its end recorded."""

    what: str  # "release" or "run": how the warnings name what was charged

    def charge(self) -> Any:
        """Charge the release's whole cost, or raise BudgetExceeded; returns what ``ended`` and
        ``released`` need to find the charge again."""

    def ended(self, charge: Any, status: str, exc: BaseException) -> None:
        """Record that the charged release failed or was refused (``status``)."""

    def released(self, charge: Any, report: dict) -> None:
        """Record that the charged release was made, with its report."""


def charged(charger: Charger | None, release: Callable[[], Result], report_of: Callable[[Result], dict],
            progress: Progress) -> Result:
    """``release()`` after ``charger`` has charged its cost (with no charger, as it is). A release
    that raises is recorded as refused (a guard refused the data) or failed, and its own error is
    what the caller sees even when the record cannot be written: the charge stays either way."""
    if charger is None:
        return release()
    charge = charger.charge()
    try:
        result = release()
    except BaseException as exc:
        status = "refused" if isinstance(exc, GuardRefused) else "failed"
        try:
            charger.ended(charge, status, exc)
        except Exception as failure:  # noqa: BLE001 - the charge is in the store either way
            progress(f"WARNING: could not mark the {charger.what} {status} in the budget store ({failure}); it "
                     "stays charged there")
        raise
    charger.released(charge, report_of(result))
    return result
