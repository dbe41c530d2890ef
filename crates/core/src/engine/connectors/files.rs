//! The file connectors: `json`, `csv`, `parquet` and `text` files read by
//! the file source ([`FileSource`]); `parquet`, `json` and `csv` written by
//! the file sink ([`FileSink`]) with its `_spark_metadata` manifest. Tables
//! stored in these formats are read back through the manifest.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use arrow::datatypes::{Field, Schema, SchemaRef};

use super::{request_path, require_path, APPEND_ONLY};
use crate::connector::{
    Connector, ConnectorRegistration, DeclaredRead, SinkConnector, SourceConnector, SourceRequest,
};
use crate::engine::sink::{Sink, SinkContext};
use crate::engine::sinks::file::check_sink_options;
use crate::engine::sinks::FileSink;
use crate::engine::source::Source;
use crate::engine::sources::file::FileSourceOptions;
use crate::engine::sources::{FileFormat, FileSource};
use crate::error::{PlanError, Result};
use crate::formats::OutputMode;
use crate::options::{OptionDecl, OptionKind::*, OptionSet, Options};

const PATH: OptionDecl = OptionDecl::new(
    "path",
    Text,
    "the directory, file or glob to read, local or `s3://bucket/prefix`; `col=value` directories under it fill the columns so named",
);
const MAX_FILES: OptionDecl = OptionDecl::new(
    "maxFilesPerTrigger",
    Positive,
    "at most this many new files per micro-batch (at least one)",
);
const MAX_BYTES: OptionDecl = OptionDecl::new(
    "maxBytesPerTrigger",
    Bytes,
    "at most this many bytes of new files per micro-batch (at least one file)",
);
const LATEST_FIRST: OptionDecl =
    OptionDecl::new("latestFirst", Bool, "read the newest files first").default_value("false");
const FILE_NAME_ONLY: OptionDecl = OptionDecl::new(
    "fileNameOnly",
    Bool,
    "a file is new when its name (not its path) is new",
)
.default_value("false");
const GLOB_FILTER: OptionDecl = OptionDecl::new(
    "pathGlobFilter",
    Text,
    "only files whose name matches this glob (`*.json`)",
);
const IGNORE_MISSING: OptionDecl = OptionDecl::new(
    "ignoreMissingFiles",
    Bool,
    "skip files deleted between listing and reading",
)
.default_value("false");
const IGNORE_CORRUPT: OptionDecl = OptionDecl::new(
    "ignoreCorruptFiles",
    Bool,
    "skip files that cannot be decoded",
)
.default_value("false");
const MODE: OptionDecl = OptionDecl::new(
    "mode",
    Choice(&["PERMISSIVE", "DROPMALFORMED", "FAILFAST"]),
    "what a malformed record does: nulls (and the corrupt-record column), dropped, or a failed batch",
)
.default_value("PERMISSIVE");
const CORRUPT_COLUMN: OptionDecl = OptionDecl::new(
    "columnNameOfCorruptRecord",
    Text,
    "the STRING column of the schema that receives a malformed record's text",
)
.default_value("_corrupt_record");
const ENCODING: OptionDecl = OptionDecl::new("encoding", Text, "the files' encoding: UTF-8 only")
    .aliases(&["charset"])
    .default_value("UTF-8");
const TIMESTAMP_FORMAT: OptionDecl = OptionDecl::new(
    "timestampFormat",
    Text,
    "ISO-8601 patterns only; convert other forms in the query",
);
const TIMESTAMP_NTZ_FORMAT: OptionDecl = OptionDecl::new(
    "timestampNTZFormat",
    Text,
    "ISO-8601 patterns only; convert other forms in the query",
);
const DATE_FORMAT: OptionDecl = OptionDecl::new(
    "dateFormat",
    Text,
    "`yyyy-MM-dd` only; convert other forms in the query",
);
const MULTI_LINE: OptionDecl = OptionDecl::new(
    "multiLine",
    Bool,
    "each file is one JSON document (or an array of them), not JSON lines",
)
.default_value("false");
const HEADER: OptionDecl =
    OptionDecl::new("header", Bool, "the first line names the columns").default_value("false");
