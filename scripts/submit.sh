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

# Spark's log at WARN without the start-up noise (docs/scheduled_runs.md, "Logs for schedulers"):
# the driver JVM starts before dp-spark's code runs, so it is given the file here, unless the
# site configures the log itself. SPARK_SUBMIT_OPTS reaches the JVM spark-submit starts here
# (the driver in client mode); a site's spark.driver.extraJavaOptions comes later and wins.
site_conf=${SPARK_CONF_DIR:-${SPARK_HOME:+$SPARK_HOME/conf}}
if [[ "${SPARK_SUBMIT_OPTS:-}" != *log4j2.configurationFile* ]] \
   && ! ls "${site_conf:-/nonexistent}"/log4j2.* >/dev/null 2>&1; then
  export SPARK_SUBMIT_OPTS="${SPARK_SUBMIT_OPTS:-} -Dlog4j2.configurationFile=$here/dp_spark/io/log4j2.properties"
fi

package_dir=$(mktemp -d)
trap 'rm -rf "$package_dir"' EXIT
(cd "$here" && python3 -c 'import shutil,sys; shutil.make_archive(sys.argv[1], "zip", ".", "dp_spark")' "$package_dir/dp_spark")

# No --properties-file: it would hide the cluster's own spark-defaults.conf. dp-spark's
# defaults are set in code (dp_spark/io/session.py) when the job builds its session.
command=("$spark_submit" "${submit_args[@]}"
         --py-files "$package_dir/dp_spark.zip" "$here/jobs/run_job.py" "$conf" "${job_args[@]+"${job_args[@]}"}")
"${command[@]}"
