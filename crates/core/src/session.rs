//! The context a flow function receives: configuration and the readers.
//!
//! ```
//! use pipelines_core::Session;
//! let s = Session::new().with_conf([("source.dir", "data/logs")]);
//! assert_eq!(s.conf("source.dir"), Some("data/logs"));
//! let df = s.read_stream_table("logs").unwrap();
//! assert!(df.is_streaming());
//! ```

use std::collections::BTreeMap;

use crate::error::Result;
use crate::plan::reader::DataStreamReader;
use crate::plan::DataFrame;

/// What a flow function receives: the pipeline configuration (merged with the
/// flow's own `conf`), the name of the flow being built, and the readers.
#[derive(Debug, Clone, Default)]
pub struct Session {
    conf: BTreeMap<String, String>,
    flow_name: Option<String>,
}

impl Session {
    /// A session with no configuration.
    pub fn new() -> Self {
        Session::default()
    }

    /// Adds configuration entries (later entries override earlier ones).
    pub fn with_conf<K, V>(mut self, conf: impl IntoIterator<Item = (K, V)>) -> Self
    where
        K: Into<String>,
        V: Into<String>,
    {
        for (k, v) in conf {
            self.conf.insert(k.into(), v.into());
        }
        self
    }

    /// Sets the name of the flow being built.
    pub fn with_flow_name(mut self, name: impl Into<String>) -> Self {
        self.flow_name = Some(name.into());
        self
    }

    /// A configuration value.
    pub fn conf(&self, key: &str) -> Option<&str> {
        self.conf.get(key).map(String::as_str)
    }

    /// Every configuration entry.
    pub fn conf_map(&self) -> &BTreeMap<String, String> {
        &self.conf
    }

    /// The name of the flow being built, when known.
    pub fn flow_name(&self) -> Option<&str> {
        self.flow_name.as_deref()
    }

    /// A reader for a streaming source (Spark's `spark.readStream`).
    pub fn read_stream(&self) -> DataStreamReader {
        DataStreamReader::new(true)
    }

    /// A reader for a batch source (Spark's `spark.read`).
    pub fn read(&self) -> DataStreamReader {
        DataStreamReader::new(false)
    }

    /// Reads a dataset of the pipeline as a stream (new rows only, Spark's
    /// `spark.readStream.table(name)`). The dataset's schema is looked up
    /// when the plan is resolved.
    pub fn read_stream_table(&self, name: &str) -> Result<DataFrame> {
        crate::plan::reader::dataset_read(name, true)
    }

    /// Reads the full current contents of a dataset (Spark's `spark.read.table(name)`).
    pub fn read_table(&self, name: &str) -> Result<DataFrame> {
        crate::plan::reader::dataset_read(name, false)
    }
}
