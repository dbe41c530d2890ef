use pipelines::{append_flow, DataFrame, Result};

struct S;

impl S {
    #[append_flow(target = "events")]
    fn f(&self) -> Result<DataFrame> {
        Err(pipelines::Error::Usage("test".into()))
    }
}

fn main() {}
