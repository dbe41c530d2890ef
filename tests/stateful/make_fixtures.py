"""Generate reference fixtures for stateful streaming from real Apache Spark.

For every case this script
  1. writes the case's committed JSON-lines input files (fixed literals below,
     one file per micro-batch) into tests/stateful/<case>/input*/,
  2. copies them to a temp dir with strictly increasing mtimes in file-name
     order (Spark's file source orders new files by modification time),
  3. runs the case's PySpark streaming query with maxFilesPerTrigger=1 and
     trigger(availableNow=True) into a foreachBatch sink that records every
     row of every micro-batch, and
  4. writes tests/stateful/<case>/expected.json with those rows plus, per
     batch, the figures from query.recentProgress.

Run (see README.md):
    SPARK_LOCAL_IP=127.0.0.1 TZ=UTC ~/.cache/pipelines-venv/bin/python tests/stateful/make_fixtures.py

Re-running rewrites byte-identical files (inputs are literals, outputs are
sorted, nothing time-dependent is recorded).
"""
import datetime
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
PYSPARK_VERSION = "4.3.0"

# --------------------------------------------------------------------------
# Input data
# --------------------------------------------------------------------------

EVENTS_SCHEMA = "ts TIMESTAMP, user STRING, service STRING, level STRING, value BIGINT"


def ev(ts, user, service, level, value):
    return {"ts": "2024-05-01 " + ts, "user": user, "service": service, "level": level, "value": value}


# Shared by the aggregation cases. Comments give the watermark reasoning for a
# 15-minute delay (tumbling_*) and a 10-minute delay (error_monitor,
# aggs_update); "late wm" is the watermark rows are judged late against
# (previous batch's), "evict wm" the one windows are closed with.
EVENTS = [
    # batch 0: late wm 0, evict wm 0.  max ts 10:12
    [
        ev("10:01:00", "u1", "api", "INFO", 1),
        ev("10:03:00", "u1", "api", "ERROR", 3),
        ev("10:05:00", "u2", "web", "INFO", 2),
        ev("10:08:00", "u3", "db", "ERROR", 5),
        ev("10:12:00", "u2", "api", "ERROR", 4),
    ],
    # batch 1: evict wm 09:57 (15m) / 10:02 (10m).  max ts 10:25
    [
        ev("10:14:00", "u1", "web", "INFO", 1),
        ev("10:18:00", "u3", "api", "ERROR", 2),
        ev("10:22:00", "u1", "api", "ERROR", 6),
        ev("10:09:00", "u2", "web", "WARN", 3),   # out of order, window still open
        ev("10:25:00", "u2", "api", "ERROR", 2),
    ],
    # batch 2: late wm 09:57 / 10:02, evict wm 10:10 / 10:15.  max ts 10:38
    [
        ev("10:31:00", "u2", "api", "ERROR", 2),
        ev("10:06:00", "u1", "api", "ERROR", 7),   # behind evict wm, not late: counted
        ev("10:27:00", None, "db", "INFO", 4),     # null user
        ev("09:41:00", "u3", "api", "ERROR", 2),   # late: dropped
        ev("10:35:00", "u3", "web", "ERROR", 1),
        ev("10:38:00", "u1", "db", "ERROR", 3),
    ],
    # batch 3: late wm 10:10 / 10:15, evict wm 10:23 / 10:28.  max ts 10:47
    [
        ev("10:44:00", "u1", "api", "ERROR", 2),
        ev("10:04:00", "u3", "db", "ERROR", 5),    # late: dropped
        ev("10:41:00", "u2", "web", "INFO", 1),
        ev("10:19:00", "u3", "api", "ERROR", 4),   # behind evict wm, window 10:10-10:20 still in state
        ev("10:47:00", "u2", "api", "WARN", 2),
        ev("10:12:00", "u1", "web", "ERROR", 1),   # same
    ],
    # batch 4: late wm 10:23 / 10:28, evict wm 10:32 / 10:37.  max ts 11:02
    [
        ev("10:55:00", "u1", "api", "ERROR", 3),
        ev("10:58:00", "u3", "web", "ERROR", 1),
        ev("10:29:00", "u2", "db", "ERROR", 2),    # behind evict wm, window 10:20-10:30 still in state
        ev("10:15:00", "u1", "api", "ERROR", 1),   # late: dropped
        ev("11:02:00", "u2", "api", "INFO", 5),
        ev("10:55:00", "u1", "api", "ERROR", 3),   # exact duplicate in the same file
        ev("10:52:00", None, "web", "ERROR", 2),   # null user
    ],
]

