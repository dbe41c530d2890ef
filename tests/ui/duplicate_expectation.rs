use pipelines::{table, DataFrame, Result, Session};

#[pipelines::expect("valid_id", "id IS NOT NULL")]
#[table]
#[pipelines::expect_all_or_drop(positive = "amount > 0", "valid_id" = "id > 0")]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[table]
#[pipelines::expect_or_fail("", " ")]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
