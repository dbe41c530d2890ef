//! Reading only the bytes of a Parquet file that a query decodes.
//!
//! After the footer, a read needs just the column chunks of the projected
//! columns in the chosen row groups. [`ChunkPlan`] lists their byte ranges
//! (runs of nearly adjacent chunks merged, so one read covers them) and
//! [`ColumnChunks`] holds what was read: a [`ChunkReader`] the Arrow
//! reader decodes from, where every page is a slice of one buffer. A query
//! that reads two of five columns then reads two fifths of the file, with
//! one read call per run instead of one per page.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};

use bytes::{Buf, Bytes};
use parquet::errors::ParquetError;
use parquet::file::metadata::ParquetMetaData;
use parquet::file::reader::{ChunkReader, Length};

/// Chunks closer than this are read as one range (the gap is read too).
const MERGE_GAP: u64 = 64 * 1024;

/// The byte ranges `[start, end)` of a file that a read needs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ChunkPlan {
    ranges: Vec<(u64, u64)>,
    file_len: u64,
}

impl ChunkPlan {
    /// The column chunks of `row_groups` (every row group: `None`) whose
    /// root column is one of `roots`, in a file of `file_len` bytes. A
    /// chunk whose footer entry places it at a negative offset, with a
    /// negative size, or past the end of the file is an error naming it
    /// (the footer is damaged), not a panic.
    pub(crate) fn new(
        metadata: &ParquetMetaData,
        roots: &[usize],
        row_groups: Option<&[usize]>,
        file_len: u64,
    ) -> Result<ChunkPlan, ParquetError> {
        let schema = metadata.file_metadata().schema_descr();
        let all: Vec<usize> = (0..metadata.num_row_groups()).collect();
        let mut chunks: Vec<(u64, u64)> = Vec::new();
        for &rg in row_groups.unwrap_or(&all) {
            let Some(group) = metadata.row_groups().get(rg) else {
                continue;
            };
            for (leaf, column) in group.columns().iter().enumerate() {
                if roots.contains(&schema.get_column_root_idx(leaf)) {
                    chunks.push(chunk_range(column, rg, leaf, file_len)?);
                }
            }
        }
        chunks.sort_unstable();
        let mut ranges: Vec<(u64, u64)> = Vec::with_capacity(chunks.len());
        for (start, end) in chunks {
            match ranges.last_mut() {
                Some(last) if start <= last.1.saturating_add(MERGE_GAP) => last.1 = last.1.max(end),
                _ => ranges.push((start, end)),
            }
        }
        Ok(ChunkPlan { ranges, file_len })
    }

    /// How many bytes the read takes.
    pub(crate) fn bytes(&self) -> u64 {
        self.ranges.iter().map(|(s, e)| e - s).sum()
    }

    /// Reads the planned ranges of `file`.
    pub(crate) fn read(&self, mut file: &File) -> std::io::Result<ColumnChunks> {
        let mut ranges = Vec::with_capacity(self.ranges.len());
        for &(start, end) in &self.ranges {
            let len = (end - start) as usize;
            // Not zero-filled first: `read_to_end` fills the spare capacity.
            let mut buf = Vec::with_capacity(len);
            file.seek(SeekFrom::Start(start))?;
            (&mut file).take(len as u64).read_to_end(&mut buf)?;
            if buf.len() != len {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!(
                        "the file ended at byte {} inside a column chunk (bytes {start}..{end})",
                        start + buf.len() as u64
                    ),
                ));
            }
            ranges.push((start, Bytes::from(buf)));
        }
        Ok(ColumnChunks {
            ranges,
            len: self.file_len,
        })
    }
}

/// The bytes `[start, end)` of one column chunk, checked against the file:
/// what the parquet crate's `byte_range` computes, without its assertion.
fn chunk_range(
    column: &parquet::file::metadata::ColumnChunkMetaData,
    row_group: usize,
    leaf: usize,
    file_len: u64,
) -> Result<(u64, u64), ParquetError> {
    let start = column
        .dictionary_page_offset()
        .unwrap_or_else(|| column.data_page_offset());
    let len = column.compressed_size();
    let damaged = |what: String| {
        ParquetError::General(format!(
            "the footer is damaged: column chunk {leaf} of row group {row_group} {what}"
        ))
    };
    if start < 0 || len < 0 {
        return Err(damaged(format!(
            "has offset {start} and size {len}; neither may be negative"
        )));
    }
    let (start, len) = (start as u64, len as u64);
    if start > file_len {
        return Err(damaged(format!(
            "starts at byte {start}, past the end of the file ({file_len} bytes)"
        )));
    }
    // A size running past the end is cut there: reading stops at the end,
    // and the decoder reports what is missing.
    Ok((start, start.saturating_add(len).min(file_len)))
}

