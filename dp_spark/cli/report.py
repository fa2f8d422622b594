"""``dp-spark report OUT``: a written release shown to a person, as text or as one HTML page.

It reads the release's privacy.json and tables (noisy outputs only, through pyarrow.fs: no Spark)
and prints the summary a ``Release`` prints; ``--html FILE`` writes a self-contained page (the
guarantee, the ledger, the expected error, each table's first rows and a plot) for a reviewer.
"""

from __future__ import annotations

from dp_spark.cli.exits import EXIT_OK
from dp_spark.errors import ConfigError


def add_parser(commands) -> None:
    report = commands.add_parser("report", help="show a written release: a summary, or an HTML page with plots "
                                 "(--html FILE)")
    report.add_argument("output", help="the release's directory (a job's output, or its run_date=... partition)")
    report.add_argument("--html", metavar="FILE", help="write one self-contained HTML page here (plots need "
                        "matplotlib: pip install 'dp-spark[plot]')")


def read_release(output: str) -> tuple[dict, dict]:
    """(privacy.json, {table: pandas DataFrame}) of the release at ``output``."""
    import pyarrow.parquet as pq
    from pyarrow import fs as pafs

    from dp_spark.io import release_store

    if not release_store.release_exists(None, output):
        raise ConfigError(f"{output} holds no dp-spark release (no privacy.json)")
    report = release_store.read_report(None, output)
    where = release_store.location(output)
    tables = {}
    for name in report.get("outputs", {}):
        table = where.child(name)
        if where.fs.get_file_info(table.path).type == pafs.FileType.Directory:
            tables[name] = pq.read_table(table.path, filesystem=where.fs).to_pandas()
    return report, tables


def catalogue_titles(report: dict) -> dict:
    """The items' titles from the public catalogue the release's domain was read from (privacy.json's
    domain.catalogue, a path as the run's config gave it), or {} when it has none or it cannot be
    read from here: the plots then label items by id alone."""
    from dp_spark.core.domain import read_movielens_catalogue

    catalogue = report.get("domain", {}).get("catalogue")
    if not catalogue:
        return {}
    try:
        return read_movielens_catalogue(catalogue["path"], catalogue.get("encoding") or "iso-8859-1")[1]
    except (OSError, ValueError, ConfigError):
        return {}


def report(args) -> int:
    from pathlib import Path

    from dp_spark import display

    release, tables = read_release(args.output)
    if args.html:
        title = f"dp-spark release {args.output.rstrip('/')}"
        page = display.report_page(release, tables, title, titles=catalogue_titles(release))
        Path(args.html).write_text(page, encoding="utf-8")
        print(f"wrote {args.html}")
        return EXIT_OK
    print("\n".join(display.summary_lines(release, tables)))
    return EXIT_OK
