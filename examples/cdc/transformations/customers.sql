-- The change feed: inserts, updates and deletes of customers, out of order.
CREATE STREAMING TABLE customers_cdc
COMMENT 'change events as they arrive'
AS SELECT * FROM STREAM read_files(
  'data/changes',
  format => 'json',
  schema => 'id BIGINT, name STRING, city STRING, operation STRING, seq BIGINT'
);

-- The latest row of each customer (SCD type 1); a delete removes it.
CREATE STREAMING TABLE customers
COMMENT 'one row per customer, as of the latest event'
FLOW AUTO CDC FROM STREAM(customers_cdc)
KEYS (id)
APPLY AS DELETE WHEN operation = 'DELETE'
SEQUENCE BY seq
COLUMNS * EXCEPT (operation, seq);
