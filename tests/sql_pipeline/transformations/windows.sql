-- A temporary view feeding streaming tables: a filter, a watermarked
-- windowed count (append mode), and two explicit flows into one table.
-- raw_events is a streaming table, complete before these flows start;
-- maxFilesPerTrigger 1 makes them read it one upstream micro-batch (one
-- input file) at a time, so the watermark advances file by file.
CREATE TEMPORARY VIEW parsed AS
SELECT CAST(ts AS TIMESTAMP) AS event_time, user_id, service_name, value
FROM STREAM(raw_events) WITH ('maxFilesPerTrigger' = 1);

CREATE STREAMING TABLE api_events AS
SELECT * FROM STREAM(parsed) WHERE service_name = 'api';

CREATE STREAMING TABLE counts_10m AS
SELECT window.start AS window_start, window.end AS window_end, service_name, count(*) AS n
FROM STREAM(parsed) WATERMARK event_time DELAY OF INTERVAL 10 MINUTES
GROUP BY window(event_time, '10 minutes'), service_name;

CREATE STREAMING TABLE big_values;

CREATE FLOW big_api AS INSERT INTO big_values BY NAME
SELECT event_time, user_id, value FROM STREAM(parsed)
WHERE value > 900 AND service_name = 'api';

CREATE FLOW big_web AS INSERT INTO big_values BY NAME
SELECT user_id, value, event_time FROM STREAM(parsed)
WHERE value > 900 AND service_name = 'web';
