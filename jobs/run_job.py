"""spark-submit entry point: ``spark-submit ... jobs/run_job.py CONF.toml [--set k=v ...]``.

Thin on purpose: everything lives in dp_spark (shipped with --py-files).
"""

import sys

from dp_spark.cli import main

if __name__ == "__main__":
    sys.exit(main(["run", *sys.argv[1:]]))
