"""Spark's answers for strings to timestamps: the fixtures of
crates/core/tests/it/timestamp_golden.rs, rewritten from real PySpark.

Each fixture line holds hex-encoded input bytes (and, for patterns, the
pattern) and Spark's result: microseconds since the epoch
(`unix_micros`), `NULL`, `ERROR` (the row raises: `ArithmeticException`)
or `PATTERN_ERROR` (Spark rejects the pattern). ANSI mode off, session
time zone UTC, the default (CORRECTED) parser policy:

  cast_golden.tsv            unix_micros(CAST(CAST(unhex(h) AS STRING) AS TIMESTAMP))
  pattern_golden_small.tsv   unix_micros(to_timestamp(CAST(unhex(h) AS STRING), pattern))
  pattern_extra_golden.tsv   the same, hand-picked cases (quoting, case, month names)

The inputs were generated once (random bytes, mutations of valid strings,
every zone form; 37 patterns) and are kept in the files; this script reads
them back and rewrites every result with the Spark it runs on:

    SPARK_LOCAL_IP=127.0.0.1 TZ=UTC ~/.cache/pipelines-venv/bin/python tests/spark/timestamp_golden.py

Then `cargo test -p pipelines-core --test it timestamp_golden` checks the
parser against them.
"""

import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

DIR = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "core", "tests", "it", "data", "timestamp")


def read(name):
    header, rows = None, []
    with open(os.path.join(DIR, name)) as f:
        for line in f:
            line = line.rstrip("\n")
            if line.startswith("#"):
                header = line
            else:
                rows.append(line.split("\t"))
    return header, rows


def write(name, header, rows):
    with open(os.path.join(DIR, name), "w") as f:
        f.write(header + "\n")
        for r in rows:
            f.write("\t".join(r) + "\n")


def fmt(v):
    return "NULL" if v is None else str(v)


def main():
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.sql.ansi.enabled", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("OFF")
    version = spark.version

    _, rows = read("cast_golden.tsv")
    df = spark.createDataFrame([(i, r[0]) for i, r in enumerate(rows)], "i int, h string")
    got = {
        row.i: row.v
        for row in df.select(
            "i", F.expr("cast(unix_micros(cast(cast(unhex(h) as string) as timestamp)) as string)").alias("v")
        ).collect()
    }
    write(
        "cast_golden.tsv",
        f"# spark {version} cast golden: hex\\tresult",
        [[r[0], fmt(got[i])] for i, r in enumerate(rows)],
    )
    print("cast", len(rows), file=sys.stderr)

    for name, what in [
        ("pattern_golden_small.tsv", "to_timestamp golden"),
        ("pattern_extra_golden.tsv", "hand-picked to_timestamp cases"),
    ]:
        _, rows = read(name)
        out = []
        for p, h, _old in rows:
            one = spark.createDataFrame([(h,)], "h string")
            try:
                v = one.select(
                    F.unix_micros(F.to_timestamp(F.expr("cast(unhex(h) as string)"), p)).cast("string")
                ).collect()[0][0]
                v = fmt(v)
            except Exception as e:  # the row or the pattern raises in Spark
                msg = str(e)
                v = "ERROR" if ("ArithmeticException" in msg or "overflow" in msg) else "PATTERN_ERROR"
            out.append([p, h, v])
        write(name, f"# spark {version} {what}: pattern\\thex\\tresult", out)
        print(name, len(rows), file=sys.stderr)


if __name__ == "__main__":
    main()
