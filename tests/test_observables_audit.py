"""The observables audit: the report audit's D against D minus one user, extended from privacy.json
to what a reader of the outputs or the scheduler sees. Every job of the report audit
(tests/test_report_audit.JOBS: each algorithm and each path a family takes on its own) is run as
`dp-spark run` with a budget store, with the text log (and a few jobs, JSON_CASES, with the JSON
log as well), on D and on D′, and these must be equal: the exit status; privacy.json outside the
report audit's allow-list (docs/report_audit.md); which files the release holds and how many (part
files counted per table); the budget store's record of the run (status, epsilon spent, ledger
steps); the default log, with times, paths and the DP outputs it names set aside; and Python's own
lines in it (warnings, shown at every run). The cases are grouped by the family registry, so a
family registered without a job fails here.

Not compared here: the noisy values themselves (on stdout and in the tables), and the JVM's own
lines (Spark's warnings), which the suite's JVM writes to its own stderr, out of these in-process
runs' reach: tests/test_spark_channels.py compares them in runs of their own process. Raw figures
reach the log only with --diagnostics, which these runs do not pass; a run that printed one by
default, or wrote one into privacy.json, would differ between D and D′, and
`test_the_audit_sees_a_raw_figure_in_the_default_log_and_in_the_report` checks that it would be caught."""

from __future__ import annotations

import json
import re
import warnings
from pathlib import Path

import pandas as pd
import pytest

from dp_spark.cli import main
from dp_spark.families.registry import BY_ALGORITHM, FAMILIES, family_of
from dp_spark.lab import report_audit
from tests.test_report_audit import HEAVY, JOBS, leaky_report, write_checkins, write_people, write_ratings

# Log lines that name a DP output, with the output replaced by a letter before comparing.
DP_OUTPUTS_IN_LOG = (
    (r"[\d,]+ perturbed records", "N perturbed records"),                # FRAPP's N, public under its local model
    (r"length (\d+): \d+ candidates, \d+ frequent", r"length \1: C candidates, F frequent"),  # mined from them
    (r"[\d,]+ items selected privately", "N items selected privately"),  # partition selection's output
    (r"[\d,]+ tuples selected privately: [\d,]+ groups", "T tuples selected privately: N groups"),  # the aggregate's
    (r"(\w+) = \d+, chosen privately from", r"\1 = B, chosen privately from"),  # the per-user bound l or m
    (r"clipping range \[[^]]*\], chosen privately", "clipping range [L, H], chosen privately"),  # the means'
    # The noise-only refusal quotes the noisy figures it decided on (release.noise_only).
    (r"(records kept|\w+ total) -?[\d,.e+]+ below", r"\1 N below"),
)
# Log lines whose presence is decided by a DP output, set aside after their whole text is checked
# against its only shape (so that a raw figure written into one is still seen): the counts' warning
# that the noise is wider than the average count, the noisy records kept over the cells (ledger
# step "bounding: kept") against each table's public half-width.
_FIGURE = r"[\d.,e+-]+"
DP_OUTPUT_LINES = {
    r"WARNING: the noise is wider than the average count": (
        rf"WARNING: the noise is wider than the average count \("
        rf"\w+ {_FIGURE} against ±{_FIGURE}(; \w+ {_FIGURE} against ±{_FIGURE})*: the records kept, a DP estimate, "
        r"over the cells\): most counts are mostly noise, and only counts well above the ± say anything"),
}


def algorithm_of(case: str) -> str:
    return re.search(r'\[algorithm\]\nname = "(\w+)"', JOBS[case][1]("data.csv")).group(1)


def cases_by_family(jobs=JOBS) -> dict[str, list[str]]:
    """The report audit's jobs by the registry's family of their algorithm."""
    grouped: dict[str, list[str]] = {}
    for case in jobs:
        grouped.setdefault(family_of(algorithm_of(case)).name, []).append(case)
    return grouped


