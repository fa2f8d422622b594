"""Validating records: ids checked and cast, rows outside the public domain dropped.

``validate_records`` checks ids in one aggregate pass and casts them; ids outside
the public domain are dropped and counted in the NOT-private diagnostics.

User ids are integers or text (:func:`user_values`): a column of numbers gives long ids; a text
column gives text ids, where a value written as a whole number is that number's decimal form ("042",
" 42" and "42.0" are the user "42", as the number 42 is) and any other value is itself without the
spaces around it ("u474", a UUID). Item ids are integers, or strings when the item domain is a string
domain (``ItemDomain.is_string``): then the item column is compared as a string, exactly (no
trimming, case-sensitive), and an integer column by its decimal form (42 is "42", never "042").
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from dp_spark.bounding import keys
from dp_spark.core.domain import NUMBER, AttributeDomain, ItemDomain
from dp_spark.core.progress import diagnostic
from dp_spark.errors import DataError
from dp_spark.io.session import default_parallelism
from dp_spark.io.sql_literals import in_id_list

ID_COLUMNS = ("user_id", "item_id")
_ITEM_LONG = "_item_id_long"  # the item id as a long, by name while validation checks a listed domain
# A user's share of rows outside the domain, for the guards (release.guards), is counted in
# steps of 1/SHARE_GRID: ⌊SHARE_GRID · outside / rows⌋, an integer in [0, SHARE_GRID], so that
# its sum over users is exact and moves by at most SHARE_GRID with one user.
SHARE_GRID = 1024


INTEGER_TYPES = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
# The number types a value to be summed may have (sums and means); text is read (value_number).
NUMERIC_TYPES = (*INTEGER_TYPES, T.FloatType, T.DoubleType, T.DecimalType)


def check_value_schema(df: DataFrame) -> None:
    """A DataError unless ``df`` has a ``value`` column of numbers, or of text (a CSV's columns
    are text: a value that does not read as a number is dropped and counted, as an id that does
    not is). Booleans, dates and the like are refused: the schema is public, so this is checked
    before any budget is charged."""
    if "value" not in df.columns:
        raise DataError("the records have no value column to sum (source.columns.value names it; in the API, value=)")
    kind = df.schema["value"].dataType
    if not isinstance(kind, (*NUMERIC_TYPES, T.StringType)):
        raise DataError(f"the value column must hold numbers, got {kind.simpleString()}")


def value_number(value: Column, text: bool = False) -> Column:
    """The value as a double. ``text``: the column is a string, read as a number only when it is
    written as one (NUMBER, spaces around it allowed): Spark's own cast would also take "4d",
    "4.5f" or "0x1p3"; anything else is null, and dropped."""
    if not text:
        return value.cast("double")
    trimmed = F.trim(value)
    return F.when(trimmed.rlike(f"^{NUMBER}\\z"), trimmed.try_cast("double"))


def usable_value(value: Column, text: bool = False) -> Column:
    """Whether a record's value can be summed: a number, not null, not NaN, not infinite. Never
    clipped to a range's end instead: Spark orders NaN above every number and ``greatest`` skips
    nulls, so a NaN would count as ``high`` and a null as ``low``."""
    number = value_number(value, text)
    return F.coalesce(number.isNotNull() & ~F.isnan(number) & (F.abs(number) != F.lit(float("inf"))), F.lit(False))


# A whole number written as a decimal: "4.0", "-12.", "1.5E7" (checked to be whole after parsing).
DECIMAL_ID = r"[+-]?[0-9]+(\.[0-9]{0,18})?([eE]\+?[0-9]{1,2})?"


def _integer_problems(df: DataFrame, column: str) -> tuple[Column, Column]:
    """(is not a valid integer id, the value as a long) for one id column."""
    field_type = df.schema[column].dataType
    c = F.col(column)
    if isinstance(field_type, INTEGER_TYPES):
        return F.lit(False), c.cast("long")
    if isinstance(field_type, T.StringType):
        # Compared as values: "4.0" or "1.5E7" (a CSV written from doubles) is an id, as the
        # double 4.0 is below. Only ASCII digits, at most 18 after the point and no negative
        # exponent, so the decimal holds the number exactly; parsed only where the plain long
        # parse failed (coalesce stops at the first value).
        text = F.trim(c)
        as_decimal = F.when(text.rlike(f"^{DECIMAL_ID}\\z"), text.try_cast("decimal(38,18)"))
        in_range = (as_decimal >= F.lit(-(2**63))) & (as_decimal <= F.lit(2**63 - 1))
        whole = F.when(in_range & (as_decimal == F.floor(as_decimal)), as_decimal.cast("long"))
        as_long = F.coalesce(text.try_cast("long"), whole)
        return c.isNotNull() & as_long.isNull(), as_long
    if isinstance(field_type, (T.FloatType, T.DoubleType, T.DecimalType)):
        # try_cast truncates 1.5 to 1 and saturates 2^63 to 2^63 - 1 (which equals 2^63 again as a
        # double), hence the explicit range; floor() would raise an overflow error instead.
        truncated = c.try_cast("long")
        in_range = (c >= F.lit(-(2.0**63))) & (c < F.lit(2.0**63))
        as_long = F.when(in_range & (truncated == c), truncated)
        return c.isNotNull() & as_long.isNull(), as_long
    raise DataError(f"column {column} has type {field_type.simpleString()}; expected integer ids")


def user_values(df: DataFrame, column: str = "user_id") -> tuple[Column, Column]:
    """(is not a usable user id, the id as the job keys users by) for the user column.

    Numbers give long ids (:func:`_integer_problems`). Text gives text ids: the decimal form of
    the number when the text is a whole number (so that a CSV's "42", "042" and "42.0" are one
    user, and the same user as the number 42 of a Parquet column: the sampling keys hash such an
    id as that number, bounding.keys.keyed_position), else the text without its surrounding
    spaces; an empty text is no id. Each record's id depends on that record alone."""
    kind = df.schema[column].dataType
    if not isinstance(kind, (T.StringType, *NUMERIC_TYPES)):
        raise DataError(f"column {column} has type {kind.simpleString()}; user ids are integers or text")
    if not isinstance(kind, T.StringType):
        return _integer_problems(df, column)
    _bad, number = _integer_problems(df, column)
    text = F.trim(F.col(column))
    user = F.coalesce(number.cast("string"), F.when(text != F.lit(""), text))
    return F.col(column).isNotNull() & user.isNull(), user


