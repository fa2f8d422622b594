"""A class-data-sharing archive for the suite's JVMs: speed, never results.

A Spark JVM spends most of its first seconds loading and verifying some ten thousand classes
from Spark's jars. Java 17 can write the classes a run loaded to an archive when it exits
(-XX:ArchiveClassesAtExit), and a later JVM with the same class path maps them from it instead
(-XX:SharedArchiveFile). The suite starts dozens of JVMs in child processes (the CLI, spark-submit,
a cluster's daemons, the Connect server); with the archive, a child that starts a session and
runs its first small job took 5.5 s instead of 10 to 12, and three files of such children
(crash safety, signals, scheduler logs) 159 s instead of 208.

The archive is built once, by one short dp-spark job in a child process, into pytest's cache
(its name holds what it depends on: the Java build, pyspark, the JVM flags, this file), and
reused by later runs there. A JVM whose class path differs (the archive does not fit) starts as
it would without it; its notice about that is turned off, as output of the suite's own making.

The build runs in the background while the suite starts (:func:`building`): of its 56 s on an
idle 2-core machine, 38 s were the JVM writing the archive at exit, one core's work, which had
kept the workers from starting. A JVM started before the archive exists starts without it,
silently (the same flags turn that notice off); the file appears whole, by a rename, so a JVM
never maps half of one.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

# Set by the process that built or found the archive, for the processes it starts (xdist's workers).
ENV = "DP_SPARK_TEST_JVM_ARCHIVE"
OFF = "off"  # DP_SPARK_TEST_JVM_ARCHIVE=off: the JVMs start without the archive (to compare)

# The warm-up: one SRA job with an attribute over a small Parquet table, read, bounded, noised and
# written; its classes are the bulk of what any of the suite's JVMs loads.
WARM_UP = """
import sys, tempfile
from pathlib import Path
from dp_spark.cli import main
from dp_spark.io import datasets
work = Path(tempfile.mkdtemp(prefix="jvm-archive-"))
source = work / "ratings.parquet"
datasets.generate_netflix(3000, str(source), seed=1, progress=lambda *_: None)
config = work / "job.toml"
config.write_text(f'output = "{work / "out"}"\\nseed = 1\\n[source]\\nformat = "netflix-synthetic"\\n'
                  f'path = "{source}"\\n[domain]\\nitems = {{ range = [1, 17770] }}\\n'
                  'attributes = ["Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun"]\\n[privacy]\\nepsilon = 1.0\\n'
                  '[algorithm]\\nname = "sra"\\nl = 3\\n[guards]\\nrefuse_noise_only = false\\n')
sys.exit(main(["run", str(config)]))
"""


def _java_build() -> str | None:
    java = Path(os.environ["JAVA_HOME"]) / "bin" / "java" if os.environ.get("JAVA_HOME") else shutil.which("java")
    if java is None:
        return None
    done = subprocess.run([str(java), "-version"], capture_output=True, text=True, timeout=60)
    return done.stderr if done.returncode == 0 else None


def archive_flags(path: Path) -> str:
    """The JVM options that use the archive at ``path`` (no shell wildcards: the launchers split them)."""
    return f"-XX:SharedArchiveFile={path} -Xlog:cds=off,cds+dynamic=off"


def archive_path(cache_dir: Path, jvm_flags: str) -> Path | None:
    """Where the archive for JVMs started with ``jvm_flags`` is kept in ``cache_dir``; None when
    there is no Java."""
    import pyspark

    java = _java_build()
    if java is None:
        return None
    key = hashlib.sha256("\n".join([java, pyspark.__version__, pyspark.__file__, jvm_flags,
                                    Path(__file__).read_text()]).encode()).hexdigest()[:16]
    return cache_dir / f"spark-{key}.jsa"


def building(cache_dir: Path, jvm_flags: str) -> tuple[Path | None, threading.Thread | None]:
    """The archive's path at once, and the thread building it there when it is not there yet
    (join it before the process ends); (None, None) when there is no Java."""
    path = archive_path(cache_dir, jvm_flags)
    if path is None or path.exists():
        return path, None
    partial = path.with_name(f"{path.stem}.{os.getpid()}.partial")
    # The child's environment is copied here, before the thread starts: the suite goes on to set
    # its own variables, and a copy taken while another thread writes os.environ can fail.
    env = {**os.environ, "SPARK_SUBMIT_OPTS": f"{jvm_flags} -XX:ArchiveClassesAtExit={partial}",
           "PYSPARK_PYTHON": sys.executable}
    thread = threading.Thread(target=_build, args=(path, partial, env), name="jvm-archive", daemon=True)
    thread.start()
    return path, thread


def _build(path: Path, partial: Path, env: dict[str, str]) -> None:
    """Write the archive to ``partial`` from one warm-up job run in ``env``, then move it to ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    done = subprocess.run([sys.executable, "-c", WARM_UP], capture_output=True, text=True, timeout=600, env=env)
    if done.returncode != 0 or not partial.exists():
        partial.unlink(missing_ok=True)
        sys.stderr.write(f"tests/jvm_archive.py: no class archive, the JVMs start without it:\n{done.stderr[-2000:]}\n")
        return
    os.replace(partial, path)  # whole or absent: a run that stops mid-build leaves only a .partial
