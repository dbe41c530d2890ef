-- A starter pipeline written by `init --sql`: JSON events → clicks only.
-- Run it with `pipelines dry-run`, then `pipelines run`.

-- Raw events, picked up file by file from data/events.
CREATE STREAMING TABLE events
COMMENT 'raw click and view events'
AS SELECT * FROM STREAM read_files(
  'data/events',
  format => 'json',
  schema => 'ts TIMESTAMP, user_id STRING, action STRING, value BIGINT',
  maxFilesPerTrigger => 1
);

-- Clicks only.
CREATE STREAMING TABLE clicks
COMMENT 'click events only'
AS SELECT ts, user_id, value FROM STREAM(events) WHERE action = 'click';
