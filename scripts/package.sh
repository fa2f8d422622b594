#!/usr/bin/env bash
# The driver's Python environment in one file for a cluster's executors (docs/cluster.md):
# dist/dp-spark-env.pex holds dp-spark and numpy, pandas and pyarrow (and what they need) at the
# versions installed in .venv, and runs on any CPython of the driver's major.minor on the nodes.
# PySpark is left out: the executors take Spark's own.
#
#   scripts/package.sh           # build it, unless it is newer than the code and .venv's packages
#   scripts/package.sh --force   # build it anyway
#
# Settings: PYTHON (the driver's interpreter, .venv/bin/python), PACKAGE_OUT (dist/dp-spark-env.pex).
# scripts/submit.sh --package calls this, then ships the file.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
python=${PYTHON:-$here/.venv/bin/python}
out=${PACKAGE_OUT:-$here/dist/dp-spark-env.pex}
pins="$out.requirements"  # what the file holds, as `pip freeze` said when it was built

[ -x "$python" ] || { echo "dp-spark: error: $python not found (run 'make install', or set PYTHON)" >&2; exit 2; }
force=0
[ "${1:-}" = "--force" ] && force=1

frozen=$(mktemp)
stage=$(mktemp -d)
trap 'rm -rf "$frozen" "$stage" "$out.tmp"' EXIT
"$python" -m pip freeze --exclude-editable --disable-pip-version-check | grep -v '^pex==' >"$frozen"

stale() {  # forced, never built, .venv's packages changed, or code newer than the file
  if [ "$force" = 1 ] || [ ! -f "$out" ] || ! cmp -s "$frozen" "$pins" 2>/dev/null; then return 0; fi
  [ -n "$(find "$here/dp_spark" "$here/pyproject.toml" -newer "$out" \( -name '*.py' -o -name '*.properties' \
          -o -name pyproject.toml \) -print -quit)" ]
}
if ! stale; then
  echo "$out is up to date ($(du -h "$out" | cut -f1))"
  exit 0
fi

# PEX: maintained, pip-based, and one file that needs only a CPython on the node (docs/cluster.md).
"$python" -c 'import pex' 2>/dev/null || "$python" -m pip install --quiet --disable-pip-version-check 'pex>=2.100,<3'

mkdir -p "$(dirname "$out")"
started=$SECONDS
# PEX is given a copy of the project's top-level files and dp_spark/ alone: given the checkout
# itself, its pip copies all of it first, .venv and data/ included (gigabytes, most of a build's time).
mkdir "$stage/project"
find "$here" -maxdepth 1 -type f -exec cp -p {} "$stage/project/" \;
(cd "$here" && tar -cf - --exclude=__pycache__ --exclude='*.pyc' dp_spark) | tar -xf - -C "$stage/project"
# --inherit-path=fallback: the executors' own sys.path (Spark's pyspark.zip and the --py-files on
# PYTHONPATH) comes after the file's packages, so PySpark need not be inside it.
pex_args=(--exclude pyspark --inherit-path=fallback --output-file "$out.tmp")
if "$python" -c 'import sys; sys.exit(sys.prefix == sys.base_prefix)'; then
  # A venv's Python: the dependencies are the files installed there, as they are (no index, no
  # download), and dp-spark's wheel is built once, by the venv's pip (SOURCE_DATE_EPOCH: the same
  # code gives the same wheel, so the same file).
  SOURCE_DATE_EPOCH=315532800 "$python" -m pip wheel --quiet --no-deps --disable-pip-version-check \
    --wheel-dir "$stage/wheel" "$stage/project"
  venv=$("$python" -c 'import sys; print(sys.prefix)')
  "$python" -m pex --project "$stage"/wheel/dp_spark-*.whl --venv-repository "$venv" "${pex_args[@]}"
else  # another interpreter: resolved from the index at the versions `pip freeze` lists
  "$python" -m pex "$stage/project" --constraints "$frozen" --python "$python" "${pex_args[@]}"
fi
mv "$out.tmp" "$out"
cp "$frozen" "$pins" && chmod 644 "$pins"
for_python=$("$python" -c 'import sys; print("CPython %d.%d" % sys.version_info[:2])')
echo "built $out ($(du -h "$out" | cut -f1), $((SECONDS - started)) s) for $for_python"
