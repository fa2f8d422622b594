"""``dp-spark check CONF``: what a run of this config would drop from the records, and why.

NOT PRIVATE: it reads the raw records and prints raw figures (rows read, rows dropped by reason,
examples of values that missed the domain), for the operator who sets a job up. Nothing is
charged and nothing is released, and its exit status does not depend on what it finds (0 once the
records are read), so that a scheduler's ``check && run`` cannot make a run's fate a function of
the raw data. A run itself decides only on DP figures (release.noise_only, release.guards).

It reads the source as the job does (the same schema checks, the same validation), then adds
what validation does not say: the share of each text column's values holding U+FFFD, the
character a reader puts where bytes are not valid in the encoding it was told (a Latin-1 CSV
read as UTF-8).
"""

from __future__ import annotations

from dataclasses import replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.bounding.keys import ROW_KEY
from dp_spark.families.aggregate import private_groups, run
from dp_spark.families.aggregate.keys import column as key_column
from dp_spark.families.registry import family_of
from dp_spark.io import checkins, validation
from dp_spark.jobs.runner import check_source_schema, job_domains, with_tables_read

LABEL = "NOT PRIVATE"
REPLACEMENT = "\ufffd"  # what a decoder writes for bytes the encoding cannot read
DROP_REASONS = {
    "rows_outside_item_domain": "item outside the domain",
    "rows_outside_location_set": "location outside the set",
    "rows_outside_attribute_domain": "attribute outside its domain",
    "rows_invalid_user_id": "null or blank user id",
    "rows_invalid_item_id": "item id that is no id (also counted as outside the domain)",
    "rows_invalid_value": "value that is no number",
    "rows_invalid_visits": "visits that are no positive whole number",
    "rows_outside_key_tuples": "key tuple not in the table of key tuples",
}


def undecodable_shares(df: DataFrame) -> dict[str, float]:
    """{text column: share of its non-null values holding U+FFFD}, for the columns that have any."""
    text = [f.name for f in df.schema.fields if isinstance(f.dataType, T.StringType) and f.name != ROW_KEY]
    if not text:
        return {}
    row = df.agg(*[F.avg(F.col(c).contains(REPLACEMENT).cast("double")).alias(c) for c in text]).collect()[0]
    return {c: float(row[c]) for c in text if row[c]}


def _validated(cfg, records, domains) -> tuple[dict, int, str, int | None]:
    """(validation's diagnostics, the rows it keeps, its explanation of values outside the domain,
    users with a usable id) as a run would find them."""
    reads = family_of(cfg.algorithm).reads
    if reads == "checkins":
        kept, found = checkins.validate_checkins(records, domains.items)
        return found, kept.count(), "", None
    validated = validation.validate_records(records, domains.items, domains.attributes,
                                            value=reads == "valued_records")
    try:
        by_n = validated.users_by_n  # users (values) with n kept rows (index)
        kept_rows = int((by_n.index.to_numpy() * by_n.to_numpy()).sum())
        return validated.diagnostics, kept_rows, validated.explain(), validated.users_read
    finally:
        validated.release()


# An aggregation's drops per key column: "<prefix><column>".
OUTSIDE_KEY, NULL_KEY = "rows_outside_key:", "rows_null_key:"


def _drop_reason(name: str) -> str:
    if name.startswith(OUTSIDE_KEY):
        return f"key {name[len(OUTSIDE_KEY):]} outside its values (or null)"
    if name.startswith(NULL_KEY):
        return f"key {name[len(NULL_KEY):]} null"
    return DROP_REASONS[name]


def _aggregated(cfg, records) -> tuple[dict, int, str, int | None]:
    """An aggregation's figures as _validated gives the others': each drop reason counted on the
    raw records (a row may have several), and the rows a run would group (before the selection,
    for key columns chosen privately: those it selects from)."""
    params = cfg.params
    keys = params.keys
    bad_user, user = validation.user_values(records)
    reasons = {"rows_invalid_user_id": bad_user}
    reasons.update({f"{OUTSIDE_KEY}{c.name}": c.position().isNull() for c in keys.columns})
    reasons.update({f"{NULL_KEY}{name}": key_column(name).isNull() for name in keys.tupled})
    if params.value is not None:
        text = isinstance(records.schema[params.value].dataType, T.StringType)
        reasons["rows_invalid_value"] = ~validation.usable_value(
            validation.value_number(key_column(params.value), text))
    row = records.agg(F.count(F.lit(1)).alias("rows_read"),
                      *[F.sum(F.when(F.coalesce(c, F.lit(True)), 1).otherwise(0)).alias(n)
                        for n, c in reasons.items()],
                      F.count_distinct(F.when(~bad_user, user)).alias("users")).collect()[0]
    found = {"rows_read": row["rows_read"], **{n: row[n] for n in reasons}}
    if keys.tupled and not keys.private:
        typed = replace(params, keys=private_groups.listed_typed(keys, records.schema))
        grouped, kept = run.usable_records(records, typed).count(), run.in_groups(records, typed).count()
        found["rows_outside_key_tuples"] = grouped - kept
    else:
        kept = run.usable_records(records, params).count()
    return found, kept, "", row["users"]


def check(cfg, spark) -> dict:
    """The operator's figures for ``cfg``'s source (NOT private): see the module's docstring."""
    reads = family_of(cfg.algorithm).reads
    if reads == "whole_records":
        raise NotImplementedError  # refused by the command before Spark starts
    cfg = with_tables_read(cfg, spark)
    domains = job_domains(cfg, spark)
    records = check_source_schema(cfg, spark, domains)
    found, kept, explain, users = (_aggregated(cfg, records) if reads == "keyed_records"
                                   else _validated(cfg, records, domains))
    dropped = {name: count for name, count in found.items() if name != "rows_read" and count}  # a row may have several
    return {"rows_read": found["rows_read"], "rows_kept": kept, "dropped": dropped, "users": users,
            "explain": explain, "undecodable": undecodable_shares(records), "encoding": cfg.source.encoding,
            "format": cfg.source.format}


def lines(result: dict, config: str) -> list[str]:
    """The result as the console shows it, every line labelled NOT PRIVATE."""
    read, kept = result["rows_read"], result["rows_kept"]
    out = [f"check of {config}: read from the raw records for the operator; nothing was charged or released, "
           "and these figures must not be published",
           f"rows read: {read:,}; a run would keep {kept:,} ({kept / read:.1%})" if read else "rows read: 0"]
    if result["users"] is not None:
        out.append(f"users with a usable id: {result['users']:,}")
    for name, count in result["dropped"].items():
        out.append(f"dropped, {_drop_reason(name)}: {count:,} rows")
    if result["explain"]:
        out.append(result["explain"])
    for column, share in result["undecodable"].items():
        out.append(f"{column}: {share:.1%} of the values hold U+FFFD, the mark of bytes that are not "
                   f"{result['encoding']}: set source.encoding to the file's character set (e.g. \"latin-1\")")
    if read and not kept:
        out.append("a run would release noise only: no record matches the domain (a run refuses such a release "
                   "unless guards.refuse_noise_only = false)")
    return [f"{LABEL}: {line}" for line in out]
