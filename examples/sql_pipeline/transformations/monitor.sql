-- Errors per service in 5-minute windows sliding every minute, appended
-- once the 10-minute watermark closes a window.
CREATE STREAMING TABLE error_counts
COMMENT 'errors per service, 5-minute windows sliding every minute'
AS SELECT window.start AS window_start, window.end AS window_end, service_name, count(*) AS errors
FROM STREAM(errors) WATERMARK ts DELAY OF INTERVAL 10 MINUTES
GROUP BY window(ts, '5 minutes', '1 minute'), service_name;

-- Errors per service over everything so far, recomputed on every run.
CREATE MATERIALIZED VIEW errors_by_service
COMMENT 'errors per service, all time'
AS SELECT service_name, count(*) AS errors, min(ts) AS first_seen, max(ts) AS last_seen
FROM errors
GROUP BY service_name
ORDER BY errors DESC, service_name;
