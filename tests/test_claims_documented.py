"""Every DP claim is written down beside the code: each publisher, each algorithm a job can name
and each noise primitive has a "Privacy claim: <name>" section in its page under docs/, holding
every field of a claim, and each module the claim is about names that page and section in its
docstring. Each claim follows sections of the specification (docs/specification.md), cited as
"specification §X.Y", and each algorithm's claim names its family's package and its tests, so that
a reader goes from docs/README.md to a claim, its code and its tests.

No Spark session: docstrings are read from the source files, and the only imports are the
registries the names come from."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from dp_spark import publishers
from dp_spark.core import accounting, discrete_gaussian, ledger, mechanisms, vector_noise, zcdp
from dp_spark.families.location_entropy import entropy as location_entropy
from dp_spark.jobs import config

ROOT = Path(__file__).resolve().parents[1]

# The fields every claim states (docs/privacy.md); a primitive also says what it assumes, and an
# algorithm where its code and its tests are.
FIELDS = ("Guarantee", "Unit and neighbouring relation", "Sensitivity", "Public", "Argument", "Follows")
MECHANISM_FIELDS = (*FIELDS, "Assumed")
ALGORITHM_FIELDS = (*FIELDS, "Code and tests")

# How a claim cites the specification (docs/specification.md): "specification §3.1", the words a
# link may carry ("[specification §3.1](specification.md#s3.1)"), as the code's docstrings do.
SPEC_CITATION = re.compile(r"specification §\d+(\.\d+)?")
SPEC_SECTION = re.compile(r'^<a id="s(\d+(?:\.\d+)?)"></a>$', re.M)

HEADING = re.compile(r"^(#{2,3}) Privacy claim: (.+?)\s*$")
DOCSTRING_SECTION = re.compile(r'"(Privacy claim: [^"]+)"')

# Each algorithm name of a job config: its page, the names its claim sections must cover, and
# the modules that implement it. A new algorithm fails here until it has its claim.
ALGORITHM_CLAIMS = {
    "sra": ("docs/sra_hpa.md", ["sra"], ["dp_spark/families/counts/sampling.py"]),
    "hpa": ("docs/sra_hpa.md", ["hpa"], ["dp_spark/families/counts/sampling.py"]),
    "lpa": ("docs/sra_hpa.md", ["lpa"], ["dp_spark/families/counts/sampling.py"]),
    "dft": ("docs/sra_hpa.md", ["dft"], ["dp_spark/families/counts/sampling.py"]),
    "gs": ("docs/sra_hpa.md", ["gs"], ["dp_spark/families/counts/sampling.py"]),
    "user_histogram": ("docs/user_histogram.md", ["user_histogram"], ["dp_spark/families/user_histogram/histogram.py"]),
    "dpsense": ("docs/dpsense.md", ["dpsense"], ["dp_spark/families/dpsense/theta.py"]),
    "dpsense_s": ("docs/dpsense.md", ["dpsense_s"], ["dp_spark/families/dpsense/theta.py"]),
    # One claim per variant: they range from pure ε-DP to not DP at all.
    "entropy": ("docs/location_entropy.md", list(location_entropy.VARIANTS),
                ["dp_spark/families/location_entropy/entropy.py", "dp_spark/families/location_entropy/sensitivity.py"]),
    "frapp": ("docs/frapp.md", ["frapp"], ["dp_spark/families/frapp/perturbation.py",
                                            "dp_spark/families/frapp/mining.py", "dp_spark/families/frapp/family.py"]),
    "aggregate": ("docs/aggregate.md", ["aggregate"], ["dp_spark/families/aggregate/family.py",
                                                        "dp_spark/families/aggregate/run.py"]),
    "means": ("docs/value_sums.md", ["means"], ["dp_spark/release/sum_tables.py", "dp_spark/core/clip_range.py",
                                                "dp_spark/families/means/family.py",
                                                "dp_spark/families/means/params.py",
                                                "dp_spark/families/means/choice.py"]),
}

# The primitives every release rests on: (module, name in it) -> their page.
MECHANISMS = {
    (mechanisms, "RandomSource"): "docs/mechanisms.md",
    (mechanisms, "bernoulli_exp_minus"): "docs/mechanisms.md",
    (mechanisms, "bernoulli_exp_minus_fraction"): "docs/mechanisms.md",
    (mechanisms, "bernoulli_dyadic"): "docs/mechanisms.md",
    (mechanisms, "discrete_laplace"): "docs/mechanisms.md",
    (mechanisms, "discrete_laplace_each"): "docs/mechanisms.md",
    (mechanisms, "exponential_mechanism"): "docs/mechanisms.md",
    (mechanisms, "exponential_mechanism_rows"): "docs/mechanisms.md",
    (ledger, "Budget"): "docs/mechanisms.md",
    (accounting, "Accounting"): "docs/mechanisms.md",
    (zcdp, "delta_of"): "docs/mechanisms.md",
    (discrete_gaussian, "discrete_gaussian"): "docs/mechanisms.md",
    (vector_noise, "range_noise"): "docs/mechanisms.md",
    (vector_noise, "CellNoise"): "docs/mechanisms.md",
}

# Post-processing that is not a publisher but still claims to cost nothing, and the guards, whose
# noisy figures decide whether a run releases.
POST_PROCESSING = {"consistency": ("docs/publishers.md", "dp_spark/publishers/consistency.py"),
                   "guards": ("docs/privacy.md", "dp_spark/release/guards.py")}


# ---------------------------------------------------------------------------
# Reading the pages and the docstrings.


def claim_sections(text: str) -> dict[str, str]:
    """Heading ("Privacy claim: a, b") -> body, for every claim section of a Markdown page. A body
    runs to the next heading of the same or a higher level."""
    lines = text.splitlines()
    sections = {}
    for i, line in enumerate(lines):
        match = HEADING.match(line)
        if not match:
            continue
        level = len(match.group(1))
        body = []
        for following in lines[i + 1:]:
            marks = len(following) - len(following.lstrip("#"))
            if 0 < marks <= level and following[marks:marks + 1] == " ":
                break
            body.append(following)
        sections[f"Privacy claim: {match.group(2)}"] = "\n".join(body)
    return sections


def sections_naming(sections: dict[str, str], name: str) -> list[str]:
    """The headings whose list of names (after "Privacy claim: ", comma separated) holds ``name``."""
    return [h for h in sections if name in [n.strip() for n in h.removeprefix("Privacy claim: ").split(",")]]


def missing_fields(body: str, fields=FIELDS) -> list[str]:
    """The fields a claim body lacks: each must open a bullet ("- **Field**: text")."""
    return [f for f in fields if not re.search(rf"^- \*\*{re.escape(f)}\*\*:[ \t]*\S", body, re.M)]


def page_sections(doc: str) -> dict[str, str]:
    path = ROOT / doc
    assert path.is_file(), f"{doc} is missing"
    return claim_sections(path.read_text(encoding="utf-8"))


def module_docstring(path: str) -> str:
    source = (ROOT / path).read_text(encoding="utf-8")
    return " ".join((ast.get_docstring(ast.parse(source)) or "").split())


def check_claim(doc: str, name: str, fields=FIELDS) -> None:
    sections = page_sections(doc)
    found = sections_naming(sections, name)
    assert found, f"{doc} has no 'Privacy claim' section naming {name!r} (it has: {sorted(sections)})"
    for heading in found:
        missing = missing_fields(sections[heading], fields)
        assert not missing, f"{doc}, '{heading}': no {', '.join(missing)}"
        problems = follows_problems(sections[heading])
        assert not problems, f"{doc}, '{heading}': {'; '.join(problems)}"


def field_text(body: str, field: str) -> str:
    """The text of one field of a claim body, up to the next field."""
    return re.search(rf"^- \*\*{re.escape(field)}\*\*.*?(?=^- \*\*|\Z)", body, re.M | re.S).group(0)


def spec_sections() -> set[str]:
    """The section numbers docs/specification.md has an anchor for ("3.1", "4", ...)."""
    return set(SPEC_SECTION.findall((ROOT / "docs/specification.md").read_text(encoding="utf-8")))


def follows_problems(body: str) -> list[str]:
    """What is wrong with a claim's Follows: no "specification §X.Y", or a section the specification
    does not have."""
    follows = field_text(body, "Follows")
    cited = {m.group(0).removeprefix("specification §") for m in SPEC_CITATION.finditer(follows)}
    if not cited:
        return ["Follows cites no 'specification §X.Y'"]
    return [f"the specification has no §{number}" for number in sorted(cited - spec_sections())]


def code_and_tests_problems(body: str, packages: set[str]) -> list[str]:
    """What is wrong with a claim's Code and tests: it names none of the family's packages, no test
    file, or a repository path that does not exist."""
    text = field_text(body, "Code and tests")
    paths = re.findall(r"(?<![\w/.])((?:dp_spark|tests)/[\w./]*\w/?)", text)
    problems = []
    if not any(package in paths for package in packages):
        problems.append(f"Code and tests names none of {sorted(packages)}")
    if not any(path.startswith("tests/test_") for path in paths):
        problems.append("Code and tests names no test file")
    problems += [f"{path} does not exist" for path in paths if not (ROOT / path).exists()]
    return problems


def check_code_and_tests(doc: str, name: str, modules: list[str]) -> None:
    """The claim names its family's package (the directory of its modules under dp_spark/families/)
    and at least one test file, and every repository path it names exists."""
    packages = {str(Path(m).parent) + "/" for m in modules if m.startswith("dp_spark/families/")}
    sections = page_sections(doc)
    for heading in sections_naming(sections, name):
        problems = code_and_tests_problems(sections[heading], packages)
        assert not problems, f"{doc}, '{heading}': {'; '.join(problems)}"


def check_docstring_points_to(module_path: str, doc: str, name: str) -> None:
    """The module's docstring names ``doc`` and a claim section of it that covers ``name``; every
    section it names exists (a stale pointer fails too)."""
    docstring = module_docstring(module_path)
    assert doc in docstring, f"{module_path}'s docstring does not name {doc}"
    named = DOCSTRING_SECTION.findall(docstring)
    sections = page_sections(doc)
    stale = [h for h in named if h not in sections]
    assert not stale, f"{module_path}'s docstring names sections {doc} does not have: {stale}"
    if name is not None:
        assert sections_naming({h: "" for h in named}, name), (
            f"{module_path}'s docstring names no claim section of {doc} covering {name!r}")


# ---------------------------------------------------------------------------
# The checks.


@pytest.mark.parametrize("name", sorted(publishers.PUBLISHERS))
def test_every_publisher_has_its_claim_beside_its_module(name):
    check_claim("docs/publishers.md", name)
    module = publishers.PUBLISHERS[name][0].__module__
    check_docstring_points_to(module.replace(".", "/") + ".py", "docs/publishers.md", name)


@pytest.mark.parametrize("name", config.ALGORITHMS)
def test_every_algorithm_has_its_claim_beside_its_modules(name):
    assert name in ALGORITHM_CLAIMS, (f"algorithm {name!r} has no documented privacy claim: add a "
                                      "'Privacy claim' section to its page and list it in ALGORITHM_CLAIMS")
    doc, names, modules = ALGORITHM_CLAIMS[name]
    for claim in names:
        check_claim(doc, claim, ALGORITHM_FIELDS)
        check_code_and_tests(doc, claim, modules)
        for module in modules:
            check_docstring_points_to(module, doc, claim)


@pytest.mark.parametrize("module, name", sorted(MECHANISMS, key=lambda key: key[1]),
                         ids=lambda x: getattr(x, "__name__", x))
def test_every_primitive_states_its_guarantee_and_assumptions(module, name):
    assert hasattr(module, name), f"{module.__name__} has no {name}: update MECHANISMS and docs/mechanisms.md"
    doc = MECHANISMS[(module, name)]
    check_claim(doc, name, MECHANISM_FIELDS)
    check_docstring_points_to(module.__name__.replace(".", "/") + ".py", doc, name)


@pytest.mark.parametrize("name", sorted(POST_PROCESSING))
def test_post_processing_states_that_it_costs_nothing(name):
    doc, module = POST_PROCESSING[name]
    check_claim(doc, name)
    check_docstring_points_to(module, doc, name)


def test_the_overview_links_every_claim_page():
    overview = (ROOT / "docs/privacy.md").read_text(encoding="utf-8")
    pages = {doc for doc, _, _ in ALGORITHM_CLAIMS.values()} | set(MECHANISMS.values()) | {"docs/publishers.md"}
    for doc in sorted(pages):
        assert f"]({Path(doc).name}" in overview, f"docs/privacy.md does not link {doc}"


# ---------------------------------------------------------------------------
# The checker itself must be able to fail.

GOOD = """# Page

