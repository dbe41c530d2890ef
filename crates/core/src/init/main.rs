// A starter pipeline written by `init`: JSON events → clicks only → a table.
use pipelines as dp;
use dp::prelude::*;

/// Raw events, picked up file by file from `data/events`.
#[dp::table(comment = "raw click and view events")]
fn events(s: &Session) -> Result<DataFrame> {
    s.read_stream()
        .format("json")
        .schema("ts TIMESTAMP, user_id STRING, action STRING, value BIGINT")
        .option("maxFilesPerTrigger", "1")
        .load("data/events")
}

/// Clicks only, appended to the `clicks` table declared in pipeline.yml.
#[dp::append_flow(target = "clicks")]
fn only_clicks(s: &Session) -> Result<DataFrame> {
    s.read_stream_table("events")?
        .filter("action = 'click'")?
        .select_expr(["ts", "user_id", "value"])
}

fn main() -> std::process::ExitCode {
    dp::main()
}
