use pipelines::{append_flow, table, DataFrame, Result, Session};

#[append_flow(target = "", name = " ")]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[table(partition_cols = ["day", "", "day"])]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
