"""Catalog tables: checking a ``source.table`` and registering a release as tables (``output_table``).

A release is written as always, by ``release_store``, to ``output`` (or its ``run_date=...``
partition), all or nothing. Each of its tables is then registered in the session's catalog as an
external Parquet table ``{output_table}_{name}`` (``stats.movielens_item_counts``), partitioned by
``run_date`` when the run has one, whose partition for the run date points at the release's
directory for that table: ``output/run_date=D/item_counts``. ``privacy.json`` stays beside it, in
``output/run_date=D/``.

Why this is atomic (docs/scheduled_runs.md, "Catalog tables"): the partition's location never
changes between runs of a date, and the directory behind it is replaced by ``release_store`` in one
rename (local disks, HDFS); a new partition is added only once its files are complete. The catalog
statements are idempotent, so a run killed before or while registering is finished by the next
run of the date (the no-op re-run registers again).

Only Spark SQL and ``spark.catalog`` are used, so this works on classic and Spark Connect sessions.
"""

from __future__ import annotations

import re

from dp_spark.errors import ConfigError, DataError, PreflightError
from dp_spark.io import release_store

OWNER_PROPERTY = "dp_spark.output"  # the output directory whose releases a table shows
# Each table's own location: an empty directory beside the run-date partitions (hidden from
# path readers by its "_"); the data is in the partitions' locations.
TABLE_ROOTS = "_tables"
PARTITION_COLUMN = "run_date"
_IDENTIFIER = r"[A-Za-z_][A-Za-z0-9_]*"
_OUTPUT_TABLE = re.compile(rf"(?:{_IDENTIFIER}\.)?{_IDENTIFIER}")
SETTING = "spark.sql.catalogImplementation"


def check_output_table(value) -> str | None:
    """``output_table`` from a config: ``name`` or ``database.name`` (letters, digits, _), or None."""
    if value is None:
        return None
    if not isinstance(value, str) or not _OUTPUT_TABLE.fullmatch(value):
        raise ConfigError(f"output_table must be a table name such as 'stats.movielens' (database.name, letters, "
                          f"digits and _), got {value!r}")
    return value


def catalog_in_use(spark) -> str:
    """``hive`` or ``in-memory``: the session's catalog (fixed when the session started)."""
    return spark.conf.get(SETTING, "in-memory")


def _metastore(spark) -> str:
    """Where a Hive catalog keeps its tables, as the settings name it (for error messages)."""
    for key in ("spark.hadoop.hive.metastore.uris", "spark.hadoop.javax.jdo.option.ConnectionURL"):
        value = spark.conf.get(key, None)
        if value:
            return f"{key.removeprefix('spark.hadoop.')} = {value}"
    return "hive-site.xml, or an embedded Derby metastore_db in the working directory"


def table_not_found(spark, name: str) -> str:
    """One line: ``name`` is not in the session's catalog, which one that is, and what to change."""
    catalog = catalog_in_use(spark)
    if catalog == "hive":
        return (f"table {name!r} not found in the Hive metastore ({_metastore(spark)}): check the name, or point "
                "the [spark] settings at the metastore that holds it (docs/scheduled_runs.md, Catalog tables)")
    return (f"table {name!r} not found in the session's in-memory catalog ({SETTING} = {catalog}), which holds "
            f"only this session's tables and views; for a table saved by another job (saveAsTable) set "
            f"{SETTING} = \"hive\" in [spark] (docs/scheduled_runs.md, Catalog tables)")


def check_source_table(spark, source) -> None:
    """Refuse, before the charge, a ``source.table`` the session's catalog does not hold."""
    if source.format == "table" and not spark.catalog.tableExists(source.table):
        raise PreflightError(table_not_found(spark, source.table))


def _split(output_table: str) -> tuple[str | None, str]:
    database, _, name = output_table.rpartition(".")
    return database or None, name


def table_name(output_table: str, table: str) -> str:
    """The catalog name of a release's table: ``{output_table}_{table}``, quoted for SQL."""
    database, name = _split(output_table)
    quoted = f"`{name}_{table}`"
    return f"`{database}`.{quoted}" if database else quoted


def _sql_string(value: str) -> str:
    return "'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"


def _properties(spark, table: str) -> dict[str, str]:
    return {row.key: row.value for row in spark.sql(f"SHOW TBLPROPERTIES {table}").collect()}


def _partition_columns(spark, table: str) -> list[str]:
    return [column.name for column in spark.catalog.listColumns(table.replace("`", "")) if column.isPartition]


def _check_owned(spark, table: str, owner: str, partitioned: bool, error=PreflightError) -> None:
    """Refuse to add releases to a table that shows another output, or is partitioned otherwise
    (``error``: PreflightError before the charge, DataError once the release is written)."""
    shown = _properties(spark, table).get(OWNER_PROPERTY)
    if shown != owner:
        what = f"shows the releases in {shown!r}" if shown else "was not created by dp-spark"
        raise error(f"table {table.replace('`', '')} exists and {what}, not those in {owner!r}: refusing to "
                    "register this release there (choose another output_table or output)")
    wanted = [PARTITION_COLUMN] if partitioned else []
    if _partition_columns(spark, table) != wanted:
        raise error(f"table {table.replace('`', '')} is partitioned by {_partition_columns(spark, table)}, "
                    f"this run needs {wanted} (a run date partitions by run_date; give one, or choose another "
                    "output_table)")


