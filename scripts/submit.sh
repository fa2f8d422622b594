#!/usr/bin/env bash
# Run a dp-spark job through spark-submit.
#
#   scripts/submit.sh CONF.toml [--package] [spark-submit options ...] [-- dp-spark options ...]
#
# e.g. scripts/submit.sh conf/movielens_sra.toml --master spark://host:7077 --package -- --set privacy.epsilon=0.5
# The master defaults to local[*]. dp_spark is zipped and shipped with --py-files. The executors
# run numpy, pandas and pyarrow code: on a cluster, --package ships the driver's environment as
# one file (scripts/package.sh builds it when missing or stale) and makes it the executors' Python;
# without it they use the cluster's Python (spark.pyspark.python, else python3), which the job
# checks before anything is charged (docs/cluster.md).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)

if [ $# -lt 1 ]; then
  echo "usage: $0 CONF.toml [spark-submit options ...] [-- dp-spark options ...]" >&2
  exit 2
fi
conf=$1; shift
[ -f "$conf" ] || { echo "dp-spark: error: config $conf not found" >&2; exit 2; }

submit_args=() job_args=() package=0 master="" deploy_mode=client
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; job_args=("$@"); break ;;
    --package) package=1; shift; continue ;;
    --master) master=${2:-} ;;
    --master=*) master=${1#--master=} ;;
    --deploy-mode) deploy_mode=${2:-} ;;
    --deploy-mode=*) deploy_mode=${1#--deploy-mode=} ;;
    spark.submit.deployMode=*) deploy_mode=${1#*=} ;;  # the value of a --conf
  esac
  submit_args+=("$1"); shift
done
if [ -z "$master" ]; then
  master="local[*]"
  submit_args=(--master "$master" "${submit_args[@]+"${submit_args[@]}"}")
fi
local_master=0
[[ "$master" =~ ^local(\[.*\])?$ ]] && local_master=1

spark_submit=${SPARK_SUBMIT:-}
if [ -z "$spark_submit" ]; then
  if [ -x "$here/.venv/bin/spark-submit" ]; then spark_submit="$here/.venv/bin/spark-submit"
  else spark_submit=$(command -v spark-submit || true); fi
fi
[ -n "$spark_submit" ] || { echo "dp-spark: error: spark-submit not found (run 'make install' or set SPARK_SUBMIT)" >&2; exit 2; }
# The driver runs the Python spark-submit came with. In local mode the executors do too; on a
# cluster that path means nothing on the nodes, so they get the packaged environment (--package)
# or the cluster's own Python.
venv_python="$(dirname "$spark_submit")/python"
if [ -x "$venv_python" ]; then
  if [ "$local_master" = 1 ] && [ "$package" = 0 ]; then
    export PYSPARK_PYTHON="${PYSPARK_PYTHON:-$venv_python}"
  elif [ "$deploy_mode" = client ]; then
    export PYSPARK_DRIVER_PYTHON="${PYSPARK_DRIVER_PYTHON:-$venv_python}"
  fi
fi

if [ "$package" = 1 ]; then
  env_file=${PACKAGE_OUT:-$here/dist/dp-spark-env.pex}
  PYTHON="${PYTHON:-$venv_python}" PACKAGE_OUT="$env_file" "$here/scripts/package.sh" >&2
  # The file lands in each executor's working directory (and the driver's in cluster mode); in
  # local mode the workers start from here, so they are given its path. On its first run on a
  # node PEX unpacks itself into its cache (PEX_ROOT, else a cache directory in the node user's
  # home, else a temporary directory), and later runs there start at once.
  python_of_executors="./$(basename "$env_file")"
  [ "$local_master" = 1 ] && python_of_executors="$env_file"
  submit_args+=(--files "$env_file" --conf "spark.pyspark.python=$python_of_executors")
  if [ "$deploy_mode" != cluster ]; then  # else spark.pyspark.python would name the driver's Python too
    submit_args+=(--conf "spark.pyspark.driver.python=${PYSPARK_DRIVER_PYTHON:-$venv_python}")
  fi
  if [[ "$master" == k8s://* ]] && [[ " ${submit_args[*]} " != *spark.kubernetes.file.upload.path* ]]; then
    echo "dp-spark: note: on Kubernetes, --files needs --conf spark.kubernetes.file.upload.path=s3a://... (or" \
         "any store the pods read) to carry $env_file to the pods" >&2
  fi
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
