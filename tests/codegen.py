"""The Java source Spark generates for a DataFrame, for tests that check code is reused."""


def generated_code(df) -> str:
    """The generated Java for ``df``'s plan, without the plan text printed around it. Adaptive
    execution plans its stages only when it runs them, so it is off while the code is produced."""
    spark = df.sparkSession
    adaptive = spark.conf.get("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.adaptive.enabled", "false")
    try:
        jvm = spark.sparkContext._jvm
        text = jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "codegen")
    finally:
        spark.conf.set("spark.sql.adaptive.enabled", adaptive)
    return "\n".join(line for line in text.splitlines() if line.startswith("/* "))