def _string_item(df: DataFrame, column: str) -> tuple[Column, Column]:
    """(is not a valid string id, the value as a string) for the item column against a string
    domain. A string column as it is; an integer column by its decimal form. Other types are
    refused rather than cast: a double 4.0 would read as "4.0", which no one means."""
    field_type = df.schema[column].dataType
    c = F.col(column)
    if isinstance(field_type, T.StringType):
        return F.lit(False), c
    if isinstance(field_type, INTEGER_TYPES):
        return F.lit(False), c.cast("string")
    raise DataError(f"column {column} has type {field_type.simpleString()}; a string item domain compares "
                    "string or integer ids")


def _item_values(df: DataFrame, items: ItemDomain | None, column: str = "item_id") -> tuple[Column, Column]:
    """(is not a valid id, the id as the domain holds it: a long, or a string for a string domain)."""
    if items is not None and items.is_string:
        return _string_item(df, column)
    return _integer_problems(df, column)


def _in_item_domain(item: Column, items: ItemDomain | None, name: str | None = None) -> Column:
    """Whether ``item`` is in the domain (False for a null id). ``name`` (a column holding ``item``)
    for a domain that lists integer ids: one SQL expression (io.sql_literals), where Column.isin's
    call per id took 5.5 s of driver time per release on MovieLens' 3,883 movies."""
    if items is None:  # no item domain (user_histogram may go without): every integer id counts
        return F.lit(True)
    if items.id_range:
        return F.coalesce(item.between(*items.id_range), F.lit(False))
    return F.coalesce(in_id_list(name, items.ids) if name else item.isin(items.ids.tolist()), F.lit(False))


