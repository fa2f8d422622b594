#!/usr/bin/env bash
# A Spark standalone cluster on this machine, for trying spark-submit for real:
# one master and two workers on 127.0.0.1, started with the launcher PySpark ships
# (its pip package has no start-master.sh).
#
#   scripts/cluster.sh start   # master spark://127.0.0.1:7077, UI http://127.0.0.1:8080
#   scripts/cluster.sh stop
#
# Settings: CLUSTER_PORT (7077), CLUSTER_UI_PORT (8080), CLUSTER_WORKERS (2),
# CLUSTER_WORKER_CORES (1), CLUSTER_WORKER_MEMORY (2g), CLUSTER_DIR (logs and pids).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
port=${CLUSTER_PORT:-7077}
ui_port=${CLUSTER_UI_PORT:-8080}
workers=${CLUSTER_WORKERS:-2}
dir=${CLUSTER_DIR:-$here/out/cluster}
python=${PYTHON:-$here/.venv/bin/python}

spark_home=$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))') || {
  echo "dp-spark: error: pyspark not importable with $python (run 'make install')" >&2; exit 2; }
spark_class="$spark_home/bin/spark-class"

launch() {  # name, class, args...
  local name=$1; shift
  SPARK_HOME="$spark_home" PYSPARK_PYTHON="$python" nohup "$spark_class" "$@" >"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
}

wait_for() {  # pattern, log, seconds
  local deadline=$((SECONDS + $3))
  until grep -q "$1" "$2" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then echo "dp-spark: error: timed out waiting for $2 (see the log)" >&2; return 1; fi
    sleep 0.5
  done
}

case "${1:-}" in
  start)
    mkdir -p "$dir"
    if [ -f "$dir/master.pid" ] && kill -0 "$(cat "$dir/master.pid")" 2>/dev/null; then
      echo "already running: spark://127.0.0.1:$port"; exit 0
    fi
    launch master org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$port" --webui-port "$ui_port"
    wait_for "Starting Spark master" "$dir/master.log" 60
    for i in $(seq 1 "$workers"); do
      launch "worker$i" org.apache.spark.deploy.worker.Worker "spark://127.0.0.1:$port" --host 127.0.0.1 \
        --webui-port 0 --cores "${CLUSTER_WORKER_CORES:-1}" --memory "${CLUSTER_WORKER_MEMORY:-2g}" \
        --work-dir "$dir/work$i"
    done
    for i in $(seq 1 "$workers"); do wait_for "Successfully registered with master" "$dir/worker$i.log" 60; done
    echo "spark://127.0.0.1:$port ($workers workers; logs in $dir)"
    ;;
  stop)
    for pid_file in "$dir"/*.pid; do
      [ -f "$pid_file" ] || continue
      kill "$(cat "$pid_file")" 2>/dev/null || true
      rm -f "$pid_file"
    done
    echo "stopped"
    ;;
  *)
    echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