def audit_cases(families=FAMILIES, by_family=None):
    """(family, case) for every case of every registered family; (family, None) for one without."""
    by_family = cases_by_family() if by_family is None else by_family
    for family in families:
        cases = by_family.get(family.name, ())
        if not cases:
            yield pytest.param(family.name, None, id=f"{family.name}-missing")
        for case in cases:
            yield pytest.param(family.name, case, id=case)


@pytest.fixture(scope="module")
def sides(tmp_path_factory):
    """Each input as D and as D′ (without user HEAVY), at the same name in two folders."""
    root = tmp_path_factory.mktemp("observables")
    (root / "D").mkdir()
    (root / "D_prime").mkdir()
    made = {}
    for name, write, user in (("ratings", write_ratings, "user_id"), ("checkins", write_checkins, "user_id"),
                              ("people", write_people, "person")):
        d = Path(write(root / "D" / f"{name}.csv"))
        frame = pd.read_csv(d, dtype=str, keep_default_na=False)  # every other row as it was, to the byte
        d_prime = root / "D_prime" / f"{name}.csv"
        kept = frame[frame[user] != str(HEAVY)]
        assert 0 < len(kept) < len(frame)  # D′ is not D
        kept.to_csv(d_prime, index=False)
        made[name] = (str(d), str(d_prime))
    return made


# The inputs are small (41 users), so small that the default noise-only refusal refuses every
# release on them (docs/privacy.md): the jobs run with it off, so that each compares a release;
# test_a_run_refused_as_noise_only_is_the_same_without_one_user runs one job with it on.
RELEASE_ANYWAY = ("--set", "guards.refuse_noise_only=false")


def run_side(tmp_path: Path, side: str, config_text: str, log_format: str, capsys,
             options: tuple[str, ...] = RELEASE_ANYWAY) -> dict:
    """One `dp-spark run`; everything a reader of its outputs or its scheduler sees, with the
    side's folder written as <side>."""
    folder = tmp_path / side / log_format
    folder.mkdir(parents=True)
    config = folder / "job.toml"
    store = (
        f'[budget_store]\npath = "{folder / "budget.json"}"\ndataset = "audit"\nepsilon_cap = 100\ndelta_cap = 1e-3\n'
    )
    config.write_text(f'output = "{folder / "out"}"\nseed = 5\n' + config_text + "\n" + store)
    capsys.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("always")  # every run shows its warnings, not only the first run of a line
        code = main(["run", str(config), "--log-format", log_format, *options])
    err = side_paths_masked(capsys.readouterr().err, folder)
    return {"exit": code, "files": release_files(folder / "out"), "store": store_record(folder / "budget.json"),
            "log": log_lines(err, log_format), "others": other_lines(err, log_format),
            "report": release_report(folder / "out")}


def release_report(out: Path) -> dict | None:
    """privacy.json as written, with the side's own paths (its source file, its budget store) set aside."""
    path = out / "privacy.json"
    if not path.exists():
        return None
    return json.loads(side_paths_masked(path.read_text(), out.parent))


def side_paths_masked(text: str, folder: Path) -> str:
    """``text`` with the side's run folder written as <side> and its input folder as <input>."""
    text = text.replace(str(folder), "<side>")
    return re.sub(r"/(observables\d*|test_malformed_records_change\w*)/D(_prime)?/", "/<input>/", text)


def release_files(out: Path) -> list[str]:
    """The release's files: each table's part files counted, every other file by name."""
    if not out.exists():
        return []
    shown = []
    for path in sorted(out.rglob("*")):
        if path.is_dir():
            parts = [p for p in path.iterdir() if p.name.startswith("part-")]
            if parts:
                shown.append(f"{path.relative_to(out)}/: {len(parts)} part files")
        elif not path.name.startswith(("part-", ".part-")):
            shown.append(str(path.relative_to(out)))
    return shown


