"""Helpers shared by make_expected.py and trace.py: assembling a runnable
copy of a reference project, creating the SQL project's source tables,
running `spark-pipelines`, reading tables back.

A runnable copy (assemble) differs from the committed project in:
- data: a copy of ../data whose files get modification times in name
  order (Spark's file source with maxFilesPerTrigger takes the oldest
  first; git keeps no mtimes);
- spark-pipeline.yml: `storage` points into the copy, `database` is set
  when asked (each timed run gets a fresh database on one server);
- setup/*.sql: __DATA__ replaced by the data copy's absolute path;
- the Python project reads the data directory from CONNECT_TEST_DATA
  (run_pipeline sets it).
"""

import datetime
import os
import re
import shutil
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.join(HERE, "data")
PROJECTS = {
    "python_project": os.path.join(HERE, "python_project"),
    "sql_project": os.path.join(HERE, "sql_project"),
}
VENV_BIN = os.path.dirname(sys.executable)

RUNNING = re.compile(r"Flow \S+ is RUNNING\.")
COMPLETED = re.compile(r"Run is COMPLETED\.")
STARTING_RUN = re.compile(r"Starting run\.\.\.")


def copy_data(dst):
    """Copy ../data to dst, mtimes in name order per directory."""
    shutil.copytree(DATA, dst)
    base = time.time() - 3600
    for d, _, files in os.walk(dst):
        for i, name in enumerate(sorted(files)):
            os.utime(os.path.join(d, name), (base + 10 * i, base + 10 * i))
    return dst


def assemble(project, root, data_dir, database=None, storage=None):
    """A runnable copy of `project` in root/<project>; returns its path."""
    dst = os.path.join(root, project)
    shutil.copytree(PROJECTS[project], dst, ignore=shutil.ignore_patterns("__pycache__"))
    spec_path = os.path.join(dst, "spark-pipeline.yml")
    with open(spec_path) as f:
        spec = f.read()
    storage = storage or "file://" + os.path.join(root, f"{project}-storage")
    spec = re.sub(r"(?m)^storage:.*$", f"storage: {storage}", spec)
    if database:
        spec = re.sub(r"(?m)^database:.*\n", "", spec) + f"database: {database}\n"
    with open(spec_path, "w") as f:
        f.write(spec)
    setup = os.path.join(dst, "setup")
    if os.path.isdir(setup):
        for name in os.listdir(setup):
            p = os.path.join(setup, name)
            with open(p) as f:
                sql = f.read()
            with open(p, "w") as f:
                f.write(sql.replace("__DATA__", data_dir))
    return dst


def sql_statements(text):
    """Split a setup file into statements (no ';' inside literals there)."""
    out = []
    for stmt in text.split(";"):
        body = "\n".join(line for line in stmt.splitlines() if not line.strip().startswith("--")).strip()
        if body:
            out.append(body)
    return out


def run_setup(spark, project_dir, database=None):
    """CREATE DATABASE (if asked) and run setup/*.sql in it."""
    if database:
        spark.sql(f"CREATE DATABASE IF NOT EXISTS {database}")
        spark.sql(f"USE {database}")
    setup = os.path.join(project_dir, "setup")
    if os.path.isdir(setup):
        for name in sorted(os.listdir(setup)):
            with open(os.path.join(setup, name)) as f:
                for stmt in sql_statements(f.read()):
                    spark.sql(stmt)


def remote_session(url):
    from pyspark.sql import SparkSession

    return SparkSession.builder.remote(url).getOrCreate()


def run_pipeline(project_dir, url, data_dir, log_path, args=("run",), timeout=900):
    """`spark-pipelines <args> --remote url` in project_dir. Returns
    {rc, starting_run, first_running, completed, exit} (seconds after
    launch, None if the line never came), and writes the output to log_path."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", TZ="UTC", PYTHONUNBUFFERED="1", CONNECT_TEST_DATA=data_dir)
    env.pop("SPARK_REMOTE", None)
    env["PATH"] = VENV_BIN + os.pathsep + env.get("PATH", "")
    env.setdefault("VIRTUAL_ENV", os.path.dirname(VENV_BIN))
    cmd = [os.path.join(VENV_BIN, "spark-pipelines"), *args, "--remote", url]
    out = {"rc": None, "starting_run": None, "first_running": None, "completed": None, "exit": None}
    t0 = time.monotonic()
    with open(log_path, "w") as log:
        p = subprocess.Popen(cmd, cwd=project_dir, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            for line in p.stdout:
                now = time.monotonic() - t0
                log.write(line)
                if out["starting_run"] is None and STARTING_RUN.search(line):
                    out["starting_run"] = now
                if out["first_running"] is None and RUNNING.search(line):
                    out["first_running"] = now
                if out["completed"] is None and COMPLETED.search(line):
                    out["completed"] = now
                if now > timeout:
                    raise TimeoutError(f"spark-pipelines still running after {timeout} s")
            out["rc"] = p.wait(timeout=60)
        finally:
            if p.poll() is None:
                os.killpg(p.pid, 9)
                p.wait()
    out["exit"] = time.monotonic() - t0
    return out


def render(v):
    """A value as a TSV cell: NULL as \\N, timestamps UTC 'YYYY-MM-DD HH:MM:SS[.ffffff]'."""
    if v is None:
        return "\\N"
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.strftime("%Y-%m-%d %H:%M:%S.%f" if v.microsecond else "%Y-%m-%d %H:%M:%S")
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v).replace("\\", "\\\\").replace("\t", "\\t").replace("\n", "\\n")


def read_table(spark, name):
    """(columns, rows as lists of TSV cells, sorted)."""
    df = spark.read.table(name)
    cols = df.columns
    rows = [[render(r[i]) for i in range(len(cols))] for r in df.collect()]
    rows.sort()
    return cols, rows


def tsv(cols, rows):
    return "".join("\t".join(r) + "\n" for r in [cols] + rows)
