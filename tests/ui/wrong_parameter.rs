use pipelines::{append_flow, table, DataFrame, Result, Session};

#[append_flow(target = "events")]
fn by_value(s: Session) -> Result<DataFrame> {
    let _ = s;
    Err(pipelines::Error::Usage("test".into()))
}

#[table]
fn mutable(_s: &mut Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[table]
fn none() -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[table]
fn two(_s: &Session, _n: usize) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[table]
fn other_type(_s: &str) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
