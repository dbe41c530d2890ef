"""Spark's answers for the two reference projects, through Spark Connect.

    $HOME/.cache/pipelines-venv/bin/python tests/spark/connect/make_expected.py [--runs 3] [--keep]

Starts a local Spark Connect server (server.py), and for each project
(python_project, sql_project) and each of --runs runs: assembles a
runnable copy (projects.assemble) using a fresh database
<project>_r<k>, creates the SQL project's source tables (setup/*.sql),
runs `spark-pipelines run --remote sc://...` in it, and reads every table
the run created back through a Spark Connect session
(spark.read.table). The runs must agree; run 1's rows are written to
expected/<project>/<table>.tsv: a header line of column names, then the
rows sorted (as lists of cell strings), tab-separated, NULL as \\N,
timestamps UTC "YYYY-MM-DD HH:MM:SS[.ffffff]". Then it stops the server.

It prints, per run, the seconds from launching spark-pipelines to its
"Starting run..." line (StartRun sent), to the first "Flow ... is RUNNING."
event, to "Run is COMPLETED." and to its exit, and the medians.
"""

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import projects  # noqa: E402
from server import SparkConnectServer  # noqa: E402

EXPECTED = os.path.join(projects.HERE, "expected")
KEYS = ["starting_run", "first_running", "completed", "exit"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--keep", action="store_true", help="keep the temporary directory")
    ap.add_argument("--project", action="append", choices=sorted(projects.PROJECTS), help="default: both")
    args = ap.parse_args()
    names = args.project or ["python_project", "sql_project"]

    tmp = tempfile.mkdtemp(prefix="connect-expected-")
    data = projects.copy_data(os.path.join(tmp, "data"))
    timings = {}
    failed = False
    srv = SparkConnectServer(os.path.join(tmp, "warehouse"), log_path=os.path.join(tmp, "server.log"), check=True)
    with srv:
        print(f"server {srv.url} up after {srv.startup_seconds:.1f} s", flush=True)
        spark = projects.remote_session(srv.url)
        try:
            for name in names:
                results = []
                timings[name] = []
                for k in range(1, args.runs + 1):
                    db = f"{name}_r{k}"
                    root = os.path.join(tmp, f"{name}-r{k}")
                    os.makedirs(root)
                    pdir = projects.assemble(name, root, data, database=db)
                    projects.run_setup(spark, pdir, db)
                    before = {r.tableName for r in spark.sql(f"SHOW TABLES IN {db}").collect()}
                    log = os.path.join(root, "run.log")
                    t = projects.run_pipeline(pdir, srv.url, data, log)
                    if t["rc"] != 0 or t["completed"] is None:
                        with open(log) as f:
                            sys.stderr.write(f.read()[-20000:])
                        sys.exit(f"{name} run {k} failed (rc {t['rc']}); log {log}, temp dir {tmp} kept")
                    timings[name].append(t)
                    print(f"{name} run {k}: " + ", ".join(f"{key} {t[key]:.1f} s" for key in KEYS), flush=True)
                    created = sorted({r.tableName for r in spark.sql(f"SHOW TABLES IN {db}").collect()} - before)
                    results.append({tbl: projects.read_table(spark, f"{db}.{tbl}") for tbl in created})
                for k, other in enumerate(results[1:], start=2):
                    if other != results[0]:
                        failed = True
                        diff = [t for t in sorted(set(other) | set(results[0])) if other.get(t) != results[0].get(t)]
                        print(f"WARNING: {name} run {k} differs from run 1 in {diff}", flush=True)
                out = os.path.join(EXPECTED, name)
                shutil.rmtree(out, ignore_errors=True)
                os.makedirs(out)
                for tbl, (cols, rows) in sorted(results[0].items()):
                    with open(os.path.join(out, f"{tbl}.tsv"), "w") as f:
                        f.write(projects.tsv(cols, rows))
                    print(f"  {name}/{tbl}.tsv: {len(rows)} rows, columns {cols}")
        finally:
            spark.stop()

    print("\nmedians over", args.runs, "runs (seconds after launching spark-pipelines):")
    summary = {}
    for name, ts in timings.items():
        med = {key: statistics.median(t[key] for t in ts) for key in KEYS}
        summary[name] = {"runs": ts, "median": med}
        print(f"  {name}: " + ", ".join(f"{key} {med[key]:.1f}" for key in KEYS))
    print(json.dumps(summary, indent=1))
    if args.keep:
        print(f"kept {tmp}")
    else:
        shutil.rmtree(tmp, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
