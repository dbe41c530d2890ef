use pipelines::{temporary_view, DataFrame, Result, Session};

#[temporary_view(name = "v", path = "/data/v")]
fn f(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

#[temporary_view(quarantine = "bad_rows")]
fn g(_s: &Session) -> Result<DataFrame> {
    Err(pipelines::Error::Usage("test".into()))
}

fn main() {}