# dedup: dropDuplicates(["user", "ts"]) with a 10-minute watermark.
DEDUP_EVENTS = [
    # batch 0: max 10:05 -> wm 09:55
    [
        ev("10:00:00", "u1", "api", "INFO", 1),
        ev("10:00:00", "u1", "api", "INFO", 1),    # exact duplicate, same file
        ev("10:02:00", "u2", "web", "INFO", 2),
        ev("10:05:00", "u3", "db", "ERROR", 3),
        ev("10:05:00", None, "db", "WARN", 4),
        ev("10:05:00", None, "db", "WARN", 4),     # duplicate with null user
    ],
    # batch 1: late wm 0, evict wm 09:55. max 10:15 -> wm 10:05
    [
        ev("10:02:00", "u2", "web", "INFO", 2),    # duplicate of batch 0
        ev("10:08:00", "u1", "api", "INFO", 5),
        ev("10:12:00", "u2", "api", "ERROR", 6),
        ev("10:15:00", "u3", "web", "INFO", 7),
        ev("10:05:00", None, "db", "WARN", 4),     # null-user duplicate of batch 0
    ],
    # batch 2: late wm 09:55, evict wm 10:05. max 10:21 -> wm 10:11
    [
        ev("10:00:00", "u1", "api", "INFO", 1),    # duplicate, behind evict wm but not late
        ev("10:18:00", "u1", "db", "ERROR", 8),
        ev("10:21:00", "u4", "api", "INFO", 9),
        ev("10:20:00", "u2", "web", "WARN", 10),
        ev("09:50:00", "u5", "api", "INFO", 11),   # late: dropped
    ],
    # batch 3: late wm 10:05, evict wm 10:11. max 10:30 -> wm 10:20
    [
        ev("10:02:00", "u2", "web", "INFO", 2),    # late duplicate: dropped by watermark
        ev("10:03:00", "u5", "api", "INFO", 12),   # late: dropped
        ev("10:08:00", "u1", "api", "INFO", 5),    # duplicate, still in state
        ev("10:09:00", "u6", "db", "INFO", 13),    # behind evict wm, not late: emitted
        ev("10:30:00", "u3", "api", "ERROR", 14),
        ev("10:30:00", "u3", "api", "ERROR", 14),  # exact duplicate, same file
    ],
    # batch 4: late wm 10:11, evict wm 10:20. max 10:41 -> wm 10:31
    [
        ev("10:15:00", "u3", "web", "INFO", 7),    # duplicate of batch 1, still in state
        ev("10:12:00", "u2", "api", "ERROR", 6),   # duplicate of batch 1, still in state
        ev("10:10:00", "u1", "api", "INFO", 15),   # late: dropped
        ev("10:40:00", "u4", "web", "INFO", 16),
        ev("10:41:00", None, "api", "INFO", 17),
        ev("10:41:00", None, "api", "INFO", 17),   # null-user duplicate, same file
    ],
]

# dedup_within_watermark (["user"], 10 minutes) and dedup_no_watermark (["user"]).
USER_EVENTS = [
    # batch 0: max 10:06 -> wm 09:56
    [
        ev("10:00:00", "u1", "api", "INFO", 1),
        ev("10:02:00", "u2", "web", "INFO", 2),
        ev("10:04:00", "u1", "db", "ERROR", 3),    # same user, same file
        ev("10:05:00", None, "api", "WARN", 4),
        ev("10:06:00", None, "web", "INFO", 5),    # same (null) user
    ],
    # batch 1: late wm 0, evict wm 09:56. max 10:20 -> wm 10:10
    [
        ev("10:08:00", "u1", "api", "INFO", 6),    # u1 seen at 10:00 (expires 10:10)
        ev("10:12:00", "u3", "db", "INFO", 7),
        ev("10:20:00", "u4", "api", "ERROR", 8),
        ev("10:03:00", "u2", "web", "WARN", 9),    # u2 seen, this one is older
    ],
    # batch 2: late wm 09:56, evict wm 10:10. max 10:25 -> wm 10:15
    [
        ev("10:11:00", "u1", "web", "INFO", 10),
        ev("10:25:00", "u5", "api", "INFO", 11),
        ev("09:50:00", "u6", "db", "ERROR", 12),   # late: dropped
        ev("10:22:00", "u2", "api", "INFO", 13),
    ],
    # batch 3: late wm 10:10, evict wm 10:15. max 10:31 -> wm 10:21
    [
        ev("10:14:00", "u1", "db", "WARN", 14),
        ev("10:05:00", "u7", "api", "INFO", 15),   # late: dropped
        ev("10:30:00", "u3", "web", "INFO", 16),
        ev("10:31:00", "u8", "api", "ERROR", 17),
    ],
    # batch 4: late wm 10:15, evict wm 10:21. max 10:45 -> wm 10:35
    [
        ev("10:40:00", "u2", "web", "INFO", 18),
        ev("10:12:00", "u9", "api", "INFO", 19),   # late: dropped
        ev("10:45:00", "u5", "db", "INFO", 20),
        ev("10:41:00", None, "api", "ERROR", 21),
        ev("10:18:00", "u4", "web", "WARN", 22),
    ],
]

