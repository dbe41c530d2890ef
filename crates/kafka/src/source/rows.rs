//! Kafka records as Arrow rows in Spark's source columns (`key`, `value`,
//! `topic`, `partition`, `offset`, `timestamp`, `timestampType`, `headers`).

use super::*;

/// The column names of Kafka records.
pub const KAFKA_COLUMNS: &[&str] = &[
    "key",
    "value",
    "topic",
    "partition",
    "offset",
    "timestamp",
    "timestampType",
    "headers",
];

/// The options with `${ENV}` references substituted (`kafka.*` ones are
/// substituted when the client configuration is built).
pub(super) fn substitute_options(options: &Options, flow: &str, what: &str) -> Result<Options> {
    let mut map = BTreeMap::new();
    for (k, v) in options.entries() {
        let v = if k.starts_with(crate::conf::KAFKA_PREFIX) {
            v.clone()
        } else {
            crate::conf::substitute_env(v, what, k)?
        };
        map.insert(k.clone(), v);
    }
    Ok(Options::merged(&map, &BTreeMap::new(), flow))
}

/// Builds the source's columns from messages.
pub(super) struct RowBuilder {
    schema: SchemaRef,
    key: BinaryBuilder,
    value: BinaryBuilder,
    topic: StringBuilder,
    partition: Int32Builder,
    offset: Int64Builder,
    timestamp: TimestampMicrosecondBuilder,
    timestamp_type: Int32Builder,
    headers: ListBuilder<StructBuilder>,
    with_headers: bool,
    rows: usize,
}

pub(super) fn header_fields() -> Fields {
    Fields::from(vec![
        Field::new("key", DataType::Utf8, true),
        Field::new("value", DataType::Binary, true),
    ])
}

impl RowBuilder {
    pub(super) fn new(schema: SchemaRef) -> Self {
        let header = StructBuilder::from_fields(header_fields(), 0);
        let list_field = schema
            .field_with_name("headers")
            .ok()
            .and_then(|f| match f.data_type() {
                DataType::List(inner) => Some(inner.clone()),
                _ => None,
            });
        let list_field_present = list_field.is_some();
        let mut headers = ListBuilder::new(header);
        if let Some(f) = list_field {
            headers = headers.with_field(f);
        }
        RowBuilder {
            schema,
            key: BinaryBuilder::new(),
            value: BinaryBuilder::new(),
            topic: StringBuilder::new(),
            partition: Int32Builder::new(),
            offset: Int64Builder::new(),
            timestamp: TimestampMicrosecondBuilder::new(),
            timestamp_type: Int32Builder::new(),
            headers,
            with_headers: list_field_present,
            rows: 0,
        }
    }

    pub(super) fn len(&self) -> usize {
        self.rows
    }

    /// Appends one message; returns its key and value bytes.
    pub(super) fn push<M: Message>(&mut self, m: &M) -> u64 {
        let key = m.key();
        let value = m.payload();
        self.key.append_option(key);
        self.value.append_option(value);
        self.topic.append_value(m.topic());
        self.partition.append_value(m.partition());
        self.offset.append_value(m.offset());
        match m.timestamp() {
            Timestamp::CreateTime(t) => {
                self.timestamp.append_value(t * 1000);
                self.timestamp_type.append_value(0);
            }
            Timestamp::LogAppendTime(t) => {
                self.timestamp.append_value(t * 1000);
                self.timestamp_type.append_value(1);
            }
            Timestamp::NotAvailable => {
                self.timestamp.append_null();
                self.timestamp_type.append_null();
            }
        }
        if !self.with_headers {
            self.rows += 1;
            return (key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len())) as u64;
        }
        if let Some(h) = m.headers() {
            for header in h.iter() {
                let s = self.headers.values();
                s.field_builder::<StringBuilder>(0)
                    .expect("header key builder")
                    .append_value(header.key);
                s.field_builder::<BinaryBuilder>(1)
                    .expect("header value builder")
                    .append_option(header.value);
                s.append(true);
            }
        }
        self.headers.append(true);
        self.rows += 1;
        (key.map_or(0, |k| k.len()) + value.map_or(0, |v| v.len())) as u64
    }

    pub(super) fn finish(&mut self) -> Result<RecordBatch> {
        let mut columns: Vec<ArrayRef> = Vec::with_capacity(self.schema.fields().len());
        let key: ArrayRef = Arc::new(self.key.finish());
        let value: ArrayRef = Arc::new(self.value.finish());
        let topic: ArrayRef = Arc::new(self.topic.finish());
        let partition: ArrayRef = Arc::new(self.partition.finish());
        let offset: ArrayRef = Arc::new(self.offset.finish());
        let ts = self.timestamp.finish();
        let timestamp_type: ArrayRef = Arc::new(self.timestamp_type.finish());
        let headers: ArrayRef = Arc::new(self.headers.finish());
        for field in self.schema.fields() {
            let col = match field.name().as_str() {
                "key" => key.clone(),
                "value" => value.clone(),
                "topic" => topic.clone(),
                "partition" => partition.clone(),
                "offset" => offset.clone(),
                "timestamp" => match field.data_type() {
                    DataType::Timestamp(_, tz) => {
                        Arc::new(ts.clone().with_timezone_opt(tz.clone()))
                    }
                    _ => Arc::new(ts.clone()),
                },
                "timestampType" => timestamp_type.clone(),
                "headers" => headers.clone(),
                other => {
                    return Err(Error::runtime(format!(
                        "kafka source: no column `{other}` in Kafka records"
                    )))
                }
            };
            let col = if col.data_type() != field.data_type() {
                arrow::compute::cast(&col, field.data_type())?
            } else {
                col
            };
            columns.push(col);
        }
        self.rows = 0;
        Ok(RecordBatch::try_new(self.schema.clone(), columns)?)
    }
}
