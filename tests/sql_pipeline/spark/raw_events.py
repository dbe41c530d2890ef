# Spark's raw source (OSS Spark has no read_files; our engine uses ours/raw_events.sql).
# tests/spark/sql_pipeline_fixtures.py replaces EVENTS_DIR with an absolute path.
from pyspark import pipelines as dp

EVENTS_DIR = "data/events"


@dp.table(name="raw_events")
def raw_events():
    return (
        spark.readStream.format("json")  # noqa: F821 (spark is injected by spark-pipelines)
        .schema("ts STRING, user_id STRING, service_name STRING, level STRING, value BIGINT")
        .option("maxFilesPerTrigger", 1)
        .load(EVENTS_DIR)
    )
