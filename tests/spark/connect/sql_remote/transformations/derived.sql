-- A temporary view, a filter with a computed column, a watermarked
-- windowed count (append mode), a materialized view, and an explicit flow
-- into a streaming table declared without a query.
CREATE TEMPORARY VIEW us_impressions_v AS
SELECT impression_id, ts, ad_id, user_id, concat_ws('/', ad_id, country) AS ad_country
FROM STREAM(impressions) WITH ('maxFilesPerTrigger' = 1)
WHERE country = 'US';

CREATE STREAMING TABLE us_impressions AS SELECT * FROM STREAM(us_impressions_v);

CREATE STREAMING TABLE impressions_per_minute AS
SELECT window.start AS window_start, window.end AS window_end, country, count(*) AS n
FROM STREAM(impressions) WITH ('maxFilesPerTrigger' = 1) WATERMARK ts DELAY OF INTERVAL 30 SECONDS
GROUP BY window(ts, '1 minute'), country;

CREATE MATERIALIZED VIEW clicks_per_ad AS
SELECT ad_id, count(*) AS clicks, min(ts) AS first_click
FROM clicks
GROUP BY ad_id;

CREATE STREAMING TABLE click_log;

CREATE FLOW click_log_flow AS INSERT INTO click_log BY NAME
SELECT click_id, user_id, ad_id, ts FROM STREAM(clicks);
