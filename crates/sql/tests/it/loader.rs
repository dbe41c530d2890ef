//! What the loader makes of a file's statements: the datasets' expectations
//! and quarantines, and the problems it reports.

use pipelines_core::{Diagnostic, Expectation, Origin};
use pipelines_sql::loader::declarations;
use pipelines_sql::parse_file;

const FILE: &str = "transformations/orders.sql";

/// A library origin in [`FILE`].
fn at(line: usize, column: usize) -> Option<Origin> {
    Some(Origin::Library {
        file: FILE.to_string(),
        line,
        column,
    })
}

fn load(text: &str) -> pipelines_core::library::LibraryDeclarations {
    let file = parse_file(FILE, text).unwrap_or_else(|e| panic!("{}", e[0]));
    match declarations(&file) {
        Ok(d) => d,
        Err(problems) => panic!("{problems:#?}"),
    }
}

fn problems(text: &str) -> Vec<Diagnostic> {
    let file = parse_file(FILE, text).unwrap_or_else(|e| panic!("{}", e[0]));
    match declarations(&file) {
        Ok(_) => panic!("loaded without a problem"),
        Err(problems) => problems,
    }
}

#[test]
fn constraints_become_the_datasets_expectations_and_quarantine() {
    let text = "\
CREATE OR REFRESH STREAMING TABLE orders (
  id BIGINT,
  CONSTRAINT valid_id EXPECT (id IS NOT NULL),
  CONSTRAINT Positive EXPECT (amount > 0) ON VIOLATION DROP ROW,
  CONSTRAINT has_ts EXPECT (ts IS NOT NULL) ON VIOLATION FAIL UPDATE,
    CONSTRAINT known EXPECT (kind IN ('a', 'b')) ON VIOLATION QUARANTINE TO Bad_Orders
) AS SELECT * FROM STREAM(raw_orders);
CREATE MATERIALIZED VIEW totals (CONSTRAINT non_negative EXPECT (total >= 0))
AS SELECT sum(amount) AS total FROM orders";
    let d = load(text);
    assert_eq!(d.datasets.len(), 2);
    let orders = &d.datasets[0];
    assert_eq!(orders.name, "orders");
    assert_eq!(orders.schema.as_deref(), Some("`id` BIGINT"));
    assert_eq!(
        orders.expectations,
        vec![
            Expectation::warn("valid_id", "id IS NOT NULL").at(at(3, 3)),
            Expectation::drop("Positive", "amount > 0").at(at(4, 3)),
            Expectation::fail("has_ts", "ts IS NOT NULL").at(at(5, 3)),
            Expectation::drop("known", "kind IN ('a', 'b')").at(at(6, 5)),
        ]
    );
    assert_eq!(orders.quarantine.as_deref(), Some("Bad_Orders"));
    let totals = &d.datasets[1];
    assert_eq!(totals.name, "totals");
    assert_eq!(totals.schema, None);
    assert_eq!(
        totals.expectations,
        vec![Expectation::warn("non_negative", "total >= 0").at(at(8, 34))]
    );
    assert_eq!(totals.quarantine, None);
    // The flows are those of the queries, as without expectations.
    assert_eq!(d.flows.len(), 2);
}

#[test]
fn one_quarantine_per_dataset() {
    // The same quarantine twice is one quarantine.
    let d = load(
        "CREATE STREAMING TABLE orders (\n\
         CONSTRAINT a EXPECT (x > 0) ON VIOLATION QUARANTINE TO bad,\n\
         CONSTRAINT b EXPECT (y > 0) ON VIOLATION QUARANTINE TO bad)",
    );
    assert_eq!(d.datasets[0].quarantine.as_deref(), Some("bad"));
    assert_eq!(d.datasets[0].expectations.len(), 2);
    let text = "\
CREATE STREAMING TABLE orders (
  CONSTRAINT a EXPECT (x > 0) ON VIOLATION QUARANTINE TO bad_a,
  CONSTRAINT b EXPECT (y > 0) ON VIOLATION DROP ROW,
  CONSTRAINT c EXPECT (z > 0) ON VIOLATION QUARANTINE TO bad_c
) AS SELECT * FROM STREAM(raw)";
    assert_eq!(
        problems(text),
        vec![Diagnostic::new(
            "`orders` quarantines rows to both `bad_a` and `bad_c`; a dataset has one quarantine"
        )
        .origin(at(4, 3))
        .help("send every quarantined row of `orders` to one table: `ON VIOLATION QUARANTINE TO bad_a`")]
    );
}
