"""Spark's answers for the SQL pipeline project tests/sql_pipeline: its
input events and the expected contents of every table, from a real
`spark-pipelines run` (PySpark 4.3, `pip install 'pyspark[pipelines]==4.3.0'
'pandas<3' pyarrow`):

    SPARK_LOCAL_IP=127.0.0.1 TZ=UTC PATH=$VENV/bin:$PATH \
        $VENV/bin/python tests/spark/sql_pipeline_fixtures.py [--no-flow-check] [--keep]

It (re)writes tests/sql_pipeline/data/events/part-0000{0..5}.json from a
seeded generator, assembles a project in a temporary directory
(transformations/ copied, spark/raw_events.py pointed at a copy of the
events whose modification times follow the file names, so that
maxFilesPerTrigger 1 reads them in name order, and a spark-pipeline.yml),
runs `spark-pipelines run` in it, reads every table back from its
spark-warehouse with Spark batch reads and writes
tests/sql_pipeline/expected/<table>.jsonl: one JSON object a line, keys in
column order, rows sorted by their values rendered as strings (nulls
first), timestamps as "YYYY-MM-DD HH:MM:SS[.ffffff]" UTC.

big_values is written by two append flows (big_api, big_web). Unless
--no-flow-check, the script also runs the pipeline twice more, each time
with one of the two flows commented out, and checks that the two-flow run
kept the union of what each flow alone writes; if Spark lost a flow's
rows, expected/big_values.jsonl is written from that union instead (and
the script says so). Spark 4.3 does lose one: both queries share the
table's _spark_metadata log, the second to commit batch 0 fails ("Race
while writing batch 0 to the file sink metadata log"), SDP retries it and
the retry's batches count as already committed, so its rows never appear
though the run ends COMPLETED.

The spec sets spark.sql.ansi.enabled false: with Spark 4's default ANSI
mode, CAST('not a time' AS TIMESTAMP) fails the run instead of giving NULL.

It prints, for the record, the wall time from starting `spark-pipelines`
to its first "Flow ... is RUNNING" event line and to its exit.
"""

import argparse
import datetime
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
PROJECT = os.path.normpath(os.path.join(HERE, "..", "sql_pipeline"))
EVENTS = os.path.join(PROJECT, "data", "events")
EXPECTED = os.path.join(PROJECT, "expected")

TABLES = ["raw_events", "errors", "errors_by_service", "api_events", "counts_10m", "big_values"]
FLOWS = ["big_api", "big_web"]

T0 = datetime.datetime(2024, 1, 1, 0, 0, 0)
SEED = 20240101