def store_record(path: Path) -> list[dict]:
    """The store's record of the runs; a ledger step's name with the number in it that a DP output
    chose (GS's group width, AHP's cluster count) replaced by a letter, as the report audit does."""
    runs = json.loads(path.read_text()).get("runs", []) if path.exists() else []
    return [{"status": r.get("status"), "epsilon_spent": r.get("epsilon_spent"),
             "steps": [_step_name(e.get("step")) for e in r.get("ledger") or []]} for r in runs]


def _step_name(step: str) -> str:
    for pattern, replacement in report_audit.STEP_NORMALISERS:
        step = re.sub(pattern, replacement, step)
    return step


def _dp_output_line(text: str) -> bool:
    """Whether ``text`` is a line of DP_OUTPUT_LINES; one that is must have exactly its shape."""
    shapes = [shape for pattern, shape in DP_OUTPUT_LINES.items() if re.search(pattern, text)]
    assert all(re.fullmatch(shape, text) for shape in shapes), f"unexpected text in a DP-output line: {text}"
    return bool(shapes)


def _events(err: str, log_format: str):
    """Each line of ``err`` with its JSON event: None in text mode, or for a line that is no JSON."""
    for line in err.splitlines():
        event = None
        if log_format == "json":
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                pass
        yield line, event


def log_lines(err: str, log_format: str) -> list[str]:
    lines = []
    for line, event in _events(err, log_format):
        if log_format == "json":
            if event is None:
                continue
            if _dp_output_line(str(event.get("message", ""))):
                continue
            # Heartbeats are timing, like ts and elapsed_s: whether one falls in a stage is not compared.
            if event.get("event") in ("spark_log", "python_log", "heartbeat"):
                continue
            for key in ("ts", "elapsed_s", "seconds", "run_id"):
                event.pop(key, None)
            line = json.dumps(event, sort_keys=True)
        else:
            if not line.startswith("[dp-spark"):
                continue  # the JVM's own lines
            line = re.sub(r"^\[dp-spark +[\d.]+s\] ", "", line)
            if line.startswith("still in stage "):
                continue
        if _dp_output_line(line):
            continue
        for pattern, replacement in DP_OUTPUTS_IN_LOG:
            line = re.sub(pattern, replacement, line)
        lines.append(line)
    return lines


# The lines that are not dp-spark's own: Python's warnings, and in a process of its own the JVM's
# (Spark's log at WARN, Java's warnings; tests/test_spark_channels.py). Compared sorted (the JVM's
# arrive on another thread), with only the time stamp that io/log4j2.properties puts first masked,
# so that a figure in a message still tells D from D′.
SPARK_STAMP = r"^\d\d/\d\d/\d\d \d\d:\d\d:\d\d "


def other_lines(err: str, log_format: str) -> list[str]:
    """The lines of ``err`` that are not dp-spark's own, sorted, their log4j time stamps masked."""
    lines = []
    for line, event in _events(err, log_format):
        if log_format == "json":
            if event is None:
                lines.append(line)
            elif event.get("event") == "spark_log":
                lines.append(event["line"])
            elif event.get("event") == "python_log":
                lines.append(f"{event.get('level')} {event.get('logger')}: {event.get('message')}")
        elif line.strip() and not line.startswith("[dp-spark"):
            lines.append(line)
    masked = []
    for line in lines:
        for pattern, replacement in DP_OUTPUTS_IN_LOG:
            line = re.sub(pattern, replacement, line)
        masked.append(re.sub(SPARK_STAMP, "<time> ", line))
    return sorted(masked)


