use pipelines::{append_flow, table, DataFrame, Result, Session};

#[append_flow(targte = "events")]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[append_flow(target = "events", trigger = "RealTime")]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[table(partition_by = ["day"], target = "events")]
fn h(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