# session_complete_late: session windows with a 7-minute gap and a 10-minute
# watermark in complete mode. The newest event time advances 15 minutes per
# file (max 10:14, 10:29, 10:44, 10:59, 11:14, 11:29), so batch N runs with
# watermark max(N-1) - 10 and judges rows late against the previous batch's
# watermark ("late wm"): a row is dropped when its session end ts + 7 minutes
# is <= late wm. "n min late" is relative to the newest event of earlier files.
SESSION_LATE_EVENTS = [
    # batch 0: late wm 0, wm 0.  max 10:14
    # sessions u1 [10:00,10:19]; u2 [10:01,10:08] [10:10,10:20]; u3 [10:02,10:13] [10:14,10:21]
    [
        ev("10:00:00", "u1", "api", "INFO", 1),
        ev("10:01:00", "u2", "web", "INFO", 5),
        ev("10:02:00", "u3", "db", "INFO", 2),
        ev("10:04:00", "u1", "api", "ERROR", 3),
        ev("10:06:00", "u3", "db", "WARN", 7),
        ev("10:09:00", "u1", "web", "INFO", 2),
        ev("10:13:00", "u2", "api", "ERROR", 4),
        ev("10:12:00", "u1", "api", "INFO", 6),
        ev("10:14:00", "u3", "web", "INFO", 1),
        ev("10:10:00", "u2", "web", "INFO", 3),    # out of order in the file
    ],
    # batch 1: late wm 0, wm 10:04.  max 10:29
    [
        ev("10:17:00", "u1", "api", "INFO", 4),    # u1 [10:00,10:24]
        ev("10:05:00", "u2", "db", "WARN", 9),     # 9 min late, kept: bridges u2 [10:01,10:08] and [10:10,10:20]
        ev("10:18:00", "u3", "api", "INFO", 3),
        ev("10:23:00", "u2", "web", "INFO", 2),    # new u2 session (10:23 > 10:20)
        ev("10:21:00", "u3", "db", "ERROR", 4),    # u3 [10:14,10:28]
        ev("10:08:00", "u1", "web", "ERROR", 8),   # 6 min late, kept: inside u1 [10:00,10:24], max 8
        ev("10:27:00", "u1", "api", "INFO", 5),
        ev("10:26:00", "u2", "api", "INFO", 1),
        ev("10:29:00", "u3", "web", "INFO", 6),    # new u3 session (10:29 > 10:28)
    ],
    # batch 2: late wm 10:04, wm 10:19.  max 10:44
    [
        ev("09:57:00", "u1", "db", "ERROR", 9),    # 32 min late, end 10:04 == late wm: dropped (would extend u1 [10:00,10:24])
        ev("10:31:00", "u1", "api", "INFO", 2),
        ev("10:33:00", "u3", "web", "WARN", 5),
        ev("10:12:00", "u2", "api", "ERROR", 11),  # 17 min late, end 10:19 > late wm: kept, u2 [10:01,10:20] max 11
        ev("10:35:00", "u2", "db", "INFO", 3),
        ev("10:24:00", "u3", "api", "INFO", 9),    # 5 min late, kept: bridges u3 [10:14,10:28] and [10:29,10:36]
        ev("10:40:00", "u1", "web", "INFO", 7),
        ev("10:41:00", "u2", "api", "INFO", 1),
        ev("10:44:00", "u3", "db", "INFO", 2),
    ],
    # batch 3: late wm 10:19, wm 10:34.  max 10:59
    [
        ev("10:46:00", "u1", "api", "INFO", 3),
        ev("10:10:00", "u3", "db", "ERROR", 12),   # 34 min late, end 10:17 <= late wm: dropped (would bridge u3 [10:02,10:13] and [10:14,10:40])
        ev("10:48:00", "u3", "api", "INFO", 4),
        ev("10:50:00", "u2", "web", "INFO", 2),
        ev("10:30:00", "u2", "api", "WARN", 8),    # 14 min late, kept: bridges u2 [10:23,10:33] and [10:35,10:48]
        ev("10:53:00", "u2", "db", "INFO", 6),
        ev("10:55:00", "u1", "web", "ERROR", 1),
        ev("10:05:00", "u1", "api", "ERROR", 10),  # 39 min late, end 10:12 <= late wm: dropped (inside u1 [10:00,10:24], max stays 8)
        ev("10:58:00", "u1", "db", "INFO", 2),
        ev("10:59:00", "u3", "web", "INFO", 3),
    ],
    # batch 4: late wm 10:34, wm 10:49.  max 11:14
    [
        ev("11:00:00", "u1", "api", "INFO", 4),
        ev("10:20:00", "u2", "web", "ERROR", 7),   # 39 min late, end 10:27 <= late wm: dropped (would bridge u2 [10:01,10:20] and [10:23,10:48])
        ev("11:03:00", "u2", "api", "INFO", 5),
        ev("10:41:00", "u1", "db", "WARN", 9),     # 18 min late, end 10:48 > late wm: kept, u1 [10:40,10:53] max 9
        ev("11:05:00", "u3", "api", "INFO", 2),
        ev("10:49:00", "u2", "db", "INFO", 6),     # 10 min late, kept: extends u2 [10:50,11:00] to start 10:49
        ev("11:10:00", "u1", "web", "INFO", 6),
        ev("11:11:00", "u3", "db", "ERROR", 1),
        ev("11:14:00", "u2", "web", "INFO", 3),
    ],
    # batch 5: late wm 10:49, wm 11:04.  max 11:29; then a no-data batch, wm 11:19
    [
        ev("11:18:00", "u1", "api", "INFO", 2),
        ev("10:35:00", "u1", "web", "ERROR", 11),  # 39 min late, end 10:42 <= late wm: dropped (would bridge u1 [10:27,10:38] and [10:40,10:53])
        ev("11:16:00", "u2", "db", "INFO", 4),
        ev("11:20:00", "u3", "web", "INFO", 6),
        ev("10:55:00", "u2", "api", "WARN", 7),    # 19 min late, kept: extends u2 [10:49,11:00] to end 11:02
        ev("11:24:00", "u1", "db", "INFO", 1),
        ev("10:45:00", "u3", "api", "ERROR", 10),  # 29 min late, end 10:52 > late wm: kept, u3 [10:44,10:55] max 10
        ev("11:27:00", "u2", "web", "INFO", 7),
        ev("11:29:00", "u3", "db", "INFO", 5),
        ev("11:22:00", "u1", "api", "INFO", 3),
    ],
]

