use pipelines::{update_flow, DataFrame, Result, Session};

#[update_flow(target = "sink", once = true)]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
