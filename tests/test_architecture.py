"""The package's shape, read from the source with `ast` (nothing is imported):

* the import table: each floor (a folder of dp_spark, or a top-level module) imports only the
  floors MAY_IMPORT lists for it, and a family package imports no other family;
* the lab wall: non-private measurement code (dp_spark/lab/) is imported by no product module;
  the CLI may reach it only inside functions, when a lab command runs;
* no import cycles, counting imports inside functions as well as at module level;
* every module under MAX_MODULE_LINES lines;

and the test tiers of tests/conftest.py: each test gets its tier, and a unit test cannot start Spark.
See docs/architecture.md, "The floors" and "Tests".
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import pytest

PACKAGE_DIR = Path(__file__).resolve().parents[1] / "dp_spark"
LAB = "dp_spark.lab"
CLI = "dp_spark.cli"


def _in_cli(module: str) -> bool:
    """The command line is the package dp_spark.cli (or, in a test's small package, a module cli)."""
    return module == CLI or module.startswith(CLI + ".")

# Which floor may import which: the design of docs/architecture.md, "The floors". A floor is a
# folder of dp_spark or a top-level module; every family package (dp_spark/families/<name>/) is the
# floor FAMILY and may import its own package besides, never another family's. A folder that is
# not in the table fails the test until it is given its place. The lab may import every product
# floor; the CLI every floor (the lab only inside functions: the lab wall below).
FAMILY = "families.<name>"
MAY_IMPORT: dict[str, frozenset[str]] = {name: frozenset(floors) for name, floors in {
    "errors": (),
    "version": (),
    "core": ("errors",),
    "bounding": ("core", "errors"),
    "aggregates": ("bounding", "core", "errors"),
    "io": ("bounding", "core", "errors", "version"),
    "publishers": ("aggregates", "core", "errors"),
    "release": ("publishers", "io", "aggregates", "bounding", "core", "errors", "version"),
    FAMILY: ("release", "publishers", "io", "aggregates", "bounding", "core", "errors"),
    "families": (FAMILY, "release", "errors"),  # the registry, which lists the families
    "jobs": ("families", FAMILY, "release", "io", "core", "errors"),
    "display": ("core",),
    "api": ("jobs", "families", FAMILY, "release", "io", "bounding", "core", "display", "errors"),
    "dp_spark": ("api", "io", "errors", "version"),  # the package's face, dp_spark/__init__.py
    "lab": ("jobs", "families", FAMILY, "release", "publishers", "io", "aggregates", "bounding", "core",
            "errors", "version"),
    "cli": ("lab", "jobs", "families", FAMILY, "release", "io", "core", "display", "errors", "version"),
}.items()}

# A module's length in lines: a module past this has more than one job (split it, do not raise this).
MAX_MODULE_LINES = 500


@dataclass(frozen=True)
class Import:
    importer: str
    imported: str
    line: int
    in_function: bool  # inside a def: runs when the function is called, not at import


def module_name(path: Path, package_dir: Path) -> str:
    parts = list(path.relative_to(package_dir.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_modules(package_dir: Path) -> dict[str, Path]:
    return {module_name(path, package_dir): path for path in sorted(package_dir.rglob("*.py"))}


def _absolute(node: ast.ImportFrom, importer: str, is_package: bool) -> str:
    """The module a `from X import ...` names, with relative imports resolved."""
    if not node.level:
        return node.module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool, modules) -> list[str]:
    """The package modules an import statement loads: `from a import b` is module a.b when that
    is a module, else module a."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        source = _absolute(node, importer, is_package)
        names = [f"{source}.{alias.name}" if f"{source}.{alias.name}" in modules else source
                 for alias in node.names]
    return sorted({name for name in names if name in modules})


def imports_of(name: str, path: Path, modules) -> list[Import]:
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    found = []

    def visit(node: ast.AST, in_function: bool) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found.extend(Import(name, target, node.lineno, in_function)
                         for target in _targets(node, name, is_package, modules))
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
        for child in ast.iter_child_nodes(node):
            visit(child, inside)

    visit(tree, False)
    return found


def all_imports(package_dir: Path) -> list[Import]:
    modules = package_modules(package_dir)
    return [imp for name, path in modules.items() for imp in imports_of(name, path, modules)]


def graph(package_dir: Path) -> dict[str, set[str]]:
    edges = {name: set() for name in package_modules(package_dir)}
    for imp in all_imports(package_dir):
        if imp.imported != imp.importer:
            edges[imp.importer].add(imp.imported)
    return edges


def in_lab(module: str) -> bool:
    return module == LAB or module.startswith(LAB + ".")


def lab_wall_breaches(package_dir: Path) -> list[Import]:
    """Imports of the lab from outside it; the CLI's count only when made at module level."""
    return [imp for imp in all_imports(package_dir)
            if in_lab(imp.imported) and not in_lab(imp.importer)
            and not (_in_cli(imp.importer) and imp.in_function)]


def cycles(edges: dict[str, set[str]]) -> list[frozenset[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm)."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def connect(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for target in sorted(edges[module]):
            if target not in index:
                connect(target)
                low[module] = min(low[module], low[target])
            elif target in on_stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for module in sorted(edges):
        if module not in index:
            connect(module)
    return found


def floor_of(module: str) -> str:
    """The floor a module stands on: its folder under dp_spark, or its own name for a top-level
    module; FAMILY for a module of a family package."""
    parts = module.split(".")[1:]
    if not parts:
        return "dp_spark"
    if parts[0] == "families" and len(parts) > 1 and parts[1] != "registry":
        return FAMILY
    return parts[0]


def family_of(module: str) -> str | None:
    parts = module.split(".")
    return parts[2] if floor_of(module) == FAMILY else None


def table_breaches(package_dir: Path) -> list[Import]:
    """Imports the table does not allow: to a floor not listed for the importer's (a floor missing
    from the table allows nothing), or from one family package into another."""
    found = []
    for imp in all_imports(package_dir):
        importer, imported = floor_of(imp.importer), floor_of(imp.imported)
        if importer == imported:
            if family_of(imp.importer) != family_of(imp.imported):
                found.append(imp)
        elif imported not in MAY_IMPORT.get(importer, ()):
            found.append(imp)
    return found


def long_modules(package_dir: Path) -> dict[str, int]:
    lengths = {name: len(path.read_text().splitlines()) for name, path in package_modules(package_dir).items()}
    return {name: n for name, n in lengths.items() if n >= MAX_MODULE_LINES}


def _describe(imports: list[Import]) -> str:
    return "\n".join(f"  {i.importer} line {i.line}: imports {i.imported}"
                     f"{' (in a function)' if i.in_function else ''}" for i in imports)


# --- The package as it is ---------------------------------------------------------------------


def test_no_product_module_imports_the_lab():
    breaches = lab_wall_breaches(PACKAGE_DIR)
    assert not breaches, ("dp_spark/lab/ is non-private measurement code; product modules must not import it "
                          "(dp_spark/cli/ only inside functions):\n" + _describe(breaches))


def test_the_import_graph_has_no_new_cycles():
    new = [sorted(c) for c in cycles(graph(PACKAGE_DIR))]
    assert not new, "import cycles (module-level and function-level imports both count):\n" + "\n".join(
        "  a cycle among " + ", ".join(c) for c in new)


def test_each_floor_imports_only_what_the_table_allows():
    breaches = table_breaches(PACKAGE_DIR)
    assert not breaches, ("imports the table MAY_IMPORT does not allow (docs/architecture.md, \"The floors\"):\n"
                          + _describe(breaches))


def test_every_floor_is_in_the_table():
    floors = {floor_of(name) for name in package_modules(PACKAGE_DIR)}
    assert floors <= set(MAY_IMPORT), f"floors with no place in MAY_IMPORT: {sorted(floors - set(MAY_IMPORT))}"


def test_modules_stay_under_the_line_limit():
    assert not long_modules(PACKAGE_DIR), (f"modules of {MAX_MODULE_LINES} lines or more (split them): "
                                           f"{long_modules(PACKAGE_DIR)}")


# --- The checks themselves catch what they guard, on a small package built here ----------------


def write_package(root: Path, files: dict[str, str]) -> Path:
    package = root / "dp_spark"
    for relative, source in {"__init__.py": "", "lab/__init__.py": "", **files}.items():
        (package / relative).parent.mkdir(parents=True, exist_ok=True)
        (package / relative).write_text(source)
    return package


@pytest.mark.parametrize("source", [
    "from dp_spark.lab import bench\n",
    "import dp_spark.lab.bench\n",
    "from .lab.bench import JOBS\n",
    "def f():\n    from dp_spark.lab import bench\n",
    "class C:\n    def m(self):\n        import dp_spark.lab\n",
])
def test_a_product_module_importing_the_lab_is_caught(tmp_path, source):
    package = write_package(tmp_path, {"lab/bench.py": "JOBS = ()\n", "publish.py": source})
    assert [(i.importer, i.imported.startswith(LAB)) for i in lab_wall_breaches(package)] == [
        ("dp_spark.publish", True)]


def test_the_cli_may_import_the_lab_only_inside_functions(tmp_path):
    lazy = write_package(
        tmp_path / "lazy", {"lab/bench.py": "", "cli.py": "def f():\n    from dp_spark.lab import bench\n"}
    )
    eager = write_package(tmp_path / "eager", {"lab/bench.py": "", "cli.py": "from dp_spark.lab import bench\n"})
    assert lab_wall_breaches(lazy) == []
    assert [i.line for i in lab_wall_breaches(eager)] == [1]


def test_a_cycle_through_a_function_level_import_is_caught(tmp_path):
    package = write_package(tmp_path, {
        "a.py": "from dp_spark import b\n",
        "b.py": "from dp_spark.c import x\n",
        "c.py": "def x():\n    import dp_spark.a\n",
        "d.py": "from dp_spark import a\n",
    })
    assert cycles(graph(package)) == [frozenset({"dp_spark.a", "dp_spark.b", "dp_spark.c"})]


@pytest.mark.parametrize("files, breach", [
    ({"core/ledger.py": "from dp_spark.release import engine\n", "release/engine.py": ""},
     ("dp_spark.core.ledger", "dp_spark.release.engine")),  # an arrow back up
    ({"bounding/keys.py": "def f():\n    from dp_spark.families.means import family\n",
      "families/means/family.py": ""},
     ("dp_spark.bounding.keys", "dp_spark.families.means.family")),  # inside a function too
    ({"families/means/family.py": "from dp_spark.families.counts import sampling\n",
      "families/counts/sampling.py": ""},
     ("dp_spark.families.means.family", "dp_spark.families.counts.sampling")),  # one family into another
    ({"attic/old.py": "from dp_spark.core import ledger\n", "core/ledger.py": ""},
     ("dp_spark.attic.old", "dp_spark.core.ledger")),  # a floor the table does not list
])
def test_an_import_the_table_does_not_allow_is_caught(tmp_path, files, breach):
    package = write_package(tmp_path, files)
    assert [(i.importer, i.imported) for i in table_breaches(package)] == [breach]


def test_what_the_table_allows_passes(tmp_path):
    package = write_package(tmp_path, {
        "core/ledger.py": "from dp_spark import errors\n", "errors.py": "",
        "release/engine.py": "from dp_spark.core import ledger\n",
        "families/means/family.py": "from dp_spark.release import engine\nfrom dp_spark.families.means import params\n",
        "families/means/params.py": "",
        "families/registry.py": "from dp_spark.families.means import family\n",
    })
    assert table_breaches(package) == []


def test_a_long_module_is_caught(tmp_path):
    package = write_package(tmp_path, {"short.py": "x = 1\n" * (MAX_MODULE_LINES - 1),
                                       "long.py": "x = 1\n" * MAX_MODULE_LINES})
    assert long_modules(package) == {"dp_spark.long": MAX_MODULE_LINES}


# --- The test tiers (tests/conftest.py), on a small suite run in-process -----------------------

SMALL_SUITE = """
import pytest

def test_pure():
    assert sum([1, 2]) == 3

def test_asks_for_a_session():
    from pyspark.sql import SparkSession
    SparkSession.builder.master("local[1]").getOrCreate()

@pytest.fixture
def table(spark):
    return spark

def test_uses_spark(spark):
    pass

def test_uses_spark_through_a_fixture(table):
    pass

@pytest.mark.slow
def test_long():
    pass

@pytest.mark.system
def test_declared_system(spark):
    pass
"""


@pytest.fixture
def small_suite(pytester, monkeypatch):
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # the installed plugins cost a second a run
    pytester.makeconftest((Path(__file__).parent / "conftest.py").read_text())
    pytester.makepyfile(test_small=SMALL_SUITE)
    return pytester


@pytest.mark.parametrize("tier, tests", [
    ("unit", ["test_pure", "test_asks_for_a_session"]),
    ("spark", ["test_uses_spark", "test_uses_spark_through_a_fixture"]),
    ("system", ["test_long", "test_declared_system"]),
])
def test_each_test_gets_its_tier(small_suite, tier, tests):
    result = small_suite.runpytest_inprocess("--collect-only", "-q", "-m", tier, "-p", "no:cacheprovider")
    assert sorted(line.split("::")[1] for line in result.outlines if "::" in line) == sorted(tests)


def test_a_unit_test_that_asks_for_a_session_fails_loudly(small_suite):
    result = small_suite.runpytest_inprocess("-m", "unit", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=1, failed=1, deselected=4)
    result.stdout.fnmatch_lines(["*UnitTestStartedSpark: a unit-tier test asked for a SparkSession*"])


def test_a_test_that_uses_spark_cannot_be_declared_unit(small_suite):
    small_suite.makepyfile(test_bad="import pytest\n@pytest.mark.unit\ndef test_x(spark):\n    pass\n")
    result = small_suite.runpytest_inprocess("--collect-only", "-p", "no:cacheprovider", "test_bad.py")
    assert result.ret != 0
    result.stderr.fnmatch_lines(["*test_x is marked unit but uses a Spark fixture*"])


def test_every_folder_of_the_package_is_a_regular_package():
    """A folder without __init__.py imports from a checkout (as a namespace package) but
    setuptools leaves it out of a wheel: dp_spark/families/ once lacked one."""
    folders = {path.parent for path in PACKAGE_DIR.rglob("*.py") if "__pycache__" not in path.parts}
    missing = sorted(str(folder.relative_to(PACKAGE_DIR.parent)) for folder in folders
                     if not (folder / "__init__.py").exists())
    assert not missing, f"folders without __init__.py: {missing}"


def test_a_long_test_cannot_be_declared_unit(small_suite):
    """A module's ``pytestmark = pytest.mark.unit`` once kept its long control in test-fast."""
    small_suite.makepyfile(test_bad="import pytest\npytestmark = pytest.mark.unit\n"
                                    "@pytest.mark.long\ndef test_x():\n    pass\n")
    result = small_suite.runpytest_inprocess("--collect-only", "-p", "no:cacheprovider", "test_bad.py")
    assert result.ret != 0
    assert "marked unit but also slow or long" in result.stdout.str() + result.stderr.str()
