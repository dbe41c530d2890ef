use pipelines::{append_flow, DataFrame, Result, Session};

#[append_flow(target = "events")]
async fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
