//! Percent-encoded paths, as Spark's file-source and file-sink logs and
//! Delta's commit log write them (`file:///data/a%20b.parquet`).

/// The bytes of `s` with every `%XX` escape (two hex digits) decoded; a `%`
/// not followed by two hex digits is kept as it is. Works on bytes, so a
/// `%` before a multi-byte character is never a slicing panic.
pub fn percent_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            if let (Some(high), Some(low)) = (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                out.push((high * 16 + low) as u8);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::percent_decode;

    #[test]
    fn escapes_decode_and_anything_else_stays() {
        assert_eq!(percent_decode("a%20b"), b"a b");
        assert_eq!(percent_decode("%C3%A9"), "é".as_bytes());
        assert_eq!(percent_decode("%1é%zz%4%"), "%1é%zz%4%".as_bytes());
        assert_eq!(percent_decode("x%41"), b"xA");
    }
}