IMP_SCHEMA = "imp_ts TIMESTAMP, imp_ad STRING"
CLICK_SCHEMA = "click_ts TIMESTAMP, click_ad STRING"


def imp(ts, ad):
    return {"imp_ts": "2024-05-01 " + ts, "imp_ad": ad}


def click(ts, ad):
    return {"click_ts": "2024-05-01 " + ts, "click_ad": ad}


# Impressions watermark 10 minutes, clicks 20 minutes; global watermark = min.
# A click matches an impression of the same ad 0..5 minutes after it.
IMPRESSIONS = [
    [imp("10:00:00", "a1"), imp("10:02:00", "a2"), imp("10:05:00", "a3")],
    [imp("10:10:00", "a4"), imp("10:12:00", "a5"), imp("10:15:00", "a6")],
    [imp("10:20:00", "a7"), imp("10:22:00", "a8"), imp("10:25:00", "a9"), imp("10:24:00", "a1")],
    [imp("10:30:00", "a10"), imp("10:33:00", "a11"), imp("10:36:00", "a12")],
    [imp("10:45:00", "a13"), imp("10:48:00", "a14"), imp("10:01:00", "a15"),  # a15 late
     imp("10:50:00", "a16"),
     imp("10:12:00", "a17"), imp("10:09:00", "a18")],  # behind the watermark but not late
]
CLICKS = [
    [click("10:01:00", "a1"), click("10:03:00", "a1"), click("10:11:00", "a3")],  # a3 click too late to match
    [click("10:04:00", "a2"), click("10:13:00", "a4"), click("10:14:00", "a5")],
    [click("10:17:00", "a6"), click("10:23:00", "a7"), click("10:26:00", "a9"), click("10:27:00", "a1")],
    [click("10:31:00", "a10"), click("10:40:00", "a12"), click("10:34:00", "a11")],
    [click("10:46:00", "a13"), click("10:02:00", "a15"),  # a15 click late
     click("10:04:00", "a2"),  # late, although impression a2 (10:02) is still in state
     click("11:00:00", "a16"), click("10:15:00", "a17")],
]

# --------------------------------------------------------------------------
# Cases
# --------------------------------------------------------------------------

SINGLE_SOURCE = '''events = (spark.readStream.schema("{schema}")
          .option("maxFilesPerTrigger", 1).json(input_dir))
result = {expr}
query = (result.writeStream.outputMode("{mode}").trigger(availableNow=True)
         .option("checkpointLocation", checkpoint_dir)
         .foreachBatch(record_batch).start())'''

JOIN = '''impressions = (spark.readStream.schema("{left_schema}")
               .option("maxFilesPerTrigger", 1).json(left_dir)
               .withWatermark("imp_ts", "10 minutes"))
clicks = (spark.readStream.schema("{right_schema}")
          .option("maxFilesPerTrigger", 1).json(right_dir)
          .withWatermark("click_ts", "20 minutes"))
result = impressions.join(
    clicks,
    F.expr("click_ad = imp_ad AND click_ts >= imp_ts AND click_ts <= imp_ts + interval 5 minutes"),
    "{how}"){post}
query = (result.writeStream.outputMode("append").trigger(availableNow=True)
         .option("checkpointLocation", checkpoint_dir)
         .foreachBatch(record_batch).start())'''

