#!/usr/bin/env bash
# Run a dp-spark job through spark-submit.
#
#   scripts/submit.sh CONF.toml [spark-submit options ...] [-- dp-spark options ...]
#
# e.g. scripts/submit.sh conf/movielens_sra.toml --master spark://host:7077 -- --set privacy.epsilon=0.5
# The master defaults to local[*]. dp_spark is zipped and shipped with --py-files;
# executors need numpy, pandas and pyarrow installed (as on the driver).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

if [ $# -lt 1 ]; then
  echo "usage: $0 CONF.toml [spark-submit options ...] [-- dp-spark options ...]" >&2
  exit 2
fi
conf=$1; shift
[ -f "$conf" ] || { echo "dp-spark: error: config $conf not found" >&2; exit 2; }

submit_args=() job_args=()
while [ $# -gt 0 ]; do
  if [ "$1" = "--" ]; then shift; job_args=("$@"); break; fi
  submit_args+=("$1"); shift
done
case " ${submit_args[*]-} " in
  *" --master "*|*" --master="*) ;;
  *) submit_args=(--master "local[*]" "${submit_args[@]+"${submit_args[@]}"}") ;;
esac

spark_submit=${SPARK_SUBMIT:-}
if [ -z "$spark_submit" ]; then
  if [ -x "$here/.venv/bin/spark-submit" ]; then spark_submit="$here/.venv/bin/spark-submit"
  else spark_submit=$(command -v spark-submit || true); fi
fi
[ -n "$spark_submit" ] || { echo "dp-spark: error: spark-submit not found (run 'make install' or set SPARK_SUBMIT)" >&2; exit 2; }
# Use the same Python on the driver and the executors as the one spark-submit came with.
if [ -z "${PYSPARK_PYTHON:-}" ] && [ -x "$(dirname "$spark_submit")/python" ]; then
  export PYSPARK_PYTHON="$(dirname "$spark_submit")/python"
fi

package_dir=$(mktemp -d)
trap 'rm -rf "$package_dir"' EXIT
(cd "$here" && python3 -c 'import shutil,sys; shutil.make_archive(sys.argv[1], "zip", ".", "dp_spark")' "$package_dir/dp_spark")

# No --properties-file: it would hide the cluster's own spark-defaults.conf. dp-spark's
# defaults are set in code (dp_spark/io/session.py) when the job builds its session.
command=("$spark_submit" "${submit_args[@]}"
         --py-files "$package_dir/dp_spark.zip" "$here/jobs/run_job.py" "$conf" "${job_args[@]+"${job_args[@]}"}")
"${command[@]}"
