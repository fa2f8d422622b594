#!/usr/bin/env bash
# The journeys of a new user, walked from a fresh clone of this repository's HEAD, as the user
# would: the README's `make demo`; a nightly CSV read without its encoding and a table whose user
# ids are text; the demo's job on a Spark Connect server; the means release's HTML report in
# headless Chromium (a screenshot); and release.plot() in a notebook run by a real Jupyter kernel
# (nbclient). Each prints what happened and PASS or FAIL; the script exits 1 if any failed.
#
#   scripts/journeys.sh [WORKDIR]      # default: a new temporary directory
#
# Needs what the README needs, Debian's chromium for the screenshot (skipped without it), and PyPI
# for the notebook journey, which installs nbclient and ipykernel into the clone's .venv only
# (they are not dp-spark's dependencies). ../shared beside this repository holds the MovieLens
# files the means journey reads. Takes about 4 minutes on 2 cores. NOT a test: make test runs
# the pieces (tests/test_text_user_ids.py, test_noise_only.py, test_cli_connect.py,
# test_release_display.py, test_notebook.py).
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
work=${1:-$(mktemp -d)}
mkdir -p "$work"
work=$(cd "$work" && pwd)
clone=$work/dp-spark
failed=0

say() { printf '\n== %s\n' "$*"; }
verdict() {  # verdict NAME CONDITION-EXIT-STATUS DETAIL
  if [ "$2" = 0 ]; then echo "journey $1: PASS ($3)"; else echo "journey $1: FAIL ($3)"; failed=1; fi
}

rm -rf "$clone"
git clone -q "$repo" "$clone" || exit 2
[ -e "$work/shared" ] || ln -s "$repo/../shared" "$work/shared"
cd "$clone" || exit 2
dp() { .venv/bin/dp-spark "$@"; }

say "0. make demo (install, a 1M-row table, SRA at epsilon 1)"
started=$SECONDS
make demo >"$work/demo.log" 2>&1
status=$?
grep -A12 "^Top-10" "$work/demo.log" | head -13
verdict "make demo" "$status" "exit $status in $((SECONDS - started)) s; log $work/demo.log"
[ "$status" = 0 ] || { echo "the other journeys need the install"; exit 1; }

say "1a. a nightly CSV in Latin-1, read without its encoding"
.venv/bin/python - "$work" <<'EOF'
import sys, uuid
import numpy as np
work = sys.argv[1]
rng = np.random.default_rng(1)
items = [f"café-{i}" for i in range(1, 21)]
with open(f"{work}/items.txt", "w", encoding="utf-8") as out:  # the domain, as the catalogue team writes it
    out.write("".join(f"{item}\n" for item in items))
with open(f"{work}/nightly.csv", "w", encoding="iso-8859-1") as out:  # the export, in Latin-1
    out.write("user_id,item_id\n")
    for user in range(3000):
        for item in rng.choice(items, 5, replace=False):
            out.write(f"u{user},{item}\n")
with open(f"{work}/uuids.csv", "w", encoding="utf-8") as out:  # a warehouse's account keys
    out.write("account,item_id\n")
    keys = [str(uuid.UUID(int=int(rng.integers(0, 2**63)))) for _ in range(3000)]
    for key in keys:
        for item in rng.choice(items, 5, replace=False):
            out.write(f"{key},{item}\n")
EOF
cat >"$work/nightly.toml" <<EOF
output = "$work/out/nightly"
[source]
format = "csv"
path = "$work/nightly.csv"
[domain]
items = { file = "$work/items.txt" }
[privacy]
epsilon = 1.0
[algorithm]
name = "sra"
l = 5
EOF
dp run "$work/nightly.toml" >"$work/nightly.out" 2>"$work/nightly.err"
status=$?
tail -2 "$work/nightly.err"
verdict "misconfigured CSV" "$([ "$status" = 5 ] && [ ! -e "$work/out/nightly/privacy.json" ] && echo 0 || echo 1)" \
  "exit $status (5: refused as noise only), nothing written"
dp check "$work/nightly.toml" >"$work/check.out" 2>&1
grep -i -m3 "encoding\|U+FFFD\|outside" "$work/check.out"
verdict "dp-spark check names the encoding" "$(grep -qi "encoding" "$work/check.out" && echo 0 || echo 1)" \
  "$work/check.out"
dp run "$work/nightly.toml" --set source.encoding=iso-8859-1 >"$work/fixed.out" 2>&1
status=$?
verdict "the same night with its encoding" "$status" "exit $status; $(grep -c "café" "$work/fixed.out") top-10 lines"

