#!/usr/bin/env bash
# A Spark standalone cluster on this machine, for trying spark-submit for real:
# one master and two workers on 127.0.0.1, started with the launcher PySpark ships
# (its pip package has no start-master.sh).
#
#   scripts/cluster.sh start   # master spark://127.0.0.1:7077, UI http://127.0.0.1:8080
#   scripts/cluster.sh stop
#
# Settings: CLUSTER_PORT (7077), CLUSTER_UI_PORT (8080), CLUSTER_WORKERS (2),
# CLUSTER_WORKER_CORES (1), CLUSTER_WORKER_MEMORY (2g), CLUSTER_DIR (logs and pids),
# CLUSTER_PYTHON: the nodes' own Python, first on the workers' PATH as python3 (default .venv's;
# a bare one plays a cluster whose nodes lack numpy, pandas and pyarrow).
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
port=${CLUSTER_PORT:-7077}
ui_port=${CLUSTER_UI_PORT:-8080}
workers=${CLUSTER_WORKERS:-2}
dir=${CLUSTER_DIR:-$here/out/cluster}
python=${PYTHON:-$here/.venv/bin/python}
node_python=${CLUSTER_PYTHON:-$python}

spark_home=$("$python" -c 'import os, pyspark; print(os.path.dirname(pyspark.__file__))') || {
  echo "dp-spark: error: pyspark not importable with $python (run 'make install')" >&2; exit 2; }
spark_class="$spark_home/bin/spark-class"

started=()  # names of the processes this start launched, stopped again if the start fails

launch() {  # name, class, args...
  local name=$1; shift
  PATH="$dir/node-bin:$PATH" SPARK_HOME="$spark_home" PYSPARK_PYTHON="$node_python" \
    nohup "$spark_class" "$@" >"$dir/$name.log" 2>&1 &
  echo $! >"$dir/$name.pid"
  started+=("$name")
}

stop() {  # pid files...: SIGTERM each, then wait (up to 20 s) until they are gone
  local pid_file pids=() pid deadline=$((SECONDS + 20))
  for pid_file in "$@"; do
    [ -f "$pid_file" ] || continue
    pids+=("$(cat "$pid_file")")
    kill "${pids[-1]}" 2>/dev/null || true
    rm -f "$pid_file"
  done
  for pid in "${pids[@]}"; do
    while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt $deadline ]; do sleep 0.2; done
  done
}

fail_start() {  # message: stop what this start launched, so nothing is left half up
  local name files=()
  for name in "${started[@]}"; do files+=("$dir/$name.pid"); done
  stop "${files[@]}"
  echo "dp-spark: error: $1; stopped the ${#started[@]} process(es) this start had launched (logs in $dir)" >&2
  exit 1
}

wait_for() {  # pattern, name, seconds: until the process's log has the pattern; fails if it exits
  local log="$dir/$2.log" deadline=$((SECONDS + $3))
  until grep -q "$1" "$log" 2>/dev/null; do
    kill -0 "$(cat "$dir/$2.pid")" 2>/dev/null || fail_start "the $2 exited before it was up (see $log)"
    [ $SECONDS -lt $deadline ] || fail_start "timed out waiting for the $2 (see $log)"
    sleep 0.5
  done
}

port_free() {  # port: nothing listens on 127.0.0.1:port (bound as the JVM binds, reusing TIME_WAIT)
  "$python" - "$1" <<'PY'
import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
try:
    s.bind(("127.0.0.1", int(sys.argv[1])))
except OSError:
    sys.exit(1)
PY
}

case "${1:-}" in
  start)
    mkdir -p "$dir"
    if [ -f "$dir/master.pid" ] && kill -0 "$(cat "$dir/master.pid")" 2>/dev/null; then
      echo "already running: spark://127.0.0.1:$port"; exit 0
    fi
    # Spark would move to the next free port and the workers would look for the master on this one.
    port_free "$port" || {
      echo "dp-spark: error: port $port on 127.0.0.1 is in use (another Spark master?); stop it, or choose" \
           "another port with CLUSTER_PORT" >&2; exit 1; }
    # The nodes' python3 (and python, python3.X): what executors run when the job names no Python.
    mkdir -p "$dir/node-bin"
    minor=$("$node_python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    for name in python python3 "python$minor"; do  # scripts, not links: a venv is found from the path run
      printf '#!/bin/sh\nexec "%s" "$@"\n' "$node_python" >"$dir/node-bin/$name"
      chmod +x "$dir/node-bin/$name"
    done
    launch master org.apache.spark.deploy.master.Master --host 127.0.0.1 --port "$port" --webui-port "$ui_port"
    wait_for "Starting Spark master" master 60
    grep -Eq "Starting Spark master at spark://127\.0\.0\.1:$port([^0-9]|\$)" "$dir/master.log" ||
      fail_start "the master did not get port $port (taken meanwhile?): $(grep -o 'spark://[^ ]*' "$dir/master.log" | head -1)"
    for i in $(seq 1 "$workers"); do
      launch "worker$i" org.apache.spark.deploy.worker.Worker "spark://127.0.0.1:$port" --host 127.0.0.1 \
        --webui-port 0 --cores "${CLUSTER_WORKER_CORES:-1}" --memory "${CLUSTER_WORKER_MEMORY:-2g}" \
        --work-dir "$dir/work$i"
    done
    for i in $(seq 1 "$workers"); do wait_for "Successfully registered with master" "worker$i" 60; done
    echo "spark://127.0.0.1:$port ($workers workers; logs in $dir)"
    ;;
  stop)
    stop "$dir"/*.pid
    echo "stopped"
    ;;
  *)
    echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