def outside_item_domain(df: DataFrame, items: ItemDomain, column: str = "item_id") -> Column:
    """Rows whose id (read as validation reads it) is not in ``items``."""
    _bad, item = _item_values(df, items, column)
    return ~_in_item_domain(item, items)


def _attribute_values(df: DataFrame, attributes: AttributeDomain) -> tuple[Column, Column]:
    """(whether the row's attr is in the domain, the attr as the domain's own string).

    Compared as values, not as text: when every domain value is a number, the column is read as
    a number (a string column trimmed first) and looked up among the domain's numbers, so "4.0",
    " 4" and the double 4.0 are all the domain's "4". Otherwise (names such as "Mon") the column
    is compared as a string. An integer column against integers written plainly is compared as
    text, which is the same comparison and keeps the plan of the common case unchanged."""
    field_type = df.schema["attr"].dataType
    raw = F.col("attr")
    as_text = raw.cast("string")
    numbers = attributes.numbers
    plain_integers = numbers is not None and all(v == str(int(n)) for v, n in zip(attributes.values, numbers))
    if numbers is None or (isinstance(field_type, INTEGER_TYPES) and plain_integers):
        return F.coalesce(as_text.isin(list(attributes.values)), F.lit(False)), as_text
    if isinstance(field_type, T.StringType):  # ASCII numbers only: not "NaN", "4d" or "0x1p3", which Java parses
        text = F.trim(raw)
        number = F.when(text.rlike(f"^{NUMBER}\\z"), text.try_cast("double"))
    else:
        number = raw.try_cast("double")
    lookup = F.create_map(*[F.lit(x) for pair in zip(numbers, attributes.values) for x in pair])
    value = F.try_element_at(lookup, number)
    return value.isNotNull(), value


def _quoted(values) -> str:
    return ", ".join(f'"{v}"' for v in values)


def _domain_values(attributes: AttributeDomain) -> str:
    shown = _quoted(attributes.values[:5]) + (", ..." if len(attributes) > 5 else "")
    kind = "numbers, compared by value" if attributes.numbers is not None else "strings, compared as text"
    return f"the domain holds {shown} ({len(attributes)} values: {kind})"


def outside_examples(df: DataFrame, column: str, outside: Column, limit: int = 3) -> list[str]:
    """Up to ``limit`` distinct raw values of ``column`` in rows where ``outside`` holds. Reads
    the records until it has them (a job of its own): only for a warning or a refusal. NOT private."""
    rows = df.where(outside).select(F.col(column).cast("string").alias("v")).limit(50 * limit).collect()
    seen: list[str] = []
    for row in rows:
        if row["v"] not in seen:
            seen.append(row["v"])
    return seen[:limit]


def describe_mismatch(df: DataFrame, column: str, outside: Column, domain: str) -> str:
    """'attr values look like "monday" (a string column); the domain holds "Mon", ...': the
    sentence a warning or refusal gives. NOT private (it quotes raw values)."""
    examples = outside_examples(df, column, outside)
    if not examples:
        return ""
    kind = df.schema[column].dataType.simpleString()
    return f"{column} values outside the domain look like {_quoted(examples)} (a {kind} column); {domain}"


