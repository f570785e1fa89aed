//! A small `multipart/form-data` parser (enough for PVE's upload endpoint).

/// One part of a multipart body.
#[derive(Debug, Clone)]
pub struct Part {
    /// Form field name.
    pub name: String,
    /// `filename="..."` attribute, for file parts.
    pub filename: Option<String>,
    /// Content.
    pub data: Vec<u8>,
}

/// Extracts the boundary from a `Content-Type` header value.
pub fn boundary(content_type: &str) -> Option<String> {
    content_type.split(';').map(str::trim).find_map(|p| {
        p.strip_prefix("boundary=")
            .map(|b| b.trim_matches('"').to_string())
    })
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    if needle.is_empty() || hay.len() < needle.len() {
        return None;
    }
    (from..=hay.len() - needle.len()).find(|&i| &hay[i..i + needle.len()] == needle)
}

fn attr(header: &str, name: &str) -> Option<String> {
    let key = format!("{name}=");
    header
        .split(';')
        .map(str::trim)
        .find_map(|p| p.strip_prefix(&key).map(|v| v.trim_matches('"').to_string()))
}

/// Parses the parts in order; `None` when the body is malformed.
pub fn parse(body: &[u8], boundary: &str) -> Option<Vec<Part>> {
    let delim = format!("--{boundary}").into_bytes();
    let mut pos = find(body, &delim, 0)? + delim.len();
    let mut parts = Vec::new();
    loop {
        if body.get(pos..pos + 2) == Some(b"--") {
            return Some(parts);
        }
        if body.get(pos..pos + 2) == Some(b"\r\n") {
            pos += 2;
        }
        let header_end = find(body, b"\r\n\r\n", pos)?;
        let headers = String::from_utf8_lossy(&body[pos..header_end]).into_owned();
        let data_start = header_end + 4;
        let mut next_delim = b"\r\n".to_vec();
        next_delim.extend_from_slice(&delim);
        let data_end = find(body, &next_delim, data_start)?;
        let mut name = None;
        let mut filename = None;
        for line in headers.split("\r\n") {
            if line.to_ascii_lowercase().starts_with("content-disposition:") {
                name = attr(line, "name");
                filename = attr(line, "filename");
            }
        }
        parts.push(Part {
            name: name?,
            filename,
            data: body[data_start..data_end].to_vec(),
        });
        pos = data_end + next_delim.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_fields_in_order() {
        let body = b"--XyZ\r\nContent-Disposition: form-data; name=\"content\"\r\n\r\niso\r\n--XyZ\r\nContent-Disposition: form-data; name=\"filename\"; filename=\"a.iso\"\r\nContent-Type: application/octet-stream\r\n\r\n\x00\x01\r\n\x02\r\n--XyZ--\r\n";
        let parts = parse(body, "XyZ").unwrap();
        assert_eq!(parts.len(), 2);
        assert_eq!(parts[0].name, "content");
        assert_eq!(parts[0].data, b"iso");
        assert_eq!(parts[1].filename.as_deref(), Some("a.iso"));
        assert_eq!(parts[1].data, b"\x00\x01\r\n\x02");
        assert_eq!(
            boundary("multipart/form-data; boundary=XyZ").as_deref(),
            Some("XyZ")
        );
    }
}
