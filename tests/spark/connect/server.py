"""A local Spark Connect server from the venv's PySpark, for tests.

As a module:

    from server import SparkConnectServer
    with SparkConnectServer(warehouse="/tmp/wh") as srv:
        print(srv.url)            # sc://127.0.0.1:PORT
        ...                       # spark-pipelines run --remote srv.url

As a CLI (run it with the venv's python, e.g. $HOME/.cache/pipelines-venv/bin/python):

    python server.py start --warehouse DIR [--port N] [--state FILE] [--check]
        starts a detached server, waits until it accepts connections,
        prints its sc:// URL and records its process group in FILE
    python server.py stop [--state FILE]
        stops the server recorded in FILE (SIGTERM to its process group,
        SIGKILL after a grace period)
    python server.py run --warehouse DIR [--check] -- CMD [ARGS...]
        starts a server, runs CMD with SPARK_REMOTE=sc://... set (and the
        venv's bin first on PATH), stops the server, exits with CMD's status

The server runs `$SPARK_HOME/bin/spark-submit --class
org.apache.spark.sql.connect.service.SparkConnectServer` with SPARK_HOME
the installed pyspark package, master local[2], bound to 127.0.0.1, UTC,
spark.sql.shuffle.partitions=2, no UI. Its output goes to
<warehouse>/../spark-connect-server.log unless --log is given.
"""

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
DEFAULT_STATE = os.path.join(tempfile.gettempdir(), "pipelines-spark-connect-server.json")


class ServerError(RuntimeError):
    pass


def find_java():
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return os.path.join(java_home, "bin", "java")
    java = shutil.which("java")
    if not java:
        raise ServerError("Java not found: install a JDK 17 or 21 (apt-get install openjdk-17-jre-headless) or set JAVA_HOME")
    return java


def find_spark_home():
    try:
        import pyspark  # noqa: F401
    except ImportError as e:
        raise ServerError(
            f"pyspark is not importable from {sys.executable} ({e}); use the venv's python "
            "($HOME/.cache/pipelines-venv/bin/python) or pip install 'pyspark[pipelines]==4.3.0' 'pandas<3'"
        )
    home = os.path.dirname(os.path.abspath(pyspark.__file__))
    submit = os.path.join(home, "bin", "spark-submit")
    if not os.path.exists(submit):
        raise ServerError(f"{submit} is missing: the pyspark install at {home} is incomplete")
    jars = os.path.join(home, "jars")
    if not any(n.startswith("spark-connect_") for n in os.listdir(jars)):
        raise ServerError(f"no spark-connect jar in {jars}: this pyspark ({pyspark.__version__}) cannot serve Spark Connect")
    return home


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port, host="127.0.0.1"):
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


def kill_group(pgid, grace=20.0):
    """SIGTERM the process group, SIGKILL it if still alive after `grace` s."""
    try:
        os.killpg(pgid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, 0)
        except ProcessLookupError:
            return
        # reap our own child if it is one, so it does not linger as a zombie
        try:
            os.waitpid(pgid, os.WNOHANG)
        except ChildProcessError:
            pass
        time.sleep(0.2)
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def check_sql(url, timeout=60):
    """A trivial query through a Spark Connect session."""
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.remote(url).getOrCreate()
    try:
        rows = spark.sql("select 1 as one").collect()
        if rows[0]["one"] != 1:
            raise ServerError(f"select 1 returned {rows}")
    finally:
        spark.stop()


