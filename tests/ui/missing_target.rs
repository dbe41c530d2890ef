use pipelines::{append_flow, update_flow, DataFrame, Result, Session};

#[append_flow(name = "f", once = true)]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[update_flow]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
