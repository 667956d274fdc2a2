//! CSV rows read back as their types: the one reader every result file's rows go through, the
//! producers' (a resumed study's log) and the report's.

use serde::de::DeserializeOwned;

/// Reads CSV rows `T` (header first; cells trimmed; a column missing from the header is an
/// absent field, which `#[serde(default)]` fields accept). Errors read
/// `line N: column C: why`.
pub fn read_rows<T: DeserializeOwned>(text: &[u8]) -> Result<Vec<T>, String> {
    let mut rd = csv::ReaderBuilder::new()
        .trim(csv::Trim::All)
        .from_reader(text);
    let headers = rd.headers().map_err(|e| e.to_string())?.clone();
    let mut out = Vec::new();
    for rec in rd.records() {
        let rec = rec.map_err(|e| e.to_string())?;
        let line = rec.position().map_or(0, |p| p.line() as usize);
        out.push(row_from_record(&headers, &rec, line)?);
    }
    Ok(out)
}

/// One row `T` from a record (at 1-based `line` of its file) and its header, errors as in
/// [`read_rows`].
pub fn row_from_record<T: DeserializeOwned>(
    headers: &csv::StringRecord,
    rec: &csv::StringRecord,
    line: usize,
) -> Result<T, String> {
    rec.deserialize(Some(headers)).map_err(|e| match e.kind() {
        csv::ErrorKind::Deserialize { err, .. } => {
            let column = err
                .field()
                .and_then(|i| headers.get(i as usize))
                .map(|c| format!("column {c}: "))
                .unwrap_or_default();
            let value = err
                .field()
                .and_then(|i| rec.get(i as usize))
                .map(|v| format!(" ('{v}')"))
                .unwrap_or_default();
            format!("line {line}: {column}{}{value}", err.kind())
        }
        _ => format!("line {line}: {e}"),
    })
}