def generate_events():
    """Six files; file k holds on-time events from T0 + 10k min to T0 + 10k
    min + 10:30 (its last one), so the watermark after file k is T0 + 10k
    min + 0:30, and (from file 1 on) a few late ones, 3-6, 11-14 and 21-25
    minutes older than the newest event before the file (file 1: two, 3-8
    minutes). See tests/sql_pipeline/README.md for what Spark drops."""
    rng = random.Random(SEED)
    users = ["u1", "u2", "u3", "u4", "u5"]
    services = ["api", "web", "db"]
    levels = ["INFO"] * 5 + ["WARN"] * 2 + ["ERROR"] * 2

    def row(ts, **over):
        r = {
            "ts": ts.strftime("%Y-%m-%dT%H:%M:%S") if isinstance(ts, datetime.datetime) else ts,
            "user_id": rng.choice(users),
            "service_name": rng.choice(services),
            "level": rng.choice(levels),
            "value": rng.randint(0, 1000),
        }
        r.update(over)
        return r

    files = []
    for k in range(6):
        start = T0 + datetime.timedelta(minutes=10 * k)
        n = rng.randint(14, 19)
        offsets = sorted(rng.sample(range(0, 625), n - 1)) + [630]  # the last event at +10:30
        rows = [row(start + datetime.timedelta(seconds=s)) for s in offsets]
        if k == 0:
            # a little disorder within the first file
            rows[3], rows[5] = rows[5], rows[3]
        late = [(3, 6), (11, 14), (21, 25)] if k >= 2 else ([(3, 8), (3, 8)] if k == 1 else [])
        for lo, hi in late:
            lag = rng.randint(lo * 60, hi * 60)
            pos = rng.randint(1, len(rows) - 1)
            rows.insert(pos, row(start + datetime.timedelta(seconds=30 - lag)))
        files.append(rows)

    # Forced rows: values above 900 for both big flows, a ts that is no
    # timestamp and a null ts (CAST gives NULL; both reach errors, the first
    # also api_events and big_values, the second big_values via big_web).
    files[0].insert(2, row(T0 + datetime.timedelta(seconds=130), service_name="api", value=981))
    files[1].insert(4, row(T0 + datetime.timedelta(seconds=900), service_name="web", value=944))
    files[2].insert(6, row("not a time", user_id="u2", service_name="api", level="ERROR", value=950))
    files[3].insert(3, row(None, user_id="u4", service_name="web", level="WARN", value=920))
    files[4].insert(5, row(T0 + datetime.timedelta(seconds=2700), service_name="api", value=907))
    files[5].insert(8, row(T0 + datetime.timedelta(seconds=3300), service_name="web", value=999, level="ERROR"))

    os.makedirs(EVENTS, exist_ok=True)
    for name in os.listdir(EVENTS):
        os.remove(os.path.join(EVENTS, name))
    for k, rows in enumerate(files):
        with open(os.path.join(EVENTS, f"part-{k:05d}.json"), "w") as f:
            for r in rows:
                f.write(json.dumps(r, separators=(",", ":")) + "\n")
    return files


SPEC = """name: sql_pipeline
storage: {storage}
configuration:
  spark.sql.session.timeZone: UTC
  spark.sql.shuffle.partitions: "2"
  spark.sql.ansi.enabled: "false"
libraries:
  - glob:
      include: transformations/**
  - glob:
      include: spark/**
"""


def drop_flow(sql, flow):
    """Comment out the CREATE FLOW statement named `flow`."""
    out, dropping = [], False
    for line in sql.splitlines():
        if re.match(rf"\s*CREATE FLOW {flow}\b", line):
            dropping = True
        out.append("-- " + line if dropping else line)
        if dropping and line.rstrip().endswith(";"):
            dropping = False
    return "\n".join(out) + "\n"


def assemble(root, without_flow=None):
    """A runnable Spark project in `root`; returns the warehouse path."""
    events = os.path.join(root, "events")
    os.makedirs(events)
    base = time.time() - 3600
    for i, name in enumerate(sorted(os.listdir(EVENTS))):
        dst = os.path.join(events, name)
        shutil.copyfile(os.path.join(EVENTS, name), dst)
        os.utime(dst, (base + 10 * i, base + 10 * i))
    shutil.copytree(os.path.join(PROJECT, "transformations"), os.path.join(root, "transformations"))
    if without_flow:
        for name in os.listdir(os.path.join(root, "transformations")):
            p = os.path.join(root, "transformations", name)
            with open(p) as f:
                sql = f.read()
            with open(p, "w") as f:
                f.write(drop_flow(sql, without_flow))
    os.makedirs(os.path.join(root, "spark"))
    with open(os.path.join(PROJECT, "spark", "raw_events.py")) as f:
        src = f.read()
    src = src.replace('EVENTS_DIR = "data/events"', f"EVENTS_DIR = {events!r}")
    with open(os.path.join(root, "spark", "raw_events.py"), "w") as f:
        f.write(src)
    storage = "file://" + os.path.join(root, "storage")
    with open(os.path.join(root, "spark-pipeline.yml"), "w") as f:
        f.write(SPEC.format(storage=storage))
    return os.path.join(root, "spark-warehouse")


