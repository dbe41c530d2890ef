-- Our engine's raw source (OSS Spark has no read_files; it uses spark/raw_events.py).
CREATE STREAMING TABLE raw_events AS
SELECT * FROM STREAM read_files(
  'data/events',
  format => 'json',
  schema => 'ts STRING, user_id STRING, service_name STRING, level STRING, value BIGINT',
  maxFilesPerTrigger => 1
);
