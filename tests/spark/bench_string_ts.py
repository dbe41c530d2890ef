"""Spark local[2]'s speed on bench_string_ts's workloads, measured here.

The same workloads as `cargo run --release --example bench_string_ts`, on
the events it generates (run it once first; data under $BENCH_DIR, else
/tmp/pipelines-bench, in `strts-<events>/{json,parquet}`), whose `ts` is an
ISO-8601 string converted with `to_timestamp(ts)`:

- windowed count: `withWatermark("event_time", "10 minutes")
  .groupBy(window("event_time", "10 minutes")).count()`, append mode;
- filter + project: `filter(level <> 'INFO')
  .select(event_time, user_id, service_name, value)`;

each into a Parquet table, available-now, all events in one micro-batch
and one file per micro-batch, from JSON and from Parquet. Prints the median
of `--runs` warm runs per workload (the JVM and session start are not
counted).

    SPARK_LOCAL_IP=127.0.0.1 TZ=UTC ~/.cache/pipelines-venv/bin/python \
        tests/spark/bench_string_ts.py [--runs 3] [--events 5000000] [--only TEXT]

`cargo run --release --example bench_string_ts -- --spark` runs this script
after its own runs and prints its ratios against these figures.
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

DDL = "ts STRING, user_id STRING, service_name STRING, level STRING, value BIGINT"

WORKLOADS = [
    ("windowed count, JSON, one batch", True, "json", None),
    ("windowed count, JSON, one file per batch", True, "json", 1),
    ("windowed count, Parquet, one batch", True, "parquet", None),
    ("windowed count, Parquet, one file per batch", True, "parquet", 1),
    ("filter + project, JSON, one batch", False, "json", None),
    ("filter + project, JSON, one file per batch", False, "json", 1),
    ("filter + project, Parquet, one batch", False, "parquet", None),
    ("filter + project, Parquet, one file per batch", False, "parquet", 1),
]


def run_once(spark, data, windowed, fmt, max_files, work):
    shutil.rmtree(work, ignore_errors=True)
    reader = spark.readStream.format(fmt).schema(DDL)
    if max_files:
        reader = reader.option("maxFilesPerTrigger", str(max_files))
    events = reader.load(os.path.join(data, fmt)).withColumn("event_time", F.to_timestamp("ts"))
    if windowed:
        out = (
            events.withWatermark("event_time", "10 minutes")
            .groupBy(F.window("event_time", "10 minutes"))
            .count()
        )
    else:
        out = events.filter("level <> 'INFO'").select("event_time", "user_id", "service_name", "value")
    start = time.monotonic()
    q = (
        out.writeStream.format("parquet")
        .outputMode("append")
        .option("checkpointLocation", os.path.join(work, "checkpoint"))
        .option("path", os.path.join(work, "out"))
        .trigger(availableNow=True)
        .start()
    )
    q.awaitTermination()
    secs = time.monotonic() - start
    batches = len([p for p in q.recentProgress if p["numInputRows"] > 0])
    return secs, batches


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--events", type=int, default=5_000_000)
    ap.add_argument("--only", default=None)
    args = ap.parse_args()
    root = os.environ.get("BENCH_DIR") or os.path.join(tempfile.gettempdir(), "pipelines-bench")
    data = os.path.join(root, f"strts-{args.events}")
    if not os.path.exists(os.path.join(data, "done-marker")):
        raise SystemExit(f"no bench data at {data}: run `cargo run --release --example bench_string_ts` first")
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = tempfile.mkdtemp(prefix="spark-bench-strts-")
    print("Spark local[2], string timestamps               median s   rows/s     batches")
    for label, windowed, fmt, max_files in WORKLOADS:
        if args.only and args.only not in label:
            continue
        run_once(spark, data, windowed, fmt, max_files, work)  # warm-up
        results = [run_once(spark, data, windowed, fmt, max_files, work) for _ in range(args.runs)]
        secs = statistics.median(r[0] for r in results)
        print(f"{label:<47} {secs:>8.2f}   {args.events / secs:>9.0f}  {results[-1][1]:>7}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
