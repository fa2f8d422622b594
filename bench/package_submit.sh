#!/usr/bin/env bash
# Numbers for the packaged environment (docs/cluster.md, "Measured"): the file's size, the time to
# build it (fresh PEX cache and warm), and the wall time of one seeded FRAPP submit to a one-machine
# standalone cluster: nodes with the driver's venv and no package, against bare nodes with
# --package, the first time on a node (the file unpacks itself) and again.
#
#   bench/package_submit.sh [OUT_DIR]     # default out/bench-package; prints a table, writes results.json
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=$(mkdir -p "${1:-$here/out/bench-package}" && cd "${1:-$here/out/bench-package}" && pwd)
python=$here/.venv/bin/python
export CLUSTER_PORT=${CLUSTER_PORT:-17277} CLUSTER_UI_PORT=${CLUSTER_UI_PORT:-18280} CLUSTER_DIR=$out/cluster
export PACKAGE_OUT=$out/dp-spark-env.pex

now() { date +%s.%N; }
timed() { local t0; t0=$(now); "$@" >>"$out/log.txt" 2>&1; "$python" -c "print(round($(now) - $t0, 1))"; }

rm -rf "$out/pex-root-build" "$out/pex-root-nodes" "$out"/release-* "$out/log.txt"
build_cold=$(PEX_ROOT=$out/pex-root-build timed "$here/scripts/package.sh" --force)
build_warm=$(PEX_ROOT=$out/pex-root-build timed "$here/scripts/package.sh" --force)
size=$(stat -c %s "$PACKAGE_OUT")

submit() {  # name, extra spark-submit args...
  local name=$1; shift
  timed "$here/scripts/submit.sh" conf/adult_frapp.toml --master "spark://127.0.0.1:$CLUSTER_PORT" "$@" \
    -- --set seed=5 --set "output=$out/release-$name"
}

cd "$here"
scripts/cluster.sh start >>"$out/log.txt"
venv_nodes=$(submit venv-nodes)
scripts/cluster.sh stop >>"$out/log.txt"

base_python=$("$python" -c 'import sys; print(sys._base_executable)')  # the interpreter .venv was made from
[ -x "$out/bare/bin/python" ] || "$base_python" -m venv --without-pip "$out/bare"
# The nodes unpack the file under their own PEX_ROOT, empty at first: the first submit pays for it.
PEX_ROOT=$out/pex-root-nodes CLUSTER_PYTHON=$out/bare/bin/python scripts/cluster.sh start >>"$out/log.txt"
bare_refused=$(submit bare-refused || true)
bare_first=$(submit bare-package-first --package)
bare_again=$(submit bare-package-again --package)
scripts/cluster.sh stop >>"$out/log.txt"

"$python" - "$out" "$size" "$build_cold" "$build_warm" "$venv_nodes" "$bare_refused" "$bare_first" "$bare_again" <<'PY'
import json, sys
out, size, *times = sys.argv[1:]
names = ["build_fresh_cache_s", "build_warm_cache_s", "submit_venv_nodes_no_package_s", "submit_bare_nodes_refused_s",
         "submit_bare_nodes_package_first_s", "submit_bare_nodes_package_again_s"]
result = {"package_bytes": int(size), **{n: float(t) for n, t in zip(names, times)}}
json.dump(result, open(f"{out}/results.json", "w"), indent=2)
print(f"package: {int(size) / 2**20:.1f} MiB")
for name in names:
    print(f"  {name:<36} {result[name]:>7.1f}")
PY
