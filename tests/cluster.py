"""A throw-away Spark standalone cluster for tests: one master and N workers on 127.0.0.1.

Usage::

    from cluster import standalone_cluster

    with standalone_cluster(workers=2, cores_per_worker=1, memory="1g") as url:
        ...  # url == "spark://127.0.0.1:<port>"; run a driver against it (in a subprocess: see cluster_run.py)

How it is started: the pip-installed pyspark ships the Spark jars and ``bin/spark-class``
(but no ``sbin/start-master.sh``), so the master
(``org.apache.spark.deploy.master.Master``) and every worker
(``org.apache.spark.deploy.worker.Worker``) are started in the foreground with
``spark-class`` (which execs the JVM with the options Java 17 needs), with

* RPC and web UI ports 0 (the kernel picks free ports; the master's actual ones are read
  from its log), the master's REST submission server off (it would take the fixed port 6066);
* ``SPARK_CONF_DIR`` (empty), logs, worker and local (shuffle) dirs under a temporary
  directory, nothing under ``SPARK_HOME``;
* ``PYSPARK_PYTHON`` = this venv's Python and the repository on ``PYTHONPATH``, inherited by
  the executors the workers launch (executors may import obda);
* small daemon heaps (``SPARK_DAEMON_MEMORY``); executors get what the application asks for.

All of them (and the executor JVMs the workers fork) are in one process group, whose
leader is the master.  Readiness: the master's JSON endpoint (``http://127.0.0.1:<ui>/json/``)
lists ``workers`` ALIVE workers.  On exit (also on an exception in the ``with`` body) the
whole group gets SIGTERM, then SIGKILL after a grace period; every daemon also has
``PR_SET_PDEATHSIG`` = SIGTERM, so even a test process that is killed leaves no JVM behind.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

import pyspark

REPO = Path(__file__).resolve().parents[1]
SPARK_HOME = Path(pyspark.__file__).resolve().parent
SPARK_CLASS = SPARK_HOME / "bin" / "spark-class"
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

_PR_SET_PDEATHSIG = 1


class ClusterError(RuntimeError):
    """The cluster did not come up; the message ends with the tail of the daemons' logs."""


