"""The Java source Spark generates for a DataFrame, for tests that check code is reused."""


def generated_code(df) -> str:
    """The generated Java for ``df``'s plan, without the plan text printed around it. Adaptive
    execution plans its stages only when it runs them, so it is off while the code is produced;
    whole-stage code generation, which the suite's session turns off (tests/conftest.py), is on."""
    spark = df.sparkSession
    settings = {"spark.sql.adaptive.enabled": "false", "spark.sql.codegen.wholeStage": "true"}
    before = {key: spark.conf.get(key) for key in settings}
    for key, value in settings.items():
        spark.conf.set(key, value)
    try:
        jvm = spark.sparkContext._jvm
        text = jvm.PythonSQLUtils.explainString(df._jdf.queryExecution(), "codegen")
    finally:
        for key, value in before.items():
            spark.conf.set(key, value)
    return "\n".join(line for line in text.splitlines() if line.startswith("/* "))