/// The column chunks read from a Parquet file, readable as the file itself
/// (offsets are the file's) within those chunks.
pub(crate) struct ColumnChunks {
    /// (file offset, bytes), sorted by offset, not overlapping.
    ranges: Vec<(u64, Bytes)>,
    len: u64,
}

impl ColumnChunks {
    /// The bytes from `start`: `length` of them, or to the end of the range
    /// that holds `start`.
    fn slice(&self, start: u64, length: Option<usize>) -> parquet::errors::Result<Bytes> {
        let i = self.ranges.partition_point(|(s, _)| *s <= start);
        let not_read = || {
            ParquetError::General(format!(
                "bytes {start}..{} of the file were not read (not part of a projected column chunk)",
                length.map_or(start, |l| start + l as u64)
            ))
        };
        let (s, bytes) = i
            .checked_sub(1)
            .and_then(|i| self.ranges.get(i))
            .ok_or_else(not_read)?;
        let from = (start - s) as usize;
        let to = match length {
            Some(l) => from.checked_add(l).ok_or_else(not_read)?,
            None => bytes.len(),
        };
        if from > bytes.len() || to > bytes.len() {
            return Err(not_read());
        }
        Ok(bytes.slice(from..to))
    }
}

impl Length for ColumnChunks {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for ColumnChunks {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(self.slice(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, Some(length))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::sync::Arc;

    use arrow::array::{Int64Array, StringArray};
    use arrow::datatypes::{DataType, Field, Schema};
    use arrow::record_batch::RecordBatch;
    use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
    use parquet::arrow::{ArrowWriter, ProjectionMask};
    use parquet::file::properties::WriterProperties;

    fn write_file(dir: &std::path::Path) -> std::path::PathBuf {
        let schema = Arc::new(Schema::new(vec![
            Field::new("a", DataType::Int64, false),
            Field::new("b", DataType::Utf8, true),
            Field::new("c", DataType::Int64, true),
        ]));
        let path = dir.join("t.parquet");
        let props = WriterProperties::builder()
            .set_max_row_group_row_count(Some(1000))
            .build();
        let mut w = ArrowWriter::try_new(File::create(&path).unwrap(), schema.clone(), Some(props))
            .unwrap();
        let n = 3000i64;
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from_iter_values(0..n)),
                // ~100 bytes each: column b's chunks keep a's and c's
                // farther apart than MERGE_GAP.
                Arc::new(StringArray::from_iter_values(
                    (0..n).map(|i| format!("s{i:0>100}")),
                )),
                Arc::new(Int64Array::from_iter_values((0..n).map(|i| i * 2))),
            ],
        )
        .unwrap();
        w.write(&batch).unwrap();
        w.close().unwrap();
        path
    }

    fn decode<R: ChunkReader + 'static>(
        b: ParquetRecordBatchReaderBuilder<R>,
        roots: &[usize],
        row_groups: &Option<Vec<usize>>,
    ) -> Vec<RecordBatch> {
        let mask = ProjectionMask::roots(b.parquet_schema(), roots.iter().copied());
        let mut b = b.with_projection(mask);
        if let Some(rg) = row_groups {
            b = b.with_row_groups(rg.clone());
        }
        b.build().unwrap().map(|r| r.unwrap()).collect()
    }

    #[test]
    fn reads_only_projected_chunks_and_decodes_the_same_rows() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_file(dir.path());
        let file = File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let meta = ArrowReaderMetadata::load(&file, Default::default()).unwrap();
        assert_eq!(meta.metadata().num_row_groups(), 3);
        for (roots, row_groups) in [
            (vec![2usize], None),
            (vec![0, 2], Some(vec![1usize])),
            (vec![0, 1, 2], None),
        ] {
            let plan = ChunkPlan::new(meta.metadata(), &roots, row_groups.as_deref(), len).unwrap();
            assert!(plan.bytes() <= len);
            let chunks = plan.read(&file).unwrap();
            let sparse = decode(
                ParquetRecordBatchReaderBuilder::new_with_metadata(chunks, meta.clone()),
                &roots,
                &row_groups,
            );
            let whole = decode(
                ParquetRecordBatchReaderBuilder::new_with_metadata(
                    File::open(&path).unwrap(),
                    meta.clone(),
                ),
                &roots,
                &row_groups,
            );
            assert_eq!(sparse, whole, "roots {roots:?}, row groups {row_groups:?}");
        }
        // Column c alone: its three chunks, read as three ranges (b's
        // chunks between them are wider than MERGE_GAP).
        let chunk = |rg: usize, col: usize| {
            let (start, len) = meta.metadata().row_group(rg).column(col).byte_range();
            (start, start + len)
        };
        assert!(chunk(0, 1).1 - chunk(0, 1).0 > MERGE_GAP);
        let one = ChunkPlan::new(meta.metadata(), &[2], None, len).unwrap();
        assert_eq!(one.ranges, vec![chunk(0, 2), chunk(1, 2), chunk(2, 2)]);
        // a and c of row group 1: two ranges; a and b are adjacent: one.
        let two = ChunkPlan::new(meta.metadata(), &[0, 2], Some(&[1]), len).unwrap();
        assert_eq!(two.ranges, vec![chunk(1, 0), chunk(1, 2)]);
        let ab = ChunkPlan::new(meta.metadata(), &[0, 1], Some(&[1]), len).unwrap();
        assert_eq!(ab.ranges, vec![(chunk(1, 0).0, chunk(1, 1).1)]);
    }

    #[test]
    fn a_read_outside_the_chunks_is_an_error_and_a_short_file_is_reported() {
        let chunks = ColumnChunks {
            ranges: vec![
                (10, Bytes::from_static(b"abcdef")),
                (100, Bytes::from_static(b"xyz")),
            ],
            len: 200,
        };
        assert_eq!(chunks.get_bytes(12, 3).unwrap(), Bytes::from_static(b"cde"));
        assert_eq!(chunks.get_bytes(101, 2).unwrap(), Bytes::from_static(b"yz"));
        let mut rest = String::new();
        chunks
            .get_read(11)
            .unwrap()
            .read_to_string(&mut rest)
            .unwrap();
        assert_eq!(rest, "bcdef");
        for (start, len) in [(5, 2), (14, 4), (50, 1), (103, 1)] {
            let e = chunks.get_bytes(start, len).unwrap_err().to_string();
            assert!(e.contains("were not read"), "{e}");
        }

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("short");
        File::create(&path)
            .unwrap()
            .write_all(b"0123456789")
            .unwrap();
        let plan = ChunkPlan {
            ranges: vec![(4, 20)],
            file_len: 20,
        };
        let e = plan
            .read(&File::open(&path).unwrap())
            .err()
            .unwrap()
            .to_string();
        assert_eq!(
            e,
            "the file ended at byte 10 inside a column chunk (bytes 4..20)"
        );
    }

    /// The footer entry of column `leaf` in row group 0 with another
    /// offset and size.
    fn with_chunk(meta: &ParquetMetaData, leaf: usize, offset: i64, size: i64) -> ParquetMetaData {
        let rg = meta.row_group(0);
        let mut columns = rg.columns().to_vec();
        columns[leaf] = columns[leaf]
            .clone()
            .into_builder()
            .set_dictionary_page_offset(None)
            .set_data_page_offset(offset)
            .set_total_compressed_size(size)
            .build()
            .unwrap();
        let rg = rg
            .clone()
            .into_builder()
            .set_column_metadata(columns)
            .build()
            .unwrap();
        ParquetMetaData::new(meta.file_metadata().clone(), vec![rg])
    }

    #[test]
    fn a_damaged_footer_is_an_error_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let path = write_file(dir.path());
        let file = File::open(&path).unwrap();
        let len = file.metadata().unwrap().len();
        let meta = ArrowReaderMetadata::load(&file, Default::default()).unwrap();
        let meta = meta.metadata();
        let negative = with_chunk(meta, 2, -7, 100);
        assert_eq!(
            ChunkPlan::new(&negative, &[2], Some(&[0]), len).unwrap_err().to_string(),
            "Parquet error: the footer is damaged: column chunk 2 of row group 0 has offset -7 and size 100; neither may be negative"
        );
        let past_end = with_chunk(meta, 2, len as i64 + 10, 5);
        assert_eq!(
            ChunkPlan::new(&past_end, &[2], Some(&[0]), len).unwrap_err().to_string(),
            format!("Parquet error: the footer is damaged: column chunk 2 of row group 0 starts at byte {}, past the end of the file ({len} bytes)", len + 10)
        );
        let huge = with_chunk(meta, 2, 4, i64::MAX);
        assert_eq!(
            ChunkPlan::new(&huge, &[2], Some(&[0]), len)
                .unwrap()
                .bytes(),
            len - 4
        );
        // Columns the query does not read are not checked.
        assert!(ChunkPlan::new(&negative, &[0], Some(&[0]), len).is_ok());
    }
}