const SEP: OptionDecl = OptionDecl::new("sep", Char, "the field separator; `\\t` is a tab")
    .aliases(&["delimiter"])
    .default_value(",");
const QUOTE: OptionDecl = OptionDecl::new("quote", Char, "the quote character").default_value("\"");
const ESCAPE: OptionDecl =
    OptionDecl::new("escape", Char, "the escape character inside quotes").default_value("\\");
const COMMENT: OptionDecl = OptionDecl::new(
    "comment",
    Char,
    "lines starting with this character are skipped",
);
const NULL_VALUE: OptionDecl = OptionDecl::new("nullValue", Text, "the text that reads as null");

static JSON_SOURCE: OptionSet = OptionSet::new(&[
    PATH,
    MAX_FILES,
    MAX_BYTES,
    LATEST_FIRST,
    FILE_NAME_ONLY,
    GLOB_FILTER,
    IGNORE_MISSING,
    IGNORE_CORRUPT,
    MODE,
    CORRUPT_COLUMN,
    MULTI_LINE,
    ENCODING,
    TIMESTAMP_FORMAT,
    TIMESTAMP_NTZ_FORMAT,
    DATE_FORMAT,
]);
static CSV_SOURCE: OptionSet = OptionSet::new(&[
    PATH,
    MAX_FILES,
    MAX_BYTES,
    LATEST_FIRST,
    FILE_NAME_ONLY,
    GLOB_FILTER,
    IGNORE_MISSING,
    IGNORE_CORRUPT,
    MODE,
    CORRUPT_COLUMN,
    HEADER,
    SEP,
    QUOTE,
    ESCAPE,
    COMMENT,
    NULL_VALUE,
    ENCODING,
    TIMESTAMP_FORMAT,
    TIMESTAMP_NTZ_FORMAT,
    DATE_FORMAT,
]);
static PARQUET_SOURCE: OptionSet = OptionSet::new(&[
    PATH,
    MAX_FILES,
    MAX_BYTES,
    LATEST_FIRST,
    FILE_NAME_ONLY,
    GLOB_FILTER,
    IGNORE_MISSING,
    IGNORE_CORRUPT,
]);
static TEXT_SOURCE: OptionSet = OptionSet::new(&[
    PATH,
    MAX_FILES,
    MAX_BYTES,
    LATEST_FIRST,
    FILE_NAME_ONLY,
    GLOB_FILTER,
    IGNORE_MISSING,
    IGNORE_CORRUPT,
    ENCODING,
]);

const SINK_PATH: OptionDecl =
    OptionDecl::new("path", Text, "the output directory (created when missing)").required();
const MAX_RECORDS: OptionDecl = OptionDecl::new(
    "maxRecordsPerFile",
    Count,
    "at most this many rows per file; 0: no limit",
)
.default_value("0");
const SINK_HEADER: OptionDecl =
    OptionDecl::new("header", Bool, "write a header line").default_value("true");
static PARQUET_SINK: OptionSet = OptionSet::new(&[
    SINK_PATH,
    OptionDecl::new(
        "compression",
        Choice(&["snappy", "zstd", "none", "uncompressed"]),
        "the column chunks' compression",
    )
    .default_value("snappy"),
    MAX_RECORDS,
]);
const PLAIN_COMPRESSION: OptionDecl = OptionDecl::new(
    "compression",
    Choice(&["none", "uncompressed"]),
    "files are written uncompressed",
)
.default_value("none");
static JSON_SINK: OptionSet = OptionSet::new(&[SINK_PATH, PLAIN_COMPRESSION, MAX_RECORDS]);
static CSV_SINK: OptionSet =
    OptionSet::new(&[SINK_PATH, PLAIN_COMPRESSION, MAX_RECORDS, SINK_HEADER, SEP]);

/// One file format as a connector.
pub struct FileConnector {
    format: FileFormat,
}