class SparkConnectServer:
    def __init__(self, warehouse, port=None, log_path=None, conf=None, startup_timeout=180.0, check=False, detach=False):
        self.warehouse = os.path.abspath(warehouse)
        self.port = port or free_port()
        self.log_path = log_path or os.path.join(os.path.dirname(self.warehouse), "spark-connect-server.log")
        self.conf = dict(conf or {})
        self.startup_timeout = startup_timeout
        self.check = check
        self.detach = detach
        self.proc = None
        self.startup_seconds = None

    @property
    def url(self):
        return f"sc://127.0.0.1:{self.port}"

    def command(self, spark_home):
        conf = {
            "spark.connect.grpc.binding.address": "127.0.0.1",
            "spark.connect.grpc.binding.port": str(self.port),
            "spark.ui.enabled": "false",
            "spark.ui.showConsoleProgress": "false",
            "spark.sql.warehouse.dir": self.warehouse,
            "spark.sql.session.timeZone": "UTC",
            "spark.sql.shuffle.partitions": "2",
            "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
        }
        conf.update(self.conf)
        cmd = [os.path.join(spark_home, "bin", "spark-submit"), "--class", SERVER_CLASS, "--master", "local[2]"]
        for k, v in conf.items():
            cmd += ["--conf", f"{k}={v}"]
        return cmd

    def start(self):
        java = find_java()
        spark_home = find_spark_home()
        if port_open(self.port):
            raise ServerError(f"port {self.port} is already in use")
        os.makedirs(self.warehouse, exist_ok=True)
        os.makedirs(os.path.dirname(self.log_path), exist_ok=True)
        env = dict(os.environ, SPARK_HOME=spark_home, SPARK_LOCAL_IP="127.0.0.1", TZ="UTC", SPARK_CONNECT_MODE="0")
        env.setdefault("JAVA_HOME", os.path.dirname(os.path.dirname(os.path.realpath(java))))
        # the server itself must not be a Spark Connect client
        env.pop("SPARK_REMOTE", None)
        log = open(self.log_path, "ab")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(
            self.command(spark_home),
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group, killed as a whole
            cwd=os.path.dirname(self.warehouse),
        )
        log.close()
        try:
            deadline = t0 + self.startup_timeout
            while not port_open(self.port):
                if self.proc.poll() is not None:
                    raise ServerError(
                        f"Spark Connect server exited with {self.proc.returncode} before listening; "
                        f"last lines of {self.log_path}:\n{tail(self.log_path)}"
                    )
                if time.monotonic() > deadline:
                    raise ServerError(
                        f"Spark Connect server not listening on {self.port} after {self.startup_timeout:.0f} s; "
                        f"last lines of {self.log_path}:\n{tail(self.log_path)}"
                    )
                time.sleep(0.25)
            if self.check:
                check_sql(self.url)
        except BaseException:
            self.stop()
            raise
        self.startup_seconds = time.monotonic() - t0
        return self

    def stop(self, grace=20.0):
        if self.proc is None:
            return
        kill_group(self.proc.pid, grace)
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()
        return False


def tail(path, n=30):
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-n:])
    except OSError:
        return "(no log)"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("start", "run"):
        p = sub.add_parser(name)
        p.add_argument("--warehouse", required=True, help="spark.sql.warehouse.dir")
        p.add_argument("--port", type=int, help="default: a free port")
        p.add_argument("--log", help="server log file")
        p.add_argument("--conf", action="append", default=[], metavar="K=V", help="extra Spark conf")
        p.add_argument("--timeout", type=float, default=180.0, help="startup timeout, seconds")
        p.add_argument("--check", action="store_true", help="also run `select 1` through a Spark Connect session")
        if name == "start":
            p.add_argument("--state", default=DEFAULT_STATE)
        else:
            p.add_argument("command", nargs=argparse.REMAINDER, help="-- CMD [ARGS...]")
    p = sub.add_parser("stop")
    p.add_argument("--state", default=DEFAULT_STATE)
    args = ap.parse_args(argv)

    try:
        if args.cmd == "stop":
            try:
                with open(args.state) as f:
                    state = json.load(f)
            except FileNotFoundError:
                print(f"no server recorded in {args.state}", file=sys.stderr)
                return 1
            kill_group(state["pgid"])
            os.remove(args.state)
            print(f"stopped {state['url']}")
            return 0

        conf = dict(kv.split("=", 1) for kv in args.conf)
        srv = SparkConnectServer(args.warehouse, port=args.port, log_path=args.log, conf=conf, startup_timeout=args.timeout, check=args.check)
        if args.cmd == "start":
            if os.path.exists(args.state):
                raise ServerError(f"{args.state} exists: stop that server first (python server.py stop --state {args.state})")
            srv.start()
            with open(args.state, "w") as f:
                json.dump({"pgid": srv.proc.pid, "url": srv.url, "port": srv.port, "log": srv.log_path, "warehouse": srv.warehouse}, f)
            print(srv.url, flush=True)
            return 0

        cmd = args.command[1:] if args.command[:1] == ["--"] else args.command
        if not cmd:
            ap.error("run needs a command after --")
        with srv:
            print(f"{srv.url} up after {srv.startup_seconds:.1f} s", file=sys.stderr, flush=True)
            env = dict(os.environ, SPARK_REMOTE=srv.url, SPARK_LOCAL_IP="127.0.0.1", TZ="UTC")
            env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
            # stop the server on SIGTERM/SIGINT too
            signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
            return subprocess.call(cmd, env=env)
    except ServerError as e:
        print(f"server.py: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
