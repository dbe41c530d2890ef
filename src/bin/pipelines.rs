//! `pipelines`: runs a pipeline project of YAML and SQL files without
//! compiling it, like `spark-pipelines`. Every connector is compiled in.
//!
//! ```text
//! pipelines init --name my_pipeline --sql
//! cd my_pipeline && pipelines dry-run && pipelines run
//! ```

// Linking the connector and SQL crates registers them.
use pipelines as _;

fn main() -> std::process::ExitCode {
    pipelines::main()
}
