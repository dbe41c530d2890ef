-- Errors and warnings, parsed; a materialized view over them.
CREATE STREAMING TABLE errors
COMMENT 'Events whose level is not INFO, with ts cast to a timestamp'
AS SELECT CAST(ts AS TIMESTAMP) AS event_time, user_id, service_name, level, value
FROM STREAM(raw_events)
WHERE level <> 'INFO';

CREATE MATERIALIZED VIEW errors_by_service AS
SELECT service_name, count(*) AS n, sum(value) AS total
FROM errors
GROUP BY service_name;