## Privacy claim: a, b

- **Guarantee**: ε-DP.
- **Unit and neighbouring relation**: one user, added or removed.
- **Sensitivity**: 1.
- **Public**: the bins.
- **Argument**: one user, one bin.
- **Follows**: specification §1.1.

## Another section

- **Guarantee**: not part of the claim above.
"""


def test_the_checker_reads_a_complete_claim():
    sections = claim_sections(GOOD)
    assert list(sections) == ["Privacy claim: a, b"]
    assert sections_naming(sections, "b") == ["Privacy claim: a, b"]
    assert sections_naming(sections, "ab") == []
    assert missing_fields(sections["Privacy claim: a, b"]) == []


@pytest.mark.parametrize("field", FIELDS)
def test_the_checker_finds_a_missing_or_empty_field(field):
    without = re.sub(rf"^- \*\*{re.escape(field)}\*\*.*$\n", "", GOOD, flags=re.M)
    assert missing_fields(claim_sections(without)["Privacy claim: a, b"]) == [field]
    empty = re.sub(rf"^(- \*\*{re.escape(field)}\*\*:).*$", r"\1", GOOD, flags=re.M)
    assert missing_fields(claim_sections(empty)["Privacy claim: a, b"]) == [field]


def test_a_field_after_the_section_does_not_count():
    moved = GOOD.replace("- **Sensitivity**: 1.\n", "")
    assert "**Guarantee**" in moved.split("## Another section")[1]
    assert missing_fields(claim_sections(moved)["Privacy claim: a, b"]) == ["Sensitivity"]


def test_the_checker_wants_the_specification_cited_by_a_section_it_has():
    body = claim_sections(GOOD)["Privacy claim: a, b"]
    assert follows_problems(body) == []
    assert follows_problems(body.replace("specification §1.1", "ALGORITHMS.md §1.1")) == [
        "Follows cites no 'specification §X.Y'"]
    assert follows_problems(body.replace("§1.1", "§1.9")) == ["the specification has no §1.9"]
    linked = body.replace("specification §1.1", "[specification §1.1](specification.md#s1.1)")
    assert follows_problems(linked) == []


def test_the_checker_wants_the_family_package_and_a_test_that_exist():
    package = "dp_spark/families/counts/"
    good = GOOD.replace("- **Follows**", f"- **Code and tests**: [`{package}`](../{package}); tests:\n"
                                          "  `tests/test_bounding.py`.\n- **Follows**")
    body = claim_sections(good)["Privacy claim: a, b"]
    assert code_and_tests_problems(body, {package}) == []
    assert code_and_tests_problems(body, {"dp_spark/families/means/"}) == [
        "Code and tests names none of ['dp_spark/families/means/']"]
    assert code_and_tests_problems(body.replace("tests/test_bounding.py", "tests/helpers.py"), {package}) == [
        "Code and tests names no test file", "tests/helpers.py does not exist"]
    assert code_and_tests_problems(body.replace("test_bounding", "test_gone"), {package}) == [
        "tests/test_gone.py does not exist"]