CASES = [
    dict(
        case="tumbling_append",
        description="Count per 10-minute tumbling window with a 15-minute watermark; each window is emitted once, after the watermark passes its end.",
        inputs={"input": EVENTS}, schema=EVENTS_SCHEMA, mode="append", watermark=True,
        expr='events.withWatermark("ts", "15 minutes").groupBy(F.window("ts", "10 minutes")).count()',
        observations=[
            "Row 10:06 (batch 2) is behind batch 2's watermark 10:10 but not late, because rows are judged against the previous batch's watermark (09:57): it is counted, and window [10:00,10:10) is emitted in the same batch with count 6.",
            "numRowsDroppedByWatermark counts late window groups after partial aggregation: one per batch here (rows 09:41, 10:04, 10:15).",
            "A window closes when end <= watermark (batch 5, watermark 10:47, emits [10:30,10:40)); windows [10:40,10:50), [10:50,11:00) and [11:00,11:10) are never emitted.",
        ],
    ),
    dict(
        case="tumbling_update",
        description="Count per 10-minute tumbling window with a 15-minute watermark in update mode; every window changed by a batch is emitted with its new count.",
        inputs={"input": EVENTS}, schema=EVENTS_SCHEMA, mode="update", watermark=True,
        expr='events.withWatermark("ts", "15 minutes").groupBy(F.window("ts", "10 minutes")).count()',
        observations=[
            "Update mode emits each window changed by the batch, including one the same batch closes ([10:00,10:10) in batch 2, [10:10,10:20) in batch 3: end <= that batch's watermark). Eviction itself emits nothing, so the final no-data batch reaches foreachBatch with zero rows.",
        ],
    ),
    dict(
        case="complete_count",
        description="Running count per service without watermark in complete mode; every batch emits the whole result table.",
        inputs={"input": EVENTS}, schema=EVENTS_SCHEMA, mode="complete", watermark=False,
        expr='events.groupBy("service").count()',
        observations=[
            "No watermark, so no extra no-data batch: 5 batches for 5 files.",
        ],
    ),
    dict(
        case="error_monitor",
        description="ERROR events counted per service in 5-minute windows sliding by 1 minute, 10-minute watermark, append mode.",
        inputs={"input": EVENTS}, schema=EVENTS_SCHEMA, mode="append", watermark=True,
        expr=('events.filter(F.col("level") == "ERROR").withWatermark("ts", "10 minutes")\n'
              '    .groupBy(F.window("ts", "5 minutes", "1 minute"), "service").count()'),
        observations=[
            "filter comes before withWatermark, so the watermark follows ERROR rows only (batch 4 watermark 10:34 = 10:44 - 10 minutes; the WARN row at 10:47 does not count).",
            "Late rows are counted per (window, service) group: in batch 3 row 10:04/db has all 5 sliding windows late and row 10:12/web 3 of 5 (ends 10:13, 10:14, 10:15 <= late watermark 10:15; end == watermark counts as late), total 8.",
        ],
    ),
    dict(
        case="session_append",
        description="Count per user in session windows with a 5-minute gap and a 10-minute watermark, append mode: a session is emitted once the watermark passes its end.",
        inputs={"input": EVENTS}, schema=EVENTS_SCHEMA, mode="append", watermark=True,
        expr='events.withWatermark("ts", "10 minutes").groupBy(F.session_window("ts", "5 minutes"), "user").count()',
        observations=[],
    ),
    dict(
        case="session_complete",
        description="Count and sum per user in session windows with a 5-minute gap, complete mode (no watermark): sessions merge as events bridge them.",
        inputs={"input": EVENTS}, schema=EVENTS_SCHEMA, mode="complete", watermark=False,
        expr='events.groupBy(F.session_window("ts", "5 minutes"), "user").agg(F.count("*").alias("n"), F.sum("value").alias("total"))',
        observations=[],
    ),
    dict(
        case="session_complete_late",
        description="Count and max of value per user in session windows with a 7-minute gap and a 10-minute watermark, complete mode, with late rows.",
        inputs={"input": SESSION_LATE_EVENTS}, schema=EVENTS_SCHEMA, mode="complete", watermark=True,
        expr='events.withWatermark("ts", "10 minutes").groupBy(F.session_window("ts", "7 minutes"), "user").agg(F.count("*").alias("n"), F.max("value").alias("max_value"))',
        observations=[
            "Complete mode never runs the trailing no-data batch (nothing is evicted), so 6 files give 6 batches, and every session stays in the output to the end; numRowsRemoved counts only state keys replaced when a merge moves a session's start (bridges in batches 1-3, 10:49/u2 in batch 4).",
            "Late rows are still dropped in complete mode: a row is dropped when ts + 7 minutes <= the previous batch's watermark (end == watermark counts as late). numRowsDroppedByWatermark 1, 2, 1, 1 in batches 2-5 are 09:57/u1 (end 10:04 == late wm 10:04), 10:10/u3 and 10:05/u1, 10:20/u2, 10:35/u1.",
            "Dropped rows that would have bridged two sessions leave them apart: u3 [10:02,10:13] / [10:14,10:40] (10:10, batch 3), u2 [10:01,10:20] / [10:23,10:48] (10:20, batch 4), u1 [10:27,10:38] / [10:40,10:53] (10:35, batch 5). Late rows not that late merge normally: 10:05/u2, 10:24/u3 and 10:30/u2 bridge two sessions; 10:49/u2 moves a start earlier, 10:55/u2 an end later.",
            "Rows behind the batch's own watermark but not late are kept: 10:41/u1 in batch 4 (end 10:48, watermark 10:49) and 10:45/u3 in batch 5 (joins u3 [10:44,10:55], max_value 10, although that session ends before the watermark 11:04).",
            "numRowsUpdated equals numRowsTotal in every batch: all of a user's sessions are rewritten when the batch has rows for that user, and every user has rows in every file here.",
        ],
    ),
    dict(
        case="running_count_update",
        description="Running count and sum of value per user (null user is its own group) without watermark, update mode.",
        inputs={"input": EVENTS}, schema=EVENTS_SCHEMA, mode="update", watermark=False,
        expr='events.groupBy("user").agg(F.count("*").alias("n"), F.sum("value").alias("total"))',
        observations=[
            "The null user is one group. Update mode emits only groups changed by the batch (the null group is absent from batch 3). No watermark, so no extra no-data batch.",
        ],
    ),
    dict(
        case="aggs_update",
        description="count/sum/min/max/avg of value per 10-minute window and service with a 10-minute watermark, update mode.",
        inputs={"input": EVENTS}, schema=EVENTS_SCHEMA, mode="update", watermark=True,
        expr=('events.withWatermark("ts", "10 minutes").groupBy(F.window("ts", "10 minutes"), "service").agg(\n'
              '    F.count("*").alias("n"), F.sum("value").alias("sum"), F.min("value").alias("min"),\n'
              '    F.max("value").alias("max"), F.avg("value").alias("avg"))'),
        observations=[
            "avg is a double; count, sum, min and max are integers. Windows closed in a batch are still emitted by that batch if the batch changed them.",
        ],
    ),
    dict(
        case="dedup",
        description="Streaming dropDuplicates on (user, ts) with a 10-minute watermark, append mode; each distinct (user, ts) is emitted once, late rows are dropped.",
        inputs={"input": DEDUP_EVENTS}, schema=EVENTS_SCHEMA, mode="append", watermark=True,
        expr='events.withWatermark("ts", "10 minutes").dropDuplicates(["user", "ts"])',
        observations=[
            "(u1, 10:00) arrives again in batch 2, behind that batch's watermark 10:05 but not late (previous watermark 09:55): it is dropped as a duplicate, because state is evicted only after the batch's rows are processed. Keys with ts <= watermark are evicted (batch 2 removes 4, including the two 10:05 keys).",
            "(u6, 10:09) in batch 3 is behind the batch's watermark 10:11 but not late, and is emitted.",
            "Late rows count in numRowsDroppedByWatermark whether or not they are duplicates (batch 3: (u2, 10:02) duplicate and (u5, 10:03) new). A null user deduplicates like any other value.",
        ],
    ),
    dict(
        case="dedup_within_watermark",
        description="dropDuplicatesWithinWatermark on user with a 10-minute watermark, append mode; a user's state expires 10 minutes after the event time of its first kept row.",
        inputs={"input": USER_EVENTS}, schema=EVENTS_SCHEMA, mode="append", watermark=True,
        expr='events.withWatermark("ts", "10 minutes").dropDuplicatesWithinWatermark(["user"])',
        observations=[
            "State per user holds expiry = ts of the kept row + 10 minutes and is evicted when expiry <= watermark (u1, expiry 10:10, is removed in batch 2 at watermark 10:10). u1's 10:11 row in batch 2 is still dropped (eviction runs after the batch's rows); u1's 10:14 row in batch 3 is emitted again, as are u2 and the null user in batch 4.",
            "A later row of a known user with an older ts (u2 10:03 in batch 1) is dropped; the expiry stays that of the kept row.",
        ],
    ),
    dict(
        case="dedup_no_watermark",
        description="dropDuplicates on user without watermark, append mode; the first row of each user (null included) is emitted once, ever.",
        inputs={"input": USER_EVENTS}, schema=EVENTS_SCHEMA, mode="append", watermark=False,
        expr='events.dropDuplicates(["user"])',
        observations=[
            "Without a watermark nothing is late: rows 09:50 (u6), 10:05 (u7) and 10:12 (u9), dropped as late in dedup_within_watermark, are emitted here. Within a batch the first row of a user in file order is kept (u1 10:00, not 10:04). No extra no-data batch.",
        ],
    ),
    dict(
        case="join_inner",
        description="Stream-stream inner join of impressions (10-minute watermark) and clicks (20-minute watermark) on ad id with the click 0-5 minutes after the impression, append mode.",
        inputs={"input_left": IMPRESSIONS, "input_right": CLICKS},
        schema={"input_left": IMP_SCHEMA, "input_right": CLICK_SCHEMA}, mode="append", watermark=True,
        how="inner",
        observations=[
            "The global watermark is the min of the two inputs (clicks, 20 minutes behind, set it in every batch here).",
            "In batch 4 rows older than the previous batch's watermark (10:07) are dropped on both sides and counted once per row (3): impression a15, clicks a15 and a2. The a2 click is dropped although impression a2 (10:02) was still in state (the impression side keeps rows with imp_ts >= watermark - 5 minutes).",
            "Rows behind the current watermark but not late (a17 10:12 / click 10:15 in batch 4) still join.",
        ],
    ),
    dict(
        case="join_then_window",
        description="The inner join of join_inner, then a count per 10-minute tumbling window of the impression time, append mode: the aggregation after the join gets the join's output watermark (the global one minus the 5-minute range minus 1 ms), not the global one.",
        inputs={"input_left": IMPRESSIONS, "input_right": CLICKS},
        schema={"input_left": IMP_SCHEMA, "input_right": CLICK_SCHEMA}, mode="append", watermark=True,
        how="inner",
        post='.groupBy(F.window("imp_ts", "10 minutes")).count()',
        observations=[
            "A window [s, s+10m) is emitted once the global watermark passes s + 10 minutes + 5 minutes + 1 ms (the join may still emit pairs with imp_ts down to watermark - 5 minutes - 1 ms), one batch later than with the global watermark.",
        ],
    ),
    dict(
        case="join_left_semi",
        description="The join of join_inner as a left semi join: each impression with a click is emitted once, the first time it matches.",
        inputs={"input_left": IMPRESSIONS, "input_right": CLICKS},
        schema={"input_left": IMP_SCHEMA, "input_right": CLICK_SCHEMA}, mode="append", watermark=True,
        how="leftSemi",
    ),
    dict(
        case="join_left_semi_boundary",
        description="Left semi join, the same condition: after batch 0 the watermark is 10:20, and in batch 1 each impression's only click arrives with it. A click at or behind the right side's state watermark (10:20 minus 1 ms, the latest click time that the condition `click_ts >= imp_ts` lets no future impression match) matches nothing; a click at 10:20 or later does.",
        inputs={
            "input_left": [
                [imp("10:30:00", "x")],
                [imp("10:17:00", "g"), imp("10:17:00", "h"), imp("10:18:00", "e"), imp("10:17:00", "f")],
                [imp("10:05:00", "late")],
            ],
            "input_right": [
                [click("10:40:00", "y")],
                [click("10:20:00", "g"), click("10:19:59.999", "h"), click("10:22:00", "e"), click("10:19:00", "f")],
                [click("10:41:00", "z")],
            ],
        },
        schema={"input_left": IMP_SCHEMA, "input_right": CLICK_SCHEMA}, mode="append", watermark=True,
        how="leftSemi",
        observations=[
            "Batch 1 emits g (click 10:20:00.000) and e (click 10:22), not h (click 10:19:59.999) nor f (click 10:19), although an inner join emits all four pairs.",
        ],
    ),
    dict(
        case="join_left_outer",
        description="Same join as join_inner but left outer: impressions without a click are emitted with null click columns once the watermark lets Spark evict them.",
        inputs={"input_left": IMPRESSIONS, "input_right": CLICKS},
        schema={"input_left": IMP_SCHEMA, "input_right": CLICK_SCHEMA}, mode="append", watermark=True,
        how="leftOuter",
        observations=[
            "Unmatched impressions are emitted with null click columns when the watermark evicts them (imp_ts < watermark - 5 minutes): a3 and a18 in batch 4 (a18 arrived in that batch, behind the watermark, and is evicted at once), a8 in the final no-data batch. The unmatched impressions a14 (10:48) and a16 (10:50) are still in state at the end and never emitted; the late impression a15 is dropped, not null-padded.",
        ],
    ),
]


