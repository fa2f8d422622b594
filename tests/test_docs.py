"""The documentation stands on its own: README.md and every page under docs/ link only to files and
sections that exist, name only repository paths that exist, cite the specification in this
repository (docs/specification.md, as "specification §X.Y") by sections it has, and give reasons
rather than issue numbers. docs/README.md, the index, links every page.

Unit tier: the pages are read as text; no import of dp_spark."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])
INDEX = DOCS / "README.md"

LINK = re.compile(r"!?\[(?:[^\]]|\][^(])*?\]\(([^)\s]+)\)")
CODE_SPAN = re.compile(r"`[^`\n]*`")
HEADING = re.compile(r"^#{1,6} (.+?)\s*$")
HTML_ANCHOR = re.compile(r'<a (?:id|name)="([^"]+)"')
# A path into the repository named in the text: the top-level folders that hold code, tests, data
# and pages. Placeholders (NAME, *, {...}) end a path where they start.
REPO_PATH = re.compile(r"(?<![\w/.\-])((?:dp_spark|tests|conf|scripts|bench|jobs|docs)/[\w./\-]*)")
# A module named from inside the package, as the pages often do: families/means/params.py.
PACKAGE_PATH = re.compile(r"(?<![\w/.\-])((?:families|bounding|aggregates|release|core|io|publishers|cli)/[\w./\-]*)")
SPEC_CITATION = re.compile(r"specification §(\d+(?:\.\d+)?)")
ISSUE_POINTER = re.compile(r"\bissues?\s+#?\d+|\bissue\s+#|\(#\d+\)", re.I)
OUTSIDE = re.compile(r"ALGORITHMS\.md|DESIGN\.md|\.\./shared/(?!data\b)")


def rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def prose_lines(path: Path):
    """(line number, line) outside fenced code blocks."""
    fenced = False
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.lstrip().startswith("```"):
            fenced = not fenced
            continue
        if not fenced:
            yield number, line


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: links reduced to their text, lower case, punctuation dropped,
    spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    found, seen = set(), {}
    for _, line in prose_lines(path):
        found.update(HTML_ANCHOR.findall(line))
        match = HEADING.match(line)
        if match:
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path):
    for number, line in prose_lines(path):
        for match in LINK.finditer(CODE_SPAN.sub("", line)):
            yield number, match.group(1)


def repo_paths(path: Path):
    """Repository paths named anywhere on the page, code blocks included; a module named from inside
    the package (families/means/params.py) as its path under dp_spark/."""
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        found = [(m, "") for m in REPO_PATH.finditer(line)] + [(m, "dp_spark/") for m in PACKAGE_PATH.finditer(line)]
        for match, prefix in found:
            name = prefix + match.group(1).rstrip(".-")
            following = line[match.end():match.end() + 1]
            if following and following in "*{<":
                continue  # a pattern: tests/test_*.py, {output_table}_{name}
            if any(part.split(".")[0].isupper() and part.split(".")[0] != "README" for part in name.split("/")):
                continue  # a placeholder: dp_spark/families/NAME.py
            yield number, name


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_link_reaches_a_file_and_a_section(page):
    broken = []
    for number, target in links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:
        file, _, fragment = target.partition("#")
        resolved = (page.parent / file).resolve() if file else page
        if not resolved.exists():
            broken.append(f"{rel(page)}:{number}: {target}: no such file")
        elif fragment and resolved.suffix == ".md" and fragment not in anchors(resolved):
            broken.append(f"{rel(page)}:{number}: {target}: no such section")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_every_repository_path_named_exists(page):
    missing = [f"{rel(page)}:{number}: {name}" for number, name in repo_paths(page) if not (ROOT / name).exists()]
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_the_specification_is_the_one_in_this_repository(page):
    sections = set(HTML_ANCHOR.findall((DOCS / "specification.md").read_text(encoding="utf-8")))
    problems = []
    for number, line in enumerate(page.read_text(encoding="utf-8").splitlines(), 1):
        if OUTSIDE.search(line):
            problems.append(f"{rel(page)}:{number}: points outside the repository: {line.strip()}")
        for cited in SPEC_CITATION.findall(line):
            if f"s{cited}" not in sections:
                problems.append(f"{rel(page)}:{number}: the specification has no §{cited}")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("page", PAGES, ids=rel)
def test_no_page_points_to_an_issue_number(page):
    pointers = [f"{rel(page)}:{number}: {line.strip()}" for number, line in prose_lines(page)
                if ISSUE_POINTER.search(CODE_SPAN.sub("", line))]
    assert not pointers, "give the reason instead of the issue number:\n" + "\n".join(pointers)


def test_the_index_links_every_page_and_the_readme_links_the_index():
    linked = {(INDEX.parent / target.partition("#")[0]).resolve() for _, target in links(INDEX)}
    unlisted = [rel(page) for page in PAGES if page not in (INDEX, ROOT / "README.md") and page not in linked]
    assert not unlisted, f"docs/README.md does not link {unlisted}"
    readme_links = {(ROOT / target.partition("#")[0]).resolve() for _, target in links(ROOT / "README.md")}
    assert INDEX in readme_links, "README.md does not link docs/README.md"


# ---------------------------------------------------------------------------
# The checks themselves must be able to fail.


def test_the_slug_is_githubs():
    assert slug("Privacy claim: value_sums, means") == "privacy-claim-value_sums-means"
    assert slug("`evaluate`: comparing methods (NOT private)") == "evaluate-comparing-methods-not-private"
    assert slug("3.1 SRA — (ε1 + ε2)-DP, user-level") == "31-sra--ε1--ε2-dp-user-level"


def test_the_patterns_catch_what_they_are_for(tmp_path):
    assert ISSUE_POINTER.search("fixed in issue 43") and ISSUE_POINTER.search("(issues 30 and 42)")
    assert ISSUE_POINTER.search("turn 2, issue #9") and not ISSUE_POINTER.search("an issue of scale")
    assert OUTSIDE.search("see ../shared/ALGORITHMS.md §3") and OUTSIDE.search("`../shared/DESIGN.md`")
    assert not OUTSIDE.search("reads real data from `../shared/data`")
    page = tmp_path / "page.md"
    page.write_text("See [a](gone.md), `dp_spark/gone.py`, dp_spark/NAME.py, core/gone.py and tests/test_*.py."
                    "\n\n```\n[b](x.md)\n```\n")
    assert [target for _, target in links(page)] == ["gone.md"]
    assert [name for _, name in repo_paths(page)] == ["dp_spark/gone.py", "dp_spark/core/gone.py"]


def test_the_plan_excerpt_of_choosing_epsilon_is_what_plan_prints(capsys, monkeypatch):
    """docs/choosing_epsilon.md quotes `dp-spark plan`: the command is run and every quoted line
    (but "...") must be in what it prints. `plan` reads no record, so no Spark starts here."""
    from dp_spark.cli import main

    page = (DOCS / "choosing_epsilon.md").read_text()
    found = re.search(r"```\n\$ dp-spark plan (\S+)\n(.*?)```", page, re.S)
    assert found, "the page quotes no `dp-spark plan` output"
    monkeypatch.chdir(ROOT)
    assert main(["plan", found.group(1)]) == 0
    printed = capsys.readouterr().out
    quoted = [line for line in found.group(2).splitlines() if line.strip() and line.strip() != "..."]
    assert quoted and all(line in printed for line in quoted), quoted
