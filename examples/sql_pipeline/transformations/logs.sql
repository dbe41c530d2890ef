-- Raw application logs, picked up file by file from ../data/logs.
CREATE STREAMING TABLE logs
COMMENT 'raw application logs'
AS SELECT * FROM STREAM read_files(
  '../data/logs',
  format => 'json',
  schema => 'ts TIMESTAMP, service_name STRING, level STRING, msg STRING',
  maxFilesPerTrigger => 1
);

-- ERROR lines only, kept as they are.
CREATE STREAMING TABLE errors
COMMENT 'error lines only'
AS SELECT * FROM STREAM(logs) WHERE level = 'ERROR';

-- Every error line on the console while developing (a sink of the spec).
CREATE FLOW print_errors AS INSERT INTO errors_console BY NAME
SELECT ts, service_name, msg FROM STREAM(errors);
