"""The Java source Spark generates for a DataFrame, for tests that check code is reused."""

from tests.spark_conf import session_settings


def generated_code(df) -> str:
    """The generated Java for ``df``'s plan, without the plan text printed around it. Adaptive
    execution plans its stages only when it runs them, so it is off while the code is produced;
    code generation, which the suite's session turns off (tests/conftest.py, SUITE_SQL_SETTINGS), is
    on as in Spark's defaults."""
    spark = df.sparkSession
    with session_settings(spark, {"spark.sql.adaptive.enabled": "false", "spark.sql.codegen.wholeStage": "true",
                                  "spark.sql.codegen.factoryMode": "FALLBACK"}):
        text = spark.sparkContext._jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "codegen")
    return "\n".join(line for line in text.splitlines() if line.startswith("/* "))
