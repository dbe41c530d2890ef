use pipelines::{append_flow, Session};

#[append_flow(target = "events")]
fn f(_s: &Session) {}

fn main() {}
