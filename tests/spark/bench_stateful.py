"""Spark local[2]'s speed on bench_stateful's windowed count, measured here.

The same workload as `cargo run --release --example bench_stateful`: the 5 M
events it generates (run it once first; data under $BENCH_DIR, else
/tmp/pipelines-bench), `withWatermark("ts", "10 minutes")
.groupBy(window("ts", "1 minute"), "service").count()` in append mode into a
Parquet table, available-now, all events in one micro-batch and one file per
micro-batch, from JSON and from Parquet. Prints the median of `--runs` warm
runs per workload (the JVM and session start are not counted).

    SPARK_LOCAL_IP=127.0.0.1 TZ=UTC ~/.cache/pipelines-venv/bin/python \
        tests/spark/bench_stateful.py [--runs 3] [--events 5000000] [--only TEXT]

`--only TEXT` runs the workloads whose label contains TEXT.
`cargo run --release --example bench_stateful -- --spark` runs this script
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

DDL = "ts TIMESTAMP, user_id STRING, service STRING, level STRING, value BIGINT"


def run_once(spark, data, fmt, max_files, work):
    shutil.rmtree(work, ignore_errors=True)
    reader = spark.readStream.format(fmt).schema(DDL)
    if max_files:
        reader = reader.option("maxFilesPerTrigger", str(max_files))
    counts = (
        reader.load(os.path.join(data, fmt))
        .withWatermark("ts", "10 minutes")
        .groupBy(F.window("ts", "1 minute"), "service")
        .count()
    )
    start = time.monotonic()
    q = (
        counts.writeStream.format("parquet")
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
    data = os.path.join(root, f"data-{args.events}")
    if not os.path.exists(os.path.join(data, "done-marker")):
        raise SystemExit(f"no bench data at {data}: run `cargo run --release --example bench_stateful` first")
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    work = tempfile.mkdtemp(prefix="spark-bench-")
    print("Spark local[2], windowed count with watermark   median s   rows/s     batches")
    for label, fmt, max_files in [
        ("JSON, one batch", "json", None),
        ("JSON, one file per batch", "json", 1),
        ("Parquet, one batch", "parquet", None),
        ("Parquet, one file per batch", "parquet", 1),
    ]:
        if args.only and args.only not in label:
            continue
        run_once(spark, data, fmt, max_files, work)  # warm-up
        results = [run_once(spark, data, fmt, max_files, work) for _ in range(args.runs)]
        secs = statistics.median(r[0] for r in results)
        print(f"{label:<47} {secs:>8.2f}   {args.events / secs:>9.0f}  {results[-1][1]:>7}")
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
