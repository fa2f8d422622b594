"""Product code must run on Spark Connect, whose client has no SparkContext, no py4j JVM and no
RDDs. Only the lab (measurement code, not the product) may reach for them, and guards it."""

import ast
from pathlib import Path

from tests.conftest import ROOT

# Attributes that exist on a classic session only.
CLASSIC_ONLY = frozenset({"sparkContext", "_jvm", "_jsc", "rdd"})


def classic_only_uses(package: Path) -> list[str]:
    """``file:line name`` for each use of a classic-only attribute in ``package`` outside lab/:
    as an attribute (``spark.sparkContext``) or by name (``getattr(df, "rdd")``)."""
    found = []
    for module in sorted(package.rglob("*.py")):
        if "lab" in module.relative_to(package).parts[:1]:
            continue
        for node in ast.walk(ast.parse(module.read_text(), str(module))):
            name = (node.attr if isinstance(node, ast.Attribute)
                    else node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None)
            if name in CLASSIC_ONLY:
                found.append((str(module.relative_to(package.parent)), node.lineno, node.col_offset, name))
    return [f"{path}:{line} {name}" for path, line, _column, name in sorted(found)]


def test_product_code_uses_no_sparkcontext_jvm_or_rdd():
    assert classic_only_uses(ROOT / "dp_spark") == []


def test_the_check_sees_each_kind_of_use(tmp_path):
    package = tmp_path / "pkg"
    (package / "lab").mkdir(parents=True)
    (package / "io.py").write_text("def f(spark, df):\n    spark.sparkContext.setLogLevel('WARN')\n"
                                   "    return df.rdd, getattr(spark, '_jsc'), spark._jvm\n")
    (package / "lab" / "bench.py").write_text("def g(spark):\n    return spark.sparkContext\n")
    assert classic_only_uses(package) == ["pkg/io.py:2 sparkContext", "pkg/io.py:3 rdd", "pkg/io.py:3 _jsc",
                                          "pkg/io.py:3 _jvm"]
