-- The JSON files, one file per micro-batch.
CREATE STREAMING TABLE impressions
COMMENT 'ad impressions, one JSON file per micro-batch'
AS SELECT * FROM STREAM read_files(
  'data/impressions',
  format => 'json',
  schema => 'impression_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING, country STRING',
  maxFilesPerTrigger => 1
);

CREATE STREAMING TABLE clicks
AS SELECT * FROM STREAM read_files(
  'data/clicks',
  format => 'json',
  schema => 'click_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING',
  maxFilesPerTrigger => 1
);