def test_other_lines_keep_a_raw_figure_and_mask_only_the_time():
    """Negative control: a Spark line that carried a raw figure would tell D from D′; its time
    stamp alone would not."""
    line = "{stamp} WARN MemoryStore: {rows} rows of the source, a figure planted"
    side = {rows: "[dp-spark    1.0s] reading\n" + line.format(stamp="26/11/29 01:14:0" + str(rows % 7), rows=rows)
            for rows in (200, 160)}
    assert other_lines(side[200], "text") != other_lines(side[160], "text")
    assert other_lines(side[200], "text") == [line.format(stamp="<time>", rows=200)]
    as_json = {rows: json.dumps({"event": "spark_log", "line": line.format(stamp="26/11/29 01:14:00", rows=rows)})
               for rows in (200, 160)}
    assert other_lines(as_json[200], "json") != other_lines(as_json[160], "json")
    same_figure = [line.format(stamp=stamp, rows=200) for stamp in ("26/11/29 01:14:00", "26/11/29 02:00:59")]
    assert other_lines(same_figure[0], "text") == other_lines(same_figure[1], "text")


# The cases run with the JSON log as well: the counts, whose console is the richest, and FRAPP,
# whose Python workers add lines of their own. Every family's events pass through the one
# formatter both logs share, and every case's are compared through the text log.
JSON_CASES = ("sra", "frapp_det_gd")


def log_formats(job: str) -> tuple[str, ...]:
    """The text log for every case; the JSON log too for JSON_CASES. Both logs carry the same
    progress events through one formatter (dp_spark/core/progress.py), so the JSON log's equality
    is checked on a few cases and every case's events through the text log."""
    return ("text", "json") if job in JSON_CASES else ("text",)


@pytest.fixture(scope="module")
def seen_runs() -> dict:
    """What each unpatched run of this module showed, by (config, log format): a run on the same
    input with the same config is run once (the malformed-records test's run on D is the audit's)."""
    return {}


def run_once(seen: dict, tmp_path: Path, side: str, config_text: str, log_format: str, capsys) -> dict:
    """``run_side``'s observations, from ``seen`` when the same run was made before in this module."""
    key = (config_text, log_format)
    if key not in seen:
        seen[key] = run_side(tmp_path, side, config_text, log_format, capsys)
    return seen[key]


def observed(spark, tmp_path, sides, job: str, capsys, formats=None, seen=None) -> dict[str, tuple[dict, dict]]:
    """The job's observations on D and on D′ in each log format; from ``seen`` where made before
    (never for a run with something patched: pass no ``seen`` there)."""
    data, config = JOBS[job]
    found = {}
    for log_format in formats or log_formats(job):
        d, d_prime = (run_side(tmp_path, side, config(path), log_format, capsys) if seen is None
                      else run_once(seen, tmp_path, side, config(path), log_format, capsys)
                      for side, path in zip(("D", "D_prime"), sides[data]))
        found[log_format] = (d, d_prime)
    return found


@pytest.mark.parametrize(("family", "job"), list(audit_cases()))
def test_what_readers_see_is_the_same_without_one_user(spark, tmp_path, sides, seen_runs, family, job, capsys):
    assert job is not None, f"family {family} is registered but has no job in tests/test_report_audit.JOBS"
    assert family_of(algorithm_of(job)).name == family
    for log_format, (d, d_prime) in observed(spark, tmp_path, sides, job, capsys, seen=seen_runs).items():
        assert d["exit"] == 0 and d["log"], (log_format, d)
        for what in ("exit", "files", "store", "log", "others"):
            assert d[what] == d_prime[what], (log_format, what)
        # privacy.json: the same outside the report audit's allow-list (noisy values, DP choices, the clock).
        allowed = [f"{x} ({x.allowed_because})" for x in report_audit.compare(d["report"], d_prime["report"])
                   if x.allowed_because]
        print("allowed differences:", *allowed, sep="\n  ")
        assert report_audit.differences(d["report"], d_prime["report"]) == [], log_format


def test_a_run_refused_as_noise_only_is_the_same_without_one_user(spark, tmp_path, sides, capsys):
    """The default noise-only refusal on 41 users: refused on D and on D′ alike (exit 5, no files,
    the store's "refused" with its charge), with the same log; it decides on DP figures only."""
    _data, config = JOBS["sra"]
    d, d_prime = (run_side(tmp_path, side, config(path), "text", capsys, options=())
                  for side, path in zip(("D", "D_prime"), sides["ratings"]))
    assert d["exit"] == 5 and d["files"] == [] and d["store"][0]["status"] == "refused"
    for what in ("exit", "files", "store", "log", "others"):
        assert d[what] == d_prime[what], what


