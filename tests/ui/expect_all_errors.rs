use pipelines::{append_flow, DataFrame, Result, Session};

#[append_flow(target = "events")]
#[pipelines::expect_all(valid_id = "id IS NOT NULL", positive = amount > 0)]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[pipelines::expect_all_or_fail("id IS NOT NULL")]
#[append_flow(target = "events")]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[append_flow(target = "events")]
#[pipelines::expect_all_or_drop()]
fn h(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