def query_text(c):
    if "how" in c:
        return JOIN.format(left_schema=c["schema"]["input_left"], right_schema=c["schema"]["input_right"],
                           how=c["how"], post=c.get("post", ""))
    expr = c["expr"]
    if "\n" in expr:
        expr = "(" + expr.replace("\n", "\n    ") + ")"
    return SINGLE_SOURCE.format(schema=c["schema"], expr=expr, mode=c["mode"])


# --------------------------------------------------------------------------
# Running
# --------------------------------------------------------------------------

def write_inputs(case_dir, inputs):
    """Write the committed input files (deterministic, overwriting)."""
    for sub, files in inputs.items():
        d = os.path.join(case_dir, sub)
        if os.path.isdir(d):
            shutil.rmtree(d)
        os.makedirs(d)
        for i, rows in enumerate(files):
            with open(os.path.join(d, "%04d.json" % i), "w") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")


def stage_inputs(src, dst):
    """Copy src/*.json to dst with strictly increasing mtimes in name order."""
    os.makedirs(dst)
    base = int(datetime.datetime.now().timestamp()) - 3600
    for i, name in enumerate(sorted(n for n in os.listdir(src) if n.endswith(".json"))):
        p = os.path.join(dst, name)
        shutil.copyfile(os.path.join(src, name), p)
        os.utime(p, (base + 10 * i, base + 10 * i))


