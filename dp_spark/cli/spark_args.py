"""Where a command's Spark runs: ``--master URL`` or ``--remote sc://HOST:PORT`` (Spark Connect)."""

from __future__ import annotations

from dp_spark.errors import ConfigError
from dp_spark.io.session import CONNECT_SCHEME

REMOTE_HELP = ("Spark Connect server, e.g. sc://host:15002 (default: the SPARK_REMOTE environment variable or "
               "[spark] spark.remote; docs/scheduled_runs.md, Spark Connect)")


def add_arguments(parser, master_help: str = "Spark master URL (default: spark-submit's, else local[*])") -> None:
    parser.add_argument("--master", help=master_help)
    parser.add_argument("--remote", metavar="URL", help=REMOTE_HELP)


def master_of(args) -> str | None:
    """What to hand get_session: the Connect URL, the master, or None for the default."""
    remote = getattr(args, "remote", None)
    if remote is None:
        return args.master
    if args.master is not None:
        raise ConfigError(f"--master {args.master} and --remote {remote} both given: keep one")
    if not remote.startswith(CONNECT_SCHEME):
        raise ConfigError(f"--remote takes a Spark Connect URL sc://host:port, got {remote!r}")
    return remote
