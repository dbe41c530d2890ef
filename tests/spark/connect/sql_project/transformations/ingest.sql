-- Streaming tables over the external JSON tables, one file per micro-batch.
CREATE STREAMING TABLE impressions
COMMENT 'ad impressions, one JSON file per micro-batch'
AS SELECT * FROM STREAM(impressions_src) WITH ('maxFilesPerTrigger' = 1);

CREATE STREAMING TABLE clicks
AS SELECT * FROM STREAM(clicks_src) WITH ('maxFilesPerTrigger' = 1);