def fmt_value(v):
    from pyspark.sql import Row
    if v is None:
        return None
    if isinstance(v, Row):
        return {k: fmt_value(x) for k, x in v.asDict().items()}
    if isinstance(v, datetime.datetime):
        s = v.strftime("%Y-%m-%d %H:%M:%S")
        if v.microsecond:
            s += (".%06d" % v.microsecond).rstrip("0")
        return s
    if isinstance(v, datetime.date):
        return v.isoformat()
    return v


def sort_key(row):
    return [json.dumps(v, sort_keys=True) for v in row.values()]


def progress_summary(p, n_sources):
    out = {"batchId": p["batchId"], "numInputRows": p["numInputRows"]}
    if n_sources > 1:
        out["sourceNumInputRows"] = [s["numInputRows"] for s in p["sources"]]
    wm = p.get("eventTime", {}).get("watermark")
    if wm is not None:
        out["watermark"] = wm
    ops = []
    for op in p.get("stateOperators", []):
        o = {"operatorName": op.get("operatorName")}
        for k in ("numRowsTotal", "numRowsUpdated", "numRowsDroppedByWatermark", "numRowsRemoved"):
            if k in op:
                o[k] = op[k]
        ops.append(o)
    out["stateOperators"] = ops
    return out


def run_case(spark, c, tmp_root):
    from pyspark.sql import functions as F

    case_dir = os.path.join(HERE, c["case"])
    os.makedirs(case_dir, exist_ok=True)
    write_inputs(case_dir, c["inputs"])

    work = os.path.join(tmp_root, c["case"])
    dirs = {}
    for sub in c["inputs"]:
        dirs[sub] = os.path.join(work, sub)
        stage_inputs(os.path.join(case_dir, sub), dirs[sub])

    recorded = []  # (batch_id, rows) in call order

    def record_batch(df, batch_id):
        cols = df.columns
        rows = [{col: fmt_value(r[i]) for i, col in enumerate(cols)} for r in df.collect()]
        rows.sort(key=sort_key)
        recorded.append((batch_id, rows))

    text = query_text(c)
    ns = {
        "spark": spark, "F": F, "record_batch": record_batch,
        "checkpoint_dir": os.path.join(work, "checkpoint"),
        "input_dir": dirs.get("input"),
        "left_dir": dirs.get("input_left"), "right_dir": dirs.get("input_right"),
    }
    notes = []
    try:
        exec(text, ns)
        query = ns["query"]
        query.awaitTermination()
        progress = [json.loads(p.json) for p in query.recentProgress]
    except Exception as e:  # record a refusal instead of dying
        notes.append("Spark refused or failed: %s: %s" % (type(e).__name__, str(e).splitlines()[0]))
        progress = []

    n_sources = len(c["inputs"])
    by_batch = {}
    for p in progress:
        if p["batchId"] in by_batch:
            notes.append("recentProgress holds more than one entry for batch %d; the last is kept" % p["batchId"])
        by_batch[p["batchId"]] = progress_summary(p, n_sources)

    calls = {}
    for bid, rows in recorded:
        if bid in calls:
            notes.append("foreachBatch was called more than once for batch %d" % bid)
        calls[bid] = rows

    batches = []
    for bid in sorted(set(calls) | set(by_batch)):
        b = {"batch_id": bid}
        if bid in calls:
            b["rows"] = calls[bid]
        else:
            b["rows"] = None
            notes.append("batch %d appears in progress but foreachBatch was not called for it" % bid)
        if bid in by_batch:
            b["progress"] = by_batch[bid]
        else:
            notes.append("batch %d reached foreachBatch but has no progress entry" % bid)
        batches.append(b)

    n_files = len(next(iter(c["inputs"].values())))
    no_data = [b["batch_id"] for b in batches if b.get("progress", {}).get("numInputRows") == 0]
    if no_data:
        notes.append("batches %s are no-data batches (numInputRows 0) that Spark ran after the %d input files; "
                     "foreachBatch was called for them%s" % (
                         no_data, n_files,
                         "" if all(calls.get(i) is not None for i in no_data) else " (NOT for all)"))
    elif c["watermark"] and progress:
        notes.append("no trailing no-data batch was run")

    schema = c["schema"]
    doc = {
        "case": c["case"],
        "description": c["description"],
        "pyspark": text,
        "schema": schema,
        "output_mode": c["mode"],
        "batches": batches,
    }
    notes += c.get("observations", [])
    if notes:
        doc["notes"] = notes
    with open(os.path.join(case_dir, "expected.json"), "w") as f:
        json.dump(doc, f, indent=2)
        f.write("\n")
    return doc