def test_every_algorithm_name_of_the_registry_has_a_case():
    audited = {algorithm_of(case) for cases in cases_by_family().values() for case in cases}
    assert audited == set(BY_ALGORITHM)


def test_negative_control_a_family_without_a_case_gives_a_failing_case():
    from dataclasses import replace

    newcomer = replace(FAMILIES[0], name="newcomer", algorithms=("newcomer",))
    cases = [param.values for param in audit_cases((*FAMILIES, newcomer))]
    assert ("newcomer", None) in cases and cases.count(("newcomer", None)) == 1


def test_the_audit_sees_a_raw_figure_in_the_default_log_and_in_the_report(spark, tmp_path, sides, capsys,
                                                                          monkeypatch):
    """Negative control: a job that prints its raw row count by default (as every family once
    did), and writes it into privacy.json, differs between D and D′ in both."""
    from dp_spark.core import progress
    from dp_spark.families.counts import family as counts
    from dp_spark.release import engine

    def raw_by_default(progress_, message):
        progress_(message)

    monkeypatch.setattr(progress, "diagnostic", raw_by_default)
    monkeypatch.setattr(counts, "diagnostic", raw_by_default)
    monkeypatch.setattr(engine, "build_report", leaky_report(engine.build_report))
    d, d_prime = observed(spark, tmp_path, sides, "sra", capsys, formats=("text",))["text"]
    assert d["log"] != d_prime["log"]
    assert any("records read" in line and line not in d_prime["log"] for line in d["log"])
    assert report_audit.differences(d["report"], d_prime["report"]) == ["domain.rows: 200 vs 160"]


# Rows that belong to no usable user or lie outside every domain: a user id of spaces only, an
# empty one, an item or location that is no id, a visit count of 0.
# By default validation drops them, so whether a run releases does not depend on them.
MALFORMED_ROWS = {
    "ratings": pd.DataFrame({"user_id": ["  ", "", "9999", "9999"], "item_id": ["3", "4", "seven", "99"],
                             "attr": ["a", "b", "a", "zzz"]}),
    "checkins": pd.DataFrame({"user_id": ["  ", "9999", "9999"], "item_id": ["1", "seven", "2"],
                              "visits": ["1", "1", "0"], "time": ["1", "2", "3"]}),
}


# One job per kind of input (ratings, check-ins): validation drops the same rows whatever the family.
@pytest.mark.parametrize("job", ["sra", "entropy_limit"])
def test_malformed_records_change_nothing_a_reader_sees(spark, tmp_path, sides, seen_runs, job, capsys):
    """D against D plus rows that validation drops: by default the run releases either way, with
    the same files, store record and log; only --diagnostics counts them. D is the audit's D, and
    its run the audit's when that ran first in this module."""
    data, config = JOBS[job]
    d = Path(sides[data][0])
    (tmp_path / "D_prime").mkdir()
    with_malformed = tmp_path / "D_prime" / d.name
    frame = pd.read_csv(d, dtype=str)
    pd.concat([frame.iloc[:5], MALFORMED_ROWS[data], frame.iloc[5:]], ignore_index=True).to_csv(with_malformed,
                                                                                              index=False)
    runs = [run_once(seen_runs, tmp_path / "runs", side, config(str(path)), "text", capsys)
            for side, path in (("D", d), ("D_prime", with_malformed))]
    assert runs[0]["exit"] == 0
    for what in ("exit", "files", "store", "log", "others"):
        assert runs[0][what] == runs[1][what], what
    assert report_audit.differences(runs[0]["report"], runs[1]["report"]) == []