def _existing_tables(spark, output_table: str) -> list[str]:
    """The tables named ``{output_table}_*`` that dp-spark created (others may share the prefix)."""
    database, name = _split(output_table)
    found = spark.catalog.listTables(database, pattern=f"{name}_*")
    names = [table_name(output_table, t.name[len(name) + 1:]) for t in found if not t.isTemporary]
    return [t for t in names if OWNER_PROPERTY in _properties(spark, t)]


def preflight(cfg, spark, progress, release_tables=lambda: ()) -> None:
    """Before the charge: the source table exists; the output tables' database exists and their
    tables, if any, show this output with this partitioning. ``release_tables()`` names the
    tables this release will write (asked only with an output_table): a table of such a name
    that dp-spark did not create is refused here, not after the release is written."""
    check_source_table(spark, cfg.source)
    if cfg.output_table is None:
        return
    database, _name = _split(cfg.output_table)
    if database is not None and not spark.catalog.databaseExists(database):
        raise PreflightError(f"database {database!r} of output_table {cfg.output_table!r} does not exist in the "
                             f"session's {catalog_in_use(spark)} catalog: create it (CREATE DATABASE {database}) "
                             f"or check the [spark] catalog settings")
    if catalog_in_use(spark) != "hive":
        progress(f"WARNING: output_table {cfg.output_table!r} goes to the in-memory catalog, which ends with this "
                 f"session; for tables other jobs can read set {SETTING} = \"hive\" in [spark]")
    owner = release_store.location(cfg.output).uri
    planned = [table_name(cfg.output_table, name) for name in release_tables()]
    taken = [t for t in planned if spark.catalog.tableExists(t.replace("`", ""))]
    for table in dict.fromkeys([*_existing_tables(spark, cfg.output_table), *taken]):
        _check_owned(spark, table, owner, cfg.run_date is not None)


def _columns_ddl(schema) -> str:
    return ", ".join(f"`{field.name}` {field.dataType.simpleString()}" for field in schema.fields)


def _create(spark, table: str, schema, root, owner: str, partitioned: bool) -> None:
    """Create ``table`` unless it exists: external (the catalog never deletes its files), at ``root``."""
    root.fs.create_dir(root.path)  # Spark warns about a table location that does not exist
    partition = f", `{PARTITION_COLUMN}` string) USING parquet PARTITIONED BY (`{PARTITION_COLUMN}`)" if partitioned \
        else ") USING parquet"
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} ({_columns_ddl(schema)}{partition} LOCATION {_sql_string(root.uri)}"
              f" TBLPROPERTIES ({_sql_string(OWNER_PROPERTY)} = {_sql_string(owner)})")


def _add_new_columns(spark, table: str, schema) -> None:
    """Columns a newer release has and the table lacks are added; a changed type is refused."""
    existing = {field.name: field.dataType for field in spark.table(table).schema.fields}
    for field in schema.fields:
        if field.name in existing and existing[field.name] != field.dataType:
            raise DataError(f"column {field.name!r} of table {table.replace('`', '')} is "
                            f"{existing[field.name].simpleString()}, this release's is "
                            f"{field.dataType.simpleString()}: choose another output_table")
    new = [field for field in schema.fields if field.name not in existing]
    if new:
        spark.sql(f"ALTER TABLE {table} ADD COLUMNS ({_columns_ddl(type(schema)(new))})")


def register(cfg, spark, release: str, report: dict) -> list[str]:
    """Register the release at ``release`` (complete, with its report) as ``cfg.output_table``'s
    tables; the names registered (none without an output_table). Idempotent."""
    if cfg.output_table is None:
        return []
    output = release_store.location(cfg.output)
    partitioned = cfg.run_date is not None
    registered = []
    for name in report["outputs"]:
        table = table_name(cfg.output_table, name)
        files = release_store.location(release).child(name)
        schema = spark.read.parquet(files.uri).schema
        # Partitioned, the table's own location is an empty directory (its partitions' locations
        # hold the data); unpartitioned, it is the table's directory in the release.
        root = output.child(TABLE_ROOTS).child(name) if partitioned else files
        _create(spark, table, schema, root, output.uri, partitioned)
        _check_owned(spark, table, output.uri, partitioned, DataError)  # one preflight could not know of
        _add_new_columns(spark, table, schema)
        if partitioned:
            # The partition's location is the same for every run of the date: a re-run replaces the
            # directory behind it (one rename), so these statements change nothing after the first.
            spec = f"PARTITION (`{PARTITION_COLUMN}` = {_sql_string(cfg.run_date)})"
            spark.sql(f"ALTER TABLE {table} ADD IF NOT EXISTS {spec} LOCATION {_sql_string(files.uri)}")
            spark.sql(f"ALTER TABLE {table} {spec} SET LOCATION {_sql_string(files.uri)}")
        spark.sql(f"REFRESH TABLE {table}")  # this session's cached file listing is the replaced one
        registered.append(table.replace("`", ""))
    return registered