say "1b. user ids that are text (UUIDs)"
sed -e "s|nightly.csv|uuids.csv|; s|out/nightly|out/uuids|" "$work/nightly.toml" >"$work/uuids.toml"
printf '[source.columns]\nuser_id = "account"\n' >>"$work/uuids.toml"
dp run "$work/uuids.toml" >"$work/uuids.out" 2>&1
status=$?
grep -A3 "^Top-10" "$work/uuids.out"
verdict "text user ids" "$status" "exit $status; privacy unit: $(grep -o '"privacy_unit": "[^:]*' \
  "$work/out/uuids/privacy.json" 2>/dev/null | cut -d'"' -f4)"

say "2. the demo's job on a Spark Connect server, after make demo"
home=$(.venv/bin/python -c 'import pathlib, pyspark; print(pathlib.Path(pyspark.__file__).parent)')
port=$(.venv/bin/python -c 'import socket; s = socket.socket(); s.bind(("", 0)); print(s.getsockname()[1])')
export SPARK_HOME=$home SPARK_LOG_DIR=$work/connect-logs SPARK_PID_DIR=$work SPARK_IDENT_STRING=journey$port
PYSPARK_PYTHON=$clone/.venv/bin/python "$home/sbin/start-connect-server.sh" --master 'local[2]' \
  --conf spark.connect.grpc.binding.port="$port" --conf spark.ui.enabled=false >/dev/null 2>&1
for _ in $(seq 90); do (echo >"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 2; done
SPARK_REMOTE=sc://localhost:$port dp run conf/demo.toml --set output="$work/out/connect" >"$work/connect.out" 2>&1
status=$?
"$home/sbin/stop-connect-server.sh" >/dev/null 2>&1
unset SPARK_HOME SPARK_LOG_DIR SPARK_PID_DIR SPARK_IDENT_STRING
grep -m2 "grpc\|ModuleNotFound" "$work/connect.out"
verdict "Spark Connect" "$status" "exit $status; $(grep -m1 "epsilon .* spent of" "$work/connect.out" | xargs)"

say "3. the means release and its HTML report"
dp run conf/movielens_means.toml --set output="$work/out/means" >"$work/means.out" 2>&1
status=$?
sed -n '/items have a mean/,$p' "$work/means.out" | head -20
dp report "$work/out/means" --html "$work/means.html" >/dev/null 2>&1
status=$((status + $?))
browser=$(command -v chromium || command -v chromium-browser)
if [ -n "$browser" ]; then
  "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars --window-size=1000,3000 \
    --screenshot="$work/means.png" "file://$work/means.html" >/dev/null 2>&1
  status=$((status + $?))
  verdict "means report" "$status" "$work/means.html, screenshot $work/means.png"
else
  verdict "means report" "$status" "$work/means.html; no chromium: no screenshot"
fi

say "4. release.plot() in a notebook (a real Jupyter kernel, nbclient)"
.venv/bin/python -m pip install --quiet --disable-pip-version-check nbclient ipykernel >"$work/pip.log" 2>&1
.venv/bin/python - "$work" <<'EOF'
import sys
import nbformat
from nbclient import NotebookClient

work = sys.argv[1]
cells = [
    "import numpy as np, pandas as pd\nfrom pyspark.sql import SparkSession\nimport dp_spark\n"
    "spark = SparkSession.builder.config('spark.ui.showConsoleProgress', 'false').getOrCreate()\n"
    "spark.sparkContext.setLogLevel('ERROR')",
    "rng = np.random.default_rng(0)\n"
    "ratings = spark.createDataFrame(pd.DataFrame({'person': rng.integers(0, 2_000, 10_000),\n"
    "    'movie': rng.integers(1, 21, 10_000), 'stars': rng.integers(1, 6, 10_000).astype(float)}))\n"
    "release = dp_spark.means(ratings, privacy_unit='person', item='movie', items=range(1, 21), value='stars',\n"
    "                         low=1, high=5, l=5, epsilon=1.0)\nrelease",
    "release.plot()",
]
book = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
NotebookClient(book, timeout=600, kernel_name="python3").execute()
nbformat.write(book, f"{work}/journey.ipynb")
release_cell, plot_cell = book.cells[1], book.cells[2]
streams = [o.get("text", "") for o in release_cell.outputs if o.output_type == "stream"]
print("release cell:", [o.output_type for o in release_cell.outputs], "| its stream lines:",
      sum(s.count("\n") for s in streams))
kinds = [sorted(o.get("data", {})) for o in plot_cell.outputs]
print("plot cell outputs:", kinds)
ok = any("image/png" in k for k in kinds) and not any("[dp-spark" in s for s in streams)
sys.exit(0 if ok else 1)
EOF
status=$?
verdict "release.plot() in a notebook" "$status" "$work/journey.ipynb"

say "done: $work"
exit $failed
