use pipelines::{append_flow, DataFrame, Result, Session};

#[append_flow(target = "events")]
fn f<T: Default>(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
