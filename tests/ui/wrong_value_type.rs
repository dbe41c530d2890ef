use pipelines::{append_flow, table, DataFrame, Result, Session};

#[append_flow(target = 5, once = "yes")]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

const TARGET: &str = "events";

#[append_flow(target = TARGET, name)]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[table(partition_cols = "day", schema = ["id STRING"])]
fn h(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
