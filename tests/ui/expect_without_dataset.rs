use pipelines::{DataFrame, Result, Session};

#[pipelines::expect_or_drop("positive", "amount > 0")]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
