use pipelines::{append_flow, table, DataFrame, Result, Session};

#[append_flow(target = "events")]
fn f(_s: &Session) -> Result<i32> {
    Ok(1)
}

#[table]
fn g(_s: &Session) -> DataFrame {
    todo!()
}

fn main() {}