def summarize(doc):
    batches = doc["batches"]
    n_rows = sum(len(b["rows"] or []) for b in batches)
    dropped = [sum(op.get("numRowsDroppedByWatermark", 0) for op in b.get("progress", {}).get("stateOperators", []))
               for b in batches]
    return n_rows, dropped


def check(c, doc):
    """Fixture sanity: valid JSON on disk, has output, watermark cases drop something."""
    with open(os.path.join(HERE, c["case"], "expected.json")) as f:
        reread = json.load(f)
    assert reread == doc, c["case"]
    n_rows, dropped = summarize(doc)
    problems = []
    if not doc["batches"] or n_rows == 0:
        problems.append("no output rows")
    if c["watermark"] and sum(dropped) == 0:
        problems.append("watermark case without any row dropped by watermark")
    if "notes" in doc and any("refused" in n for n in doc["notes"]):
        problems.append("query failed")
    return problems


def main():
    os.environ.setdefault("TZ", "UTC")
    from pyspark.sql import SparkSession
    import pyspark

    if pyspark.__version__ != PYSPARK_VERSION:
        print("expected PySpark %s, found %s" % (PYSPARK_VERSION, pyspark.__version__), file=sys.stderr)
        return 2

    only = set(sys.argv[1:])
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("pipelines-stateful-fixtures")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.numRecentProgressUpdates", "10000")
        .config("spark.ui.enabled", "false")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    tmp_root = tempfile.mkdtemp(prefix="stateful-fixtures-")
    failed = False
    try:
        for c in CASES:
            if only and c["case"] not in only:
                continue
            doc = run_case(spark, c, tmp_root)
            n_rows, dropped = summarize(doc)
            problems = check(c, doc)
            failed |= bool(problems)
            print("%-24s batches=%d rows=%d droppedByWatermark=%s%s" % (
                c["case"], len(doc["batches"]), n_rows, dropped,
                ("  PROBLEMS: " + "; ".join(problems)) if problems else ""))
    finally:
        spark.stop()
        shutil.rmtree(tmp_root, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
