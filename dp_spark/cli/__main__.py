"""``python -m dp_spark.cli``: the same as the ``dp-spark`` command."""

import sys

from dp_spark.cli.main import main

sys.exit(main())
