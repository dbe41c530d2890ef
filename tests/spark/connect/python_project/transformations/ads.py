"""Ad impressions and clicks: every operator the Rust client must translate,
each as its own dataset.

Spark 4.3's Connect planner analyses some operators eagerly when it
receives DefineFlow (withWatermark, drop, dropna, fillna): over a
pipeline dataset that is not yet a catalog table (its first run) the
DefineFlow fails with TABLE_OR_VIEW_NOT_FOUND, even if the dataset was
defined just before. So the watermarked datasets here read the JSON file
source directly (a file source resolves without the catalog); the
stateless ones read the pipeline tables. See ../../README.md."""

import os

from pyspark import pipelines as dp
from pyspark.sql import functions as F

# `spark` is injected by spark-pipelines.
HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("CONNECT_TEST_DATA", os.path.normpath(os.path.join(HERE, "..", "..", "data")))

IMPRESSION_SCHEMA = "impression_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING, country STRING"
CLICK_SCHEMA = "click_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING"


# The file sources: explicit schema, one file per micro-batch (so that
# watermarks advance file by file). The raw tables are these; the
# watermarked flows read them too (see the module docstring).
def impression_files():
    return (
        spark.readStream.format("json")  # noqa: F821
        .schema(IMPRESSION_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .load(os.path.join(DATA, "impressions"))
    )


def click_files():
    return (
        spark.readStream.format("json")  # noqa: F821
        .schema(CLICK_SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .load(os.path.join(DATA, "clicks"))
    )


# 1. File sources read as streams.
@dp.table(comment="ad impressions, one JSON file per micro-batch")
def impressions_raw():
    return impression_files()


@dp.table
def clicks_raw():
    return click_files()


# Stateless downstream flows read the upstream tables, one committed file
# per micro-batch.
def impressions():
    return spark.readStream.option("maxFilesPerTrigger", 1).table("impressions_raw")  # noqa: F821


def clicks():
    return spark.readStream.option("maxFilesPerTrigger", 1).table("clicks_raw")  # noqa: F821


# 2. A filter.
@dp.table
def impressions_us():
    return impressions().filter(F.col("country") == "US")


# 3. A withColumn.
@dp.table
def impressions_tagged():
    return impressions().withColumn("ad_country", F.concat_ws("/", F.col("ad_id"), F.col("country")))


# 4. withWatermark + a tumbling-window count, append mode.
@dp.table
def impressions_per_minute():
    return (
        impression_files()
        .withWatermark("ts", "30 seconds")
        .groupBy(F.window("ts", "1 minute"), "country")
        .count()
        .select(
            F.col("window.start").alias("window_start"),
            F.col("window.end").alias("window_end"),
            "country",
            "count",
        )
    )


# 5. dropDuplicatesWithinWatermark.
@dp.table
def impressions_dedup():
    return impression_files().withWatermark("ts", "1 minute").dropDuplicatesWithinWatermark(["impression_id"])


# 6. A stream-stream inner join, watermarks on both sides, an event-time range.
@dp.table
def attributed_clicks():
    i = impression_files().withWatermark("ts", "1 minute").alias("i")
    c = click_files().withWatermark("ts", "1 minute").alias("c")
    return i.join(
        c,
        (F.col("i.ad_id") == F.col("c.ad_id"))
        & (F.col("i.user_id") == F.col("c.user_id"))
        & (F.col("c.ts") >= F.col("i.ts"))
        & (F.col("c.ts") <= F.col("i.ts") + F.expr("INTERVAL 1 MINUTE")),
        "inner",
    ).select(
        F.col("i.impression_id"),
        F.col("c.click_id"),
        F.col("i.ad_id"),
        F.col("i.user_id"),
        F.col("i.ts").alias("impression_ts"),
        F.col("c.ts").alias("click_ts"),
    )


# 7. A union of two streams.
@dp.table
def activity():
    i = impressions().select("ts", "user_id", "ad_id", F.lit("impression").alias("kind"))
    c = clicks().select("ts", "user_id", "ad_id", F.lit("click").alias("kind"))
    return i.union(c)


# 8. A materialized view: a batch aggregation over a streaming table.
@dp.materialized_view
def clicks_per_ad():
    return (
        spark.read.table("clicks_raw")  # noqa: F821
        .groupBy("ad_id")
        .agg(F.count("*").alias("clicks"), F.min("ts").alias("first_click"))
    )