def _python() -> str:
    # the venv's interpreter, not its realpath (that is the base Python, without the venv's packages)
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def _daemon_env(root: Path, python: str, extra_pythonpath: list[str]) -> dict[str, str]:
    env = dict(os.environ)
    for k in ("SPARK_MASTER_HOST", "SPARK_MASTER_PORT", "SPARK_MASTER_WEBUI_PORT", "SPARK_WORKER_PORT",
              "SPARK_WORKER_WEBUI_PORT", "SPARK_WORKER_INSTANCES", "SPARK_WORKER_CORES", "SPARK_WORKER_MEMORY",
              "SPARK_WORKER_OPTS", "SPARK_MASTER_OPTS", "SPARK_DAEMON_JAVA_OPTS", "SPARK_CONF_DIR",
              "PYSPARK_DRIVER_PYTHON", "SPARK_LOCAL_HOSTNAME"):
        env.pop(k, None)
    pythonpath = [*extra_pythonpath, *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    env.update(
        SPARK_HOME=str(SPARK_HOME),
        SPARK_CONF_DIR=str(root / "conf"),
        SPARK_LOG_DIR=str(root / "logs"),
        SPARK_PID_DIR=str(root / "run"),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_DAEMON_MEMORY="256m",
        SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
        SPARK_WORKER_OPTS="-Dspark.worker.cleanup.enabled=false",
        SPARK_NO_DAEMONIZE="1",
        PYSPARK_PYTHON=python,
        PYTHONPATH=os.pathsep.join(dict.fromkeys(pythonpath)),
        TZ="UTC",
    )
    return env


def _die_with_parent() -> None:
    """Linux: SIGTERM to this (child) process when its parent dies, even by SIGKILL."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)
    except Exception:  # not Linux: the callers' clean-up still runs
        pass


def _preexec(group: int | None):
    """In the child: join the cluster's process group (or lead a new one) and die with the parent."""

    def run():
        os.setpgid(0, 0 if group is None else group)  # same session: workers may join the master's group
        _die_with_parent()

    return run


def own_group_dying_with_parent() -> None:
    """``preexec_fn`` for a driver subprocess: its own process group (``os.killpg`` on a timeout)
    and SIGTERM when the test process dies (its JVM exits with it: the gateway's stdin closes)."""
    os.setpgid(0, 0)
    _die_with_parent()


def _tail(path: Path, lines: int = 25) -> str:
    try:
        text = path.read_text(errors="replace").splitlines()
    except OSError:
        return f"({path}: no log)"
    return f"--- {path.name} ---\n" + "\n".join(text[-lines:])


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _stop_group(pgid: int, procs: list[subprocess.Popen], grace: float = 20.0) -> None:
    """SIGTERM to the group (master, workers, executors), SIGKILL to what is left after ``grace``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        for p in procs:
            p.poll()
        if not _group_alive(pgid):
            break
        time.sleep(0.2)
    else:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(pgid, signal.SIGKILL)
    for p in procs:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(timeout=10)


def _master_status(ui_port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{ui_port}/json/", timeout=5) as r:
        return json.load(r)


@contextlib.contextmanager
def standalone_cluster(
    workers: int = 2,
    cores_per_worker: int = 1,
    memory: str = "1g",
    *,
    root: str | os.PathLike | None = None,
    python: str | None = None,
    pythonpath: list[str] | None = None,
    timeout: float = 120.0,
):
    """Start a master and ``workers`` workers on 127.0.0.1; yield the master URL; stop them all.

    ``root``: directory for conf, logs, worker and local dirs (default: a fresh temporary
    directory, removed afterwards); ``python``: the executors' Python (default: the repo's
    venv); ``pythonpath``: prepended to PYTHONPATH of the daemons and executors (default: the
    repository root).  Raises :class:`ClusterError` (with log tails) if the workers do not
    register within ``timeout`` seconds.
    """
    tmp = None
    if root is None:
        tmp = tempfile.TemporaryDirectory(prefix="obda-spark-cluster-")
        root = tmp.name
    root = Path(root).resolve()
    for d in ("conf", "logs", "run"):
        (root / d).mkdir(parents=True, exist_ok=True)
    env = _daemon_env(root, python or _python(), pythonpath if pythonpath is not None else [str(REPO)])
    logs = root / "logs"
    procs: list[subprocess.Popen] = []
    log_files: list[Path] = []
    pgid: int | None = None

    def spawn(args: list[str], log: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
        log_files.append(log)
        with open(log, "ab") as out:
            p = subprocess.Popen(
                [str(SPARK_CLASS), *args], stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={**env, **(extra_env or {})}, cwd=str(root), preexec_fn=_preexec(pgid),
            )
        procs.append(p)
        return p

    def failed(why: str) -> ClusterError:
        return ClusterError(why + "\n" + "\n".join(_tail(f) for f in log_files))

    def cleanup():
        if pgid is not None:
            _stop_group(pgid, procs)

    atexit.register(cleanup)
    try:
        master = spawn([MASTER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"], logs / "master.log")
        pgid = master.pid  # setpgid(0, 0) in the child: the master leads the cluster's process group
        deadline = time.monotonic() + timeout
        url = ui_port = None
        while url is None or ui_port is None:
            if master.poll() is not None:
                raise failed(f"the Spark master exited with code {master.returncode}")
            if time.monotonic() > deadline:
                raise failed(f"the Spark master did not start within {timeout:.0f}s")
            text = (logs / "master.log").read_text(errors="replace")
            m = re.search(r"Starting Spark master at (spark://[\w.\-]+:\d+)", text)
            u = re.search(r"Successfully started service 'MasterUI' on port (\d+)", text)
            url, ui_port = (m.group(1) if m else None), (int(u.group(1)) if u else None)
            time.sleep(0.2)
        for i in range(workers):
            wdir, ldir = root / f"worker-{i}", root / f"local-{i}"
            wdir.mkdir(exist_ok=True)
            ldir.mkdir(exist_ok=True)
            spawn(
                [WORKER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0",
                 "--cores", str(cores_per_worker), "--memory", str(memory), "--work-dir", str(wdir), url],
                logs / f"worker-{i}.log",
                {"SPARK_WORKER_DIR": str(wdir), "SPARK_LOCAL_DIRS": str(ldir)},
            )
        status: dict = {}
        while True:
            dead = [f"{log.stem} (exit code {p.returncode})" for p, log in zip(procs, log_files) if p.poll() is not None]
            if dead:
                raise failed(f"Spark daemon(s) exited early: {', '.join(dead)}")
            with contextlib.suppress(OSError, ValueError):
                status = _master_status(ui_port)
                if sum(w.get("state") == "ALIVE" for w in status.get("workers", [])) >= workers:
                    break
            if time.monotonic() > deadline:
                raise failed(f"{workers} workers did not register within {timeout:.0f}s (master: {status})")
            time.sleep(0.3)
        yield url
    finally:
        cleanup()
        atexit.unregister(cleanup)
        if tmp is not None:
            with contextlib.suppress(OSError):
                tmp.cleanup()


if __name__ == "__main__":  # manual check: start, print the URL, stop on Enter / Ctrl-C
    with standalone_cluster() as master_url:
        print(master_url, flush=True)
        with contextlib.suppress(KeyboardInterrupt, EOFError):
            input("running; Enter stops it ")