/// JSON lines files.
pub static JSON: FileConnector = FileConnector {
    format: FileFormat::Json,
};
/// CSV files.
pub static CSV: FileConnector = FileConnector {
    format: FileFormat::Csv,
};
/// Parquet files.
pub static PARQUET: FileConnector = FileConnector {
    format: FileFormat::Parquet,
};
/// Text files (read only).
pub static TEXT: FileConnector = FileConnector {
    format: FileFormat::Text,
};

inventory::submit! { ConnectorRegistration(&JSON) }
inventory::submit! { ConnectorRegistration(&CSV) }
inventory::submit! { ConnectorRegistration(&PARQUET) }
inventory::submit! { ConnectorRegistration(&TEXT) }

impl Connector for FileConnector {
    fn name(&self) -> &'static str {
        self.format.name()
    }

    fn title(&self) -> &'static str {
        match self.format {
            FileFormat::Json => "JSON",
            FileFormat::Csv => "CSV",
            FileFormat::Parquet => "Parquet",
            FileFormat::Text => "text",
        }
    }

    fn source(&self) -> Option<&dyn SourceConnector> {
        Some(self)
    }

    fn sink(&self) -> Option<&dyn SinkConnector> {
        (self.format != FileFormat::Text).then_some(self as &dyn SinkConnector)
    }
}

impl SourceConnector for FileConnector {
    fn rank(&self) -> u16 {
        match self.format {
            FileFormat::Json => 0,
            FileFormat::Csv => 1,
            FileFormat::Parquet => 2,
            FileFormat::Text => 3,
        }
    }

    fn options(&self) -> &'static OptionSet {
        match self.format {
            FileFormat::Json => &JSON_SOURCE,
            FileFormat::Csv => &CSV_SOURCE,
            FileFormat::Parquet => &PARQUET_SOURCE,
            FileFormat::Text => &TEXT_SOURCE,
        }
    }

    fn declare(
        &self,
        read: &DeclaredRead<'_>,
    ) -> std::result::Result<Option<SchemaRef>, PlanError> {
        require_path(read)?;
        let kind = if read.streaming { "streaming" } else { "batch" };
        match self.format {
            FileFormat::Text => match &read.schema {
                Some(s) => {
                    let ok = s.fields().len() == 1
                        && matches!(
                            s.field(0).data_type(),
                            arrow::datatypes::DataType::Utf8
                                | arrow::datatypes::DataType::LargeUtf8
                        );
                    if !ok {
                        return Err(PlanError::with_help(
                            "text source schema must be a single STRING column",
                            "remove .schema(...) to get the column `value STRING`",
                        ));
                    }
                    Ok(read.schema.clone())
                }
                None => Ok(Some(text_schema())),
            },
            FileFormat::Json | FileFormat::Csv => {
                if read.schema.is_none() && read.streaming {
                    return Err(PlanError::with_help(
                        format!("{kind} {} source needs a schema", read.format),
                        "declare it with .schema(\"ts TIMESTAMP, user_id STRING, ...\") before .load(...)",
                    ));
                }
                Ok(read.schema.clone())
            }
            FileFormat::Parquet => Ok(read.schema.clone()),
        }
    }

    fn infer_schema(&self, read: &DeclaredRead<'_>) -> std::result::Result<SchemaRef, PlanError> {
        infer_file_schema(self.format, read)
    }

    fn check_options(&self, options: &Options) -> Result<()> {
        FileSourceOptions::parse(self.format, options).map(|_| ())
    }

    fn reads_tables(&self) -> bool {
        true
    }

    fn open(&self, request: SourceRequest<'_>) -> Result<Box<dyn Source>> {
        let help = format!("load it with .load(\"data/{}\")", self.name());
        let path = request_path(&request, self.name(), &help)?;
        Ok(Box::new(FileSource::open(
            &path,
            self.format,
            request.schema,
            request.options,
            request.ctx,
            request.table,
        )?))
    }
}

