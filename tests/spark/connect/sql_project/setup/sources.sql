-- Run before the pipeline, as ordinary SQL commands on the same Spark
-- Connect server (not part of the pipeline: its SQL files may hold only
-- CREATE STREAMING TABLE / MATERIALIZED VIEW / FLOW / TEMPORARY VIEW, SET
-- and USE). __DATA__ stands for the absolute path of the data directory.
CREATE TABLE IF NOT EXISTS impressions_src (impression_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING, country STRING)
USING json LOCATION '__DATA__/impressions';

CREATE TABLE IF NOT EXISTS clicks_src (click_id STRING, ts TIMESTAMP, ad_id STRING, user_id STRING)
USING json LOCATION '__DATA__/clicks';
