use pipelines::{table, DataFrame, Result, Session};

#[table]
#[pipelines::expect("valid_id")]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[pipelines::expect_or_drop("positive", "amount > 0", "drop")]
#[table]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[table]
#[pipelines::expect_or_fail(has_ts, "ts IS NOT NULL")]
fn h(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