@dataclass(frozen=True)
class ValidatedRecords:
    # In-domain rows only: user ids as long (as text from a text column: user_values), item ids as
    # long (as string for a string domain), attr as string.
    records: DataFrame
    diagnostics: dict  # NOT private: raw counts for the operator
    user_counts: DataFrame  # [user_id, _n]: in-domain rows per user (cached; see release)
    cached: DataFrame  # the persisted per-user table behind user_counts
    users_by_n: pd.Series  # number of users (values) with n in-domain rows (index); NOT private
    # [user_id, _sampled_item(, _sampled_value)]: one in-domain record per user, drawn uniformly
    # (validate_records' one_per_user_salt); None when not asked for. NOT private.
    one_per_user: DataFrame | None = None
    # [user_id, _items array, _r]: each user's distinct in-domain items and how many (r >= 1), from
    # the same aggregation (cached with it); None when not asked for. NOT private.
    item_sets: DataFrame | None = None
    # Number of users (values) with r distinct in-domain items (index), with item_sets. NOT private.
    users_by_items: pd.Series | None = None
    # Rows outside the domain by column (item_id, and attr when there is an attribute domain), each
    # row counted once: a row outside both is counted under item_id. NOT private.
    rows_outside_domain: dict[str, int] | None = None
    # Says which values did not match the domain, quoting a few (NOT private; reads records).
    explain: Callable[[], str] = lambda: ""
    # For the guards (NOT private until they noise them): users with a usable id, and the sums
    # over them of ⌊SHARE_GRID · share⌋ of their rows outside the domain ("all"), and of their
    # rows dropped for anything but the item: an attribute outside its domain or an unusable
    # value ("attr"; with items selected privately, the items left out are no mismatch).
    users_read: int = 0
    dropped_share: dict[str, int] | None = None

    def release(self) -> None:
        """Drop the cached per-user table once the job no longer needs it."""
        self.cached.unpersist()


def _id_problem(df: DataFrame, column: str, rows: int, items: ItemDomain | None = None) -> tuple[str, str] | None:
    """Why ``column`` is unusable (null or non-integer values), or None: (what is wrong, the
    count and an example, which quote the records: NOT private). Error path only. ``items`` is
    the domain the item column is read against."""
    bad, _typed = _item_values(df, items, column) if column == "item_id" else user_values(df, column)
    stats = df.agg(F.sum(F.col(column).isNull().cast("long")).alias("nulls"),
                   F.sum(bad.cast("long")).alias("bad")).first()
    if stats["nulls"]:
        return f"column {column} has null values", f"{stats['nulls']:,} of {rows:,} rows"
    if stats["bad"]:
        example = df.where(bad).select(F.col(column).cast("string")).first()[0]
        if column == "user_id" and keys.text_user(df):
            return "column user_id has empty values", f"{stats['bad']:,} of {rows:,} rows"
        return (f"column {column} has non-integer values (ids must be whole numbers within the range of a long)",
                f"{stats['bad']:,} of {rows:,} rows, e.g. {example!r}")
    return None


def refuse_strictly(problem: str, detail: str, progress) -> None:
    """guards.strict: refuse the source. The message names the problem only; how many rows and
    which values (NOT private) go to the operator's diagnostics."""
    diagnostic(progress, f"{problem}: {detail}")
    raise DataError(f"{problem}; guards.strict refuses such a source (without it, these rows are dropped and "
                    "counted in the diagnostics: dp-spark run --diagnostics)")


def keyed_by_user(df: DataFrame) -> DataFrame:
    """(user_id, item_id) with the user id parsed as validation parses it, for partition selection:
    "1", " 01" and "1.0" are one user (the privacy unit), so one user's bound on distinct items
    cannot be multiplied by spelling the id several ways. Rows whose user id does not parse are
    left out (validation drops them too, or refuses them when strict). Item ids must be integers
    or strings, as a selected domain's are; checked here, before any budget is spent."""
    item_type = df.schema["item_id"].dataType
    if not isinstance(item_type, (*INTEGER_TYPES, T.StringType)):
        raise DataError(f"column item_id has type {item_type.simpleString()}; items selected privately need integer "
                        "or string ids")
    _bad, user = user_values(df)
    return df.select(user.alias("user_id"), F.col("item_id")).where(F.col("user_id").isNotNull())