impl SinkConnector for FileConnector {
    fn rank(&self) -> u16 {
        match self.format {
            FileFormat::Parquet => 0,
            FileFormat::Json => 1,
            FileFormat::Csv => 2,
            FileFormat::Text => 3,
        }
    }

    fn options(&self) -> &'static OptionSet {
        match self.format {
            FileFormat::Json => &JSON_SINK,
            FileFormat::Csv => &CSV_SINK,
            _ => &PARQUET_SINK,
        }
    }

    fn accepted_modes(&self, _merge_keys: bool) -> &'static [OutputMode] {
        APPEND_ONLY
    }

    fn real_time(&self) -> crate::connector::RealTime {
        crate::connector::RealTime::Refused(
            "a file sink commits its files once per micro-batch, so rows could not reach it as they arrive",
        )
    }

    fn stores_tables(&self) -> bool {
        true
    }

    fn writes_object_storage(&self) -> bool {
        true
    }

    fn default_table_preference(&self) -> u8 {
        // Parquet is the default table format of a build without Delta.
        u8::from(self.format == FileFormat::Parquet)
    }

    fn check_options(&self, options: &Options) -> Result<()> {
        check_sink_options(self.name(), options)
    }

    fn open(&self, ctx: &SinkContext) -> Result<Box<dyn Sink>> {
        Ok(Box::new(FileSink::open(ctx)?))
    }
}

/// The fixed schema of the text source: `value STRING`.
pub(crate) fn text_schema() -> SchemaRef {
    Arc::new(Schema::new(vec![Field::new(
        "value",
        arrow::datatypes::DataType::Utf8,
        true,
    )]))
}

/// Infers the schema of a file read from the first file under its path:
/// Parquet from the file's footer, JSON and CSV from its first 1000 records
/// (header-less CSV columns are named `_c0`, `_c1`, ... as in Spark).
pub fn infer_file_schema(
    format: FileFormat,
    read: &DeclaredRead<'_>,
) -> std::result::Result<SchemaRef, PlanError> {
    let path = read.path.unwrap_or_default();
    let help = || {
        format!(
            "declare the schema with .schema(\"ts TIMESTAMP, ...\") on the {} reader, or add a file under `{path}`",
            read.format
        )
    };
    let ext = match format {
        FileFormat::Parquet => "parquet",
        FileFormat::Json => "json",
        FileFormat::Csv => "csv",
        FileFormat::Text => return Ok(text_schema()),
    };
    let sample = match crate::engine::storage::object_key(path) {
        Ok(Some(key)) => first_object(&key, ext).map_err(|e| {
            PlanError::with_help(
                format!("cannot infer the schema of the {}: {e}", read.describe()),
                help(),
            )
        })?,
        _ => first_file(Path::new(path), ext).map(Sample::File),
    };
    let Some(sample) = sample else {
        return Err(PlanError::with_help(
            format!(
                "cannot infer the schema of the {}: no .{ext} file under it",
                read.describe()
            ),
            help(),
        ));
    };
    let fail = |why: String| {
        PlanError::with_help(
            format!(
                "cannot infer the schema of the {} from `{}`: {why}",
                read.describe(),
                sample.name()
            ),
            help(),
        )
    };
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let open = || -> std::result::Result<Box<dyn ReadSeek>, PlanError> {
        match &sample {
            Sample::File(file) => Ok(Box::new(std::io::BufReader::new(
                std::fs::File::open(file).map_err(|e| fail(e.to_string()))?,
            ))),
            Sample::Object(_, bytes) => Ok(Box::new(std::io::Cursor::new(bytes.clone()))),
        }
    };
    match format {
        FileFormat::Parquet => crate::engine::sources::without_panics(|| {
            Ok(match &sample {
                Sample::File(file) => ParquetRecordBatchReaderBuilder::try_new(
                    std::fs::File::open(file).map_err(|e| crate::error::Error::io(file, e))?,
                )?
                .schema()
                .clone(),
                Sample::Object(_, bytes) => {
                    ParquetRecordBatchReaderBuilder::try_new(bytes.clone())?
                        .schema()
                        .clone()
                }
            })
        })
        .map_err(|e| fail(e.to_string())),
        FileFormat::Json => {
            let mut r = open()?;
            let (schema, _) =
                arrow::json::reader::infer_json_schema_from_seekable(&mut r, Some(1000))
                    .map_err(|e| fail(e.to_string()))?;
            Ok(Arc::new(schema))
        }
        _ => {
            let options: BTreeMap<String, String> = read.options.clone();
            let opts = Options::merged(&options, &BTreeMap::new(), "");
            let header = opts
                .get("header")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
            let delimiter = opts
                .get_any(&["sep", "delimiter"])
                .and_then(crate::options::parse_char)
                .unwrap_or(b',');
            let format = arrow::csv::reader::Format::default()
                .with_header(header)
                .with_delimiter(delimiter);
            let (schema, _) = format
                .infer_schema(open()?, Some(1000))
                .map_err(|e| fail(e.to_string()))?;
            let fields: Vec<Field> = schema
                .fields()
                .iter()
                .enumerate()
                .map(|(i, fl)| {
                    if header {
                        fl.as_ref().clone()
                    } else {
                        fl.as_ref().clone().with_name(format!("_c{i}"))
                    }
                })
                .collect();
            Ok(Arc::new(Schema::new(fields)))
        }
    }
}

