use pipelines::{table, DataFrame, Result, Session};

#[table(name = "a", comment = "x", name = "b")]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