def check_schema(df: DataFrame, items: ItemDomain | None, private_items: bool = False,
                 attributes: AttributeDomain | None = None) -> None:
    """A DataError when the user, item or attribute column has a type no value of its domain can
    have (validate_records and keyed_by_user would find it later, after the charge); reads no record."""
    def columns() -> DataFrame:
        _bad, user = user_values(df)
        selected = [user.alias("user_id")]
        if private_items:
            keyed_by_user(df)
        else:
            selected.append(_item_values(df, items)[1].alias("item_id"))
        if attributes is not None:
            selected.append(_attribute_values(df, attributes)[1].alias("attr"))
        return df.select(*selected)

    analysed(columns)


def analysed(build: Callable[[], DataFrame]) -> None:
    """Have Spark analyse the DataFrame ``build`` makes (its expressions' types and casts), which
    reads no record; a column it cannot convert is a DataError."""
    from pyspark.errors import AnalysisException

    try:
        build().schema  # noqa: B018 - classic Spark analyses in select(), Spark Connect when asked for the schema
    except AnalysisException as exc:
        first_line = str(exc).strip().splitlines()[0]
        raise DataError(f"the source's columns cannot be read as this job reads them: {first_line}") from None


def validate_records(df: DataFrame, items: ItemDomain, attributes: AttributeDomain | None,
                     one_per_user_salt: int | None = None, item_sets: bool = False, strict: bool = False,
                     progress=None, value: bool = False, sample_value: bool = False) -> ValidatedRecords:
    """Check ids, cast them, and drop rows outside the public domain.

    One pass: a per-user aggregation that counts each user's in-domain rows
    (which bounding reuses), then summed per row count on that small cached
    table (bounding reuses the users per row count too). Ids outside the
    domain are dropped and counted in the NOT-private diagnostics, and so
    are rows with a null or non-integer id (item ids: non-integer only
    against an integer domain; a string domain compares them as strings):
    whether a run goes on must not depend on one record. With ``strict``
    (guards.strict) such ids, or no records at all, are a DataError instead;
    ``progress`` then gets how many (a diagnostic).

    The pass keeps as few running sums as it can (each costs about a tenth of
    the scan; docs/lab/performance.md): an unusable user id lands in the null
    user group, an unusable item id is counted only when the column can hold
    one, and rows outside the attribute domain are what is left over. Which
    problem it was is worked out only on the error path.

    With ``one_per_user_salt`` the same aggregation also keeps each user's
    in-domain record of smallest random position under that salt, as
    ``one_per_user``: exactly the record ``user_records.sample_selection(records,
    1, salt=one_per_user_salt)`` keeps, a uniform sample of one record per user
    (HPA's popularity sample with d = 1), without a pass of its own. With
    ``sample_value`` (and ``value``) it carries that record's value too, as
    ``_sampled_value`` (the private choice of a clipping range).

    With ``item_sets`` it also collects each user's set of distinct in-domain
    items (DPSense's rows), as ``item_sets``, and groups the small table by
    the sets' sizes too, giving ``users_by_items`` (users per number of
    distinct items) in the same job: the rows then need neither a second scan
    of the records nor a second shuffle.

    With ``value`` the records carry a ``value`` column (sums and means; numbers, or text read
    as numbers): a record whose value is null, NaN, infinite or text that is no number is
    dropped like a record with an unusable id (a rule about the record alone, so each user's
    kept records still depend on that user's own) and counted in the diagnostics and under
    ``rows_outside_domain["value"]``; with ``strict`` it is refused. A column of another type
    is refused before (:func:`check_value_schema`).
    """
    _bad, user = user_values(df)
    _bad, item = _item_values(df, items)
    listed = items is not None and not items.id_range and not items.is_string  # integer ids, listed
    if listed:
        df = df.withColumn(_ITEM_LONG, item)
        item = F.col(_ITEM_LONG)
    in_attrs, attr = _attribute_values(df, attributes) if attributes else (F.lit(True), None)
    in_items = _in_item_domain(item, items, _ITEM_LONG if listed else None)
    attrs_match = in_attrs  # for explain(): a bad value is no attribute mismatch
    value_text = value and isinstance(df.schema["value"].dataType, T.StringType)
    if sample_value and not (value and one_per_user_salt is not None):
        raise ValueError("a sampled value needs value=True and one_per_user_salt")
    if value:  # a record with an unusable value counts as outside the domain, under its own name
        good_value = usable_value(F.col("value"), value_text)
        in_attrs = in_attrs & good_value
    item_field = df.schema["item_id"]
    item_can_be_bad = item_field.nullable or not isinstance(item_field.dataType, INTEGER_TYPES)
    sums = {"_n": in_items & in_attrs, "out_items": ~in_items}
    if item_can_be_bad:
        sums["bad_items"] = item.isNull()
    if value:
        sums["bad_values"] = in_items & ~good_value
    sample_inputs, sample = [], []
    if one_per_user_salt is not None:
        if keys.ROW_KEY not in df.columns:
            raise ValueError(f"a sample in validation needs the {keys.ROW_KEY} column (io.read_records adds it)")
        # The key that bounding hashes for the validated records: the user id as a long, the row key.
        position = keys.keyed_position([user, F.col(keys.ROW_KEY)], text_user=keys.text_user(df))
        in_domain = in_items & in_attrs
        sample_inputs = [F.when(in_domain, item).alias("_sample_item"), F.when(in_domain, position).alias("_sample_at")]
        # min_by passes over rows whose order is null: a user's rows outside the domain are never drawn.
        sample = [F.min_by("_sample_item", "_sample_at").alias("_sampled_item")]
        if sample_value:  # the same record's value (in_domain includes a usable value)
            sample_inputs.append(F.when(in_domain, value_number(F.col("value"), value_text)).alias("_sample_value"))
            sample.append(F.min_by("_sample_value", "_sample_at").alias("_sampled_value"))
    sets_input, sets = [], []
    if item_sets:
        # collect_list skips nulls: a user's rows outside the domain add nothing to its set. A
        # list made distinct at the end took three quarters of collect_set's time (3M rows); the
        # order of the items is not used.
        sets_input = [F.when(in_items & in_attrs, item).alias("_set_item")]
        sets = [F.array_distinct(F.collect_list("_set_item")).alias("_items")]
    # The sample's salt comes as a column of a joined one-row table (never a literal in the plan);
    # only this aggregation's input carries it.
    scanned = keys.with_salt(df, one_per_user_salt) if sample else df
    per_user = (
        scanned.select(user.alias("user_id"), *[flag.alias(name) for name, flag in sums.items()], *sample_inputs,
                  *sets_input)
        .groupBy("user_id")
        .agg(F.count(F.lit(1)).alias("rows"), *[F.sum(F.col(name).cast("long")).alias(name) for name in sums],
             *sample, *sets)
    )
    if sets:
        per_user = per_user.withColumn("_r", F.size("_items"))
    # Few partitions: the table is small (a row per user) and is broadcast several times. Not with
    # item sets: then it holds every user's items, as many as the records, and two partitions of
    # 10^8 items ran the default 1 GB driver heap out of memory in local mode (100M-row bench).
    if not sets:
        per_user = per_user.coalesce(default_parallelism(df.sparkSession))
    per_user = per_user.persist()
    # Grouped by row count rather than summed to one row, at no extra cost: the same job then
    # also gives each n's number of users, from which bounding checks its counts (Σ min(n, l)).
    groups = per_user.groupBy("_n", F.col("user_id").isNull().alias("null_user"), *(["_r"] if sets else [])).agg(
        F.count(F.lit(1)).alias("users"), F.sum("rows").alias("rows"), F.sum("out_items").alias("out_items"),
        (F.sum("bad_items") if item_can_be_bad else F.lit(0)).alias("bad_items"),
        # The guards' share sums, exact in integers (SHARE_GRID); the null user's group is left out below.
        F.sum(F.expr(f"(rows - _n) * {SHARE_GRID} div rows")).alias("share_all"),
        # Rows with an in-domain item dropped all the same: an attribute outside its domain, or a
        # value that cannot be summed (with items selected privately, still a dropped record).
        F.sum(F.expr(f"(rows - _n - out_items) * {SHARE_GRID} div rows")).alias("share_attr"),
        (F.sum("bad_values") if value else F.lit(0)).alias("bad_values"),
    ).toPandas()
    stats = {"rows": int(groups["rows"].sum()), "_n": int((groups["_n"] * groups["users"]).sum()),
             "out_items": int(groups["out_items"].sum()), "bad_items": int(groups["bad_items"].sum()),
             "bad_users": int(groups.loc[groups["null_user"].astype(bool), "rows"].sum()),
             "bad_values": int(groups["bad_values"].sum())}
    if strict:
        problem = ("the source has no records", "0 rows") if not stats["rows"] else None
        for column in ID_COLUMNS if stats["bad_users"] or stats["bad_items"] else ():
            problem = problem or _id_problem(df, column, stats["rows"], items)
        if stats["bad_values"] and not problem:
            problem = ("some values are null, NaN, infinite or no number", f"{stats['bad_values']:,} rows")
        if problem:
            per_user.unpersist()
            refuse_strictly(*problem, progress)
    usable = groups[~groups["null_user"].astype(bool)]
    records = df.select(
        user.alias("user_id"),
        item.alias("item_id"),
        *([attr.alias("attr")] if attributes else []),
        *([value_number(F.col("value"), value_text).alias("value")] if value else []),
        *([keys.ROW_KEY] if keys.ROW_KEY in df.columns else []),
    )
    # On clean data the filter keeps every row, and leaving it out spares each later pass the
    # attribute check, and the popularity sample the attribute column (docs/lab/performance.md).
    if stats["_n"] < stats["rows"]:
        records = records.where(_in_item_domain(F.col("item_id"), items, "item_id" if listed else None) & in_attrs)
    if stats["bad_users"]:  # rows whose user id is unusable belong to no user: dropped
        records = records.where(F.col("user_id").isNotNull())
    diagnostics = {
        "rows_read": stats["rows"],
        "rows_outside_item_domain": stats["out_items"],
        # Rows whose item is in the domain but whose attribute value is not.
        "rows_outside_attribute_domain": stats["rows"] - stats["_n"] - stats["out_items"] - stats["bad_values"],
        # Dropped for a null or non-integer id (item ids: counted under rows_outside_item_domain too).
        "rows_invalid_user_id": stats["bad_users"],
        "rows_invalid_item_id": stats["bad_items"],
        **({"rows_invalid_value": stats["bad_values"]} if value else {}),
    }
    outside = {"item_id": stats["out_items"],
               **({"attr": diagnostics["rows_outside_attribute_domain"]} if attributes else {}),
               **({"value": stats["bad_values"]} if value else {})}
    with_rows = (F.col("_n") > 0) & F.col("user_id").isNotNull()
    counts = per_user.where(with_rows).select("user_id", "_n")
    users_by_n = usable[usable["_n"] > 0].groupby("_n")["users"].sum().astype("int64")
    one_per_user = per_user.where(with_rows).select("user_id", "_sampled_item",
                                                    *(["_sampled_value"] if sample_value else [])) if sample else None
    sets_per_user = per_user.where(with_rows).select("user_id", "_items", "_r") if sets else None
    users_by_items = usable[usable["_n"] > 0].groupby("_r")["users"].sum().astype("int64") if sets else None

    def explain() -> str:
        parts = []
        if stats["out_items"]:
            parts.append(describe_mismatch(df, "item_id", ~in_items, f"the domain is {items.description}"))
        if attributes and diagnostics["rows_outside_attribute_domain"]:
            parts.append(describe_mismatch(df, "attr", in_items & ~attrs_match, _domain_values(attributes)))
        return "; ".join(p for p in parts if p)

    return ValidatedRecords(records, diagnostics, counts, per_user, users_by_n, one_per_user, sets_per_user,
                            users_by_items, outside, explain, users_read=int(usable["users"].sum()),
                            dropped_share={"all": int(usable["share_all"].sum()),
                                           "attr": int(usable["share_attr"].sum())})