/// The file a schema is inferred from.
enum Sample {
    /// A local file.
    File(PathBuf),
    /// An object (its URL) and its bytes.
    Object(String, bytes::Bytes),
}

impl Sample {
    fn name(&self) -> String {
        match self {
            Sample::File(p) => p.display().to_string(),
            Sample::Object(url, _) => url.clone(),
        }
    }
}

/// A sample's bytes, read from the start.
trait ReadSeek: std::io::BufRead + std::io::Seek {}
impl<T: std::io::BufRead + std::io::Seek> ReadSeek for T {}

/// The object `key`, or else the first object ending in `.ext` under it
/// (fewest levels deep, then in key order), skipping hidden and
/// `_`-prefixed names at every level; fetched.
fn first_object(
    key: &crate::engine::storage::ObjectKey,
    ext: &str,
) -> crate::error::Result<Option<Sample>> {
    use crate::engine::storage::object;
    let chosen = if object::head(key)?.is_some() {
        Some(key.clone())
    } else {
        let suffix = format!(".{ext}");
        object::list_recursive(key)?
            .into_iter()
            .filter(|o| {
                o.relative.ends_with(&suffix)
                    && o.relative
                        .split('/')
                        .all(|s| !s.starts_with('.') && !s.starts_with('_'))
            })
            .min_by(|a, b| {
                (a.relative.matches('/').count(), &a.relative)
                    .cmp(&(b.relative.matches('/').count(), &b.relative))
            })
            .map(|o| crate::engine::storage::ObjectKey {
                store: key.store.clone(),
                key: if key.key.is_empty() {
                    o.relative
                } else {
                    format!("{}/{}", key.key, o.relative)
                },
            })
    };
    let Some(chosen) = chosen else {
        return Ok(None);
    };
    Ok(object::read_many(std::slice::from_ref(&chosen))?
        .pop()
        .flatten()
        .map(|bytes| Sample::Object(chosen.url(), bytes)))
}

/// The first file (in path order) ending in `.ext` under `dir` (or `dir`
/// itself), skipping hidden, `_`-prefixed entries such as `_delta_log`.
pub(crate) fn first_file(dir: &Path, ext: &str) -> Option<PathBuf> {
    if dir.is_file() {
        return Some(dir.to_path_buf());
    }
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| !n.starts_with('.') && !n.starts_with('_'))
        })
        .collect();
    entries.sort();
    for p in &entries {
        if p.is_file() && p.extension().and_then(|e| e.to_str()) == Some(ext) {
            return Some(p.clone());
        }
    }
    for p in &entries {
        if p.is_dir() {
            if let Some(f) = first_file(p, ext) {
                return Some(f);
            }
        }
    }
    None
}
