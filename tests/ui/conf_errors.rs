use pipelines::{append_flow, DataFrame, Result, Session};

#[append_flow(target = "t", conf("a" = 5, "b" = "x", "b" = "y"))]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[append_flow(target = "t", conf = "a=b")]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[append_flow(target = "t", conf(pipelines.trigger = "RealTime"))]
fn h(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