def run_pipeline(root):
    """`spark-pipelines run` in `root`; returns (seconds to first flow
    RUNNING, seconds to exit)."""
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", TZ="UTC", PYTHONUNBUFFERED="1")
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    cmd = [
        "spark-pipelines",
        "--remote", "local[2]",
        "--conf", f"spark.sql.warehouse.dir={os.path.join(root, 'spark-warehouse')}",
        "run",
    ]
    log = open(os.path.join(root, "run.log"), "w")
    t0 = time.monotonic()
    first_running = None
    p = subprocess.Popen(cmd, cwd=root, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in p.stdout:
        log.write(line)
        if first_running is None and re.search(r"Flow \S+ is RUNNING", line):
            first_running = time.monotonic() - t0
    rc = p.wait()
    total = time.monotonic() - t0
    log.close()
    if rc != 0:
        with open(os.path.join(root, "run.log")) as f:
            sys.stderr.write(f.read()[-20000:])
        sys.exit(f"spark-pipelines run failed ({rc}) in {root}")
    return first_running, total


def render(v):
    if isinstance(v, datetime.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(datetime.timezone.utc).replace(tzinfo=None)
        return v.strftime("%Y-%m-%d %H:%M:%S.%f" if v.microsecond else "%Y-%m-%d %H:%M:%S")
    return v


def sort_key(row):
    return tuple((0, "") if v is None else (1, str(v)) for v in row)


def read_tables(spark, warehouse, tables):
    out = {}
    for t in tables:
        df = spark.read.parquet(os.path.join(warehouse, t))
        cols = df.columns
        rows = [tuple(render(r[c]) for c in cols) for r in df.collect()]
        rows.sort(key=sort_key)
        out[t] = (cols, rows)
    return out


def write_expected(name, cols, rows):
    with open(os.path.join(EXPECTED, f"{name}.jsonl"), "w") as f:
        for r in rows:
            f.write(json.dumps(dict(zip(cols, r)), separators=(",", ":")) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--no-flow-check", action="store_true", help="skip the two one-flow runs")
    ap.add_argument("--keep", action="store_true", help="keep the temporary projects")
    args = ap.parse_args()

    generate_events()
    tmp = tempfile.mkdtemp(prefix="sql-pipeline-")
    runs = [(None, os.path.join(tmp, "both"))]
    if not args.no_flow_check:
        # run big_api alone (big_web commented out) and big_web alone
        runs += [(FLOWS[1], os.path.join(tmp, "only-" + FLOWS[0])), (FLOWS[0], os.path.join(tmp, "only-" + FLOWS[1]))]
    warehouses = []
    for without, root in runs:
        os.makedirs(root)
        warehouses.append(assemble(root, without))
        first, total = run_pipeline(root)
        label = "all flows" if without is None else f"without {without}"
        print(f"spark-pipelines run ({label}): first flow RUNNING after {first:.1f} s, done after {total:.1f} s")

    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    print(f"spark {spark.version}")
    tables = read_tables(spark, warehouses[0], TABLES)
    if not args.no_flow_check:
        alone = [read_tables(spark, w, ["big_values"])["big_values"] for w in warehouses[1:]]
        cols = tables["big_values"][0]
        union = []
        for c, rows in alone:
            assert sorted(c) == sorted(cols), (c, cols)
            union += [tuple(dict(zip(c, r))[k] for k in cols) for r in rows]
        union.sort(key=sort_key)
        got = tables["big_values"][1]
        if got == union:
            print(f"big_values: both flows' rows kept ({len(got)} rows)")
        else:
            print(
                f"big_values: Spark kept {len(got)} rows, the flows alone write {len(alone[0][1])} + "
                f"{len(alone[1][1])}; writing their union"
            )
            tables["big_values"] = (cols, union)
    spark.stop()

    os.makedirs(EXPECTED, exist_ok=True)
    for t in TABLES:
        cols, rows = tables[t]
        write_expected(t, cols, rows)
        print(f"{t}: {len(rows)} rows, columns {cols}")
    if args.keep:
        print(f"projects kept in {tmp}")
    else:
        shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
