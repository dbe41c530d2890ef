"""Reads a Parquet table written by our file sink with real Spark and checks
Spark sees exactly the rows we committed.

Spark reads a directory with `_spark_metadata` through that manifest (its
MetadataLogFileIndex), so this also checks that our manifest is
Spark-compatible: only committed files are visible.

usage: python readback.py <table dir> <input JSON dir>
Expected rows: the ERROR lines of the input logs (the error_filter example).
"""
import glob
import json
import os
import sys

from pyspark.sql import SparkSession


def main() -> int:
    table, logs = sys.argv[1], sys.argv[2]
    expected = []
    for path in sorted(glob.glob(os.path.join(logs, "*.json"))):
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                if row["level"] == "ERROR":
                    expected.append((row["ts"].replace("T", " ").replace("Z", ""), row["service_name"], row["level"], row["msg"]))
    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    df = spark.read.parquet(table)
    got = [
        (r.ts.strftime("%Y-%m-%d %H:%M:%S"), r.service_name, r.level, r.msg)
        for r in df.collect()
    ]
    spark.stop()
    if sorted(got) != sorted(expected):
        print(f"MISMATCH: Spark read {len(got)} rows, expected {len(expected)}")
        print("only in Spark:", sorted(set(got) - set(expected))[:5])
        print("only expected:", sorted(set(expected) - set(got))[:5])
        return 1
    print(f"Spark read the same {len(got)} rows from {table}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
