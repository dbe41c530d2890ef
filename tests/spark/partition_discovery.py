"""Spark's answers for partition directories read by the file source: the
fixture of crates/core/tests/it/engine_source_file.rs
(`partition_directories_fill_their_columns_like_spark`).

Writes the input layout under crates/core/tests/it/data/partitions/input
(JSON files in `col=value/` directories: an escaped value, a space, Hive's
default partition, a column both in the file and in the path), reads it
with a streaming JSON source of a declared schema (available-now trigger),
and writes every row Spark returns, sorted, to expected.tsv:

    SPARK_LOCAL_IP=127.0.0.1 TZ=UTC ~/.cache/pipelines-venv/bin/python tests/spark/partition_discovery.py
"""

import os
import shutil

from pyspark.sql import SparkSession

DIR = os.path.join(os.path.dirname(__file__), "..", "..", "crates", "core", "tests", "it", "data", "partitions")
SCHEMA = "id BIGINT, k STRING, day DATE, hour INT"
FILES = {
    "day=2024-01-01/hour=3/k=a%3Ab/part-0.json": ['{"id":1}'],
    "day=2024-01-01/hour=4/k=plain/part-0.json": ['{"id":2}', '{"id":3}'],
    "day=__HIVE_DEFAULT_PARTITION__/hour=5/k=x/part-0.json": ['{"id":4}'],
    "day=2024-02-29/hour=23/k=a b/part-0.json": ['{"id":5}'],
    "day=2024-03-01/hour=0/k=from-path/part-0.json": ['{"id":6,"k":"from-file"}'],
}


def main():
    inp = os.path.join(DIR, "input")
    shutil.rmtree(inp, ignore_errors=True)
    for rel, lines in FILES.items():
        path = os.path.join(inp, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
    spark = (
        SparkSession.builder.master("local[1]")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    rows = []

    def collect(df, _):
        rows.extend(df.collect())

    q = (
        spark.readStream.schema(SCHEMA)
        .json(os.path.abspath(inp))
        .writeStream.foreachBatch(collect)
        .trigger(availableNow=True)
        .option("checkpointLocation", "/tmp/partition_discovery_ckpt")
        .start()
    )
    q.awaitTermination()
    shutil.rmtree("/tmp/partition_discovery_ckpt", ignore_errors=True)
    fmt = lambda v: "NULL" if v is None else str(v)
    out = sorted("\t".join(fmt(r[c]) for c in ["id", "k", "day", "hour"]) for r in rows)
    with open(os.path.join(DIR, "expected.tsv"), "w") as f:
        f.write("# id\tk\tday\thour (" + SCHEMA + "), from " + spark.version + "\n")
        for line in out:
            f.write(line + "\n")
    spark.stop()


if __name__ == "__main__":
    main()
