//! API paths: base-URL normalisation, percent-encoded segments and metric templates.

use super::error::Error;

/// An API path below `/api2/json`, built from literal and parameter segments.
///
/// It keeps both the concrete path (`/nodes/pve1/qemu/100/config`) and a template
/// (`/nodes/{node}/qemu/{vmid}/config`) so metrics have bounded cardinality.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiPath {
    path: String,
    template: String,
}

impl ApiPath {
    /// The empty path (the API root).
    pub fn root() -> Self {
        Self {
            path: String::new(),
            template: String::new(),
        }
    }

    /// Appends literal segments, given as `a/b/c` (not encoded, must be URL-safe).
    pub fn lit(mut self, segments: &str) -> Self {
        for s in segments.split('/').filter(|s| !s.is_empty()) {
            self.path.push('/');
            self.path.push_str(s);
            self.template.push('/');
            self.template.push_str(s);
        }
        self
    }

    /// Appends one parameter segment; the value is percent-encoded and the template shows `{name}`.
    pub fn param(mut self, name: &str, value: impl std::fmt::Display) -> Self {
        self.path.push('/');
        self.path.push_str(&encode_segment(&value.to_string()));
        self.template.push_str("/{");
        self.template.push_str(name);
        self.template.push('}');
        self
    }

    /// Starts `/nodes/{node}`.
    pub fn node(node: &str) -> Self {
        Self::root().lit("nodes").param("node", node)
    }

    /// Starts `/nodes/{node}/qemu/{vmid}`.
    pub fn vm(node: &str, vmid: u32) -> Self {
        Self::node(node).lit("qemu").param("vmid", vmid)
    }

    /// The concrete, encoded path (starts with `/`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The metric template (starts with `/`).
    pub fn template(&self) -> &str {
        &self.template
    }
}

/// Percent-encodes everything except RFC 3986 unreserved characters.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Normalises a configured PVE URL to the API base `<scheme>://<host>[:port][/prefix]/api2/json`.
///
/// Accepts the URL with or without a trailing `/api2/json` and with or without trailing slashes.
pub fn api_base(configured: &str) -> Result<url::Url, Error> {
    let trimmed = configured.trim();
    let parsed = url::Url::parse(trimmed)
        .map_err(|e| Error::Config(format!("invalid Proxmox URL '{}': {e}", redact_userinfo(trimmed))))?;
    // Credentials in the URL would be printed wherever the URL is (logs, events, Debug).
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(Error::Config(
            "the Proxmox URL must not contain a user name or password; give the API token (or user name and password) separately".into(),
        ));
    }
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(Error::Config(format!(
            "Proxmox URL must be http(s), got '{}'",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none_or(str::is_empty) {
        return Err(Error::Config(format!("Proxmox URL '{trimmed}' has no host")));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(Error::Config(
            "Proxmox URL must not have a query or fragment".into(),
        ));
    }
    let mut path = parsed.path().trim_end_matches('/').to_owned();
    if let Some(stripped) = path.strip_suffix("/api2/json") {
        path = stripped.trim_end_matches('/').to_owned();
    }
    let mut base = parsed.clone();
    base.set_path(&format!("{path}/api2/json"));
    Ok(base)
}

/// A URL for logs and `Debug` output: a user name or password in it is replaced by `***` (also in
/// text that does not parse as a URL).
pub fn redact_userinfo(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_owned();
    };
    let rest = &url[scheme_end + 3..];
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => format!("{}***@{}", &url[..scheme_end + 3], &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Joins the API base with a path (no double slashes, segments kept encoded).
pub fn join(base: &url::Url, path: &ApiPath) -> Result<url::Url, Error> {
    let s = format!("{}{}", base.as_str().trim_end_matches('/'), path.path());
    url::Url::parse(&s)
        .map_err(|e| Error::Config(format!("cannot build request URL for {}: {e}", path.template())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_url_variants() {
        for input in [
            "https://pve.example:8006",
            "https://pve.example:8006/",
            "https://pve.example:8006/api2/json",
            "https://pve.example:8006/api2/json/",
            " https://pve.example:8006//api2/json// ",
        ] {
            assert_eq!(
                api_base(input).unwrap().as_str(),
                "https://pve.example:8006/api2/json",
                "{input}"
            );
        }
        assert_eq!(
            api_base("http://10.0.0.1/proxy/").unwrap().as_str(),
            "http://10.0.0.1/proxy/api2/json"
        );
        assert!(api_base("ftp://x").is_err());
        assert!(api_base("not a url").is_err());
        assert!(api_base("https://x/?a=b").is_err());
        // Credentials in the URL are refused without being echoed.
        for url in [
            "https://root:hunter22@pve:8006",
            "https://root@pve:8006",
            "https://:hunter22@pve",
        ] {
            let e = api_base(url).unwrap_err().to_string();
            assert!(e.contains("must not contain a user name or password"), "{e}");
            assert!(!e.contains("hunter22") && !e.contains("root@"), "{e}");
        }
        let e = api_base("https://root:hunter22@pve:80x06")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("hunter22"), "{e}");
    }

    #[test]
    fn userinfo_is_redacted() {
        assert_eq!(redact_userinfo("https://u:p@h:1/x@y"), "https://***@h:1/x@y");
        assert_eq!(redact_userinfo("https://h:1/a@b"), "https://h:1/a@b");
        assert_eq!(redact_userinfo("no url"), "no url");
        assert_eq!(redact_userinfo("https://u:p w@h"), "https://***@h");
    }

    #[test]
    fn join_and_template() {
        let base = api_base("https://h:8006").unwrap();
        let p = ApiPath::vm("pve1", 100).lit("status/current");
        assert_eq!(p.template(), "/nodes/{node}/qemu/{vmid}/status/current");
        assert_eq!(
            join(&base, &p).unwrap().as_str(),
            "https://h:8006/api2/json/nodes/pve1/qemu/100/status/current"
        );
        let p = ApiPath::node("pve1")
            .lit("tasks")
            .param("upid", "UPID:pve1:0000:x:")
            .lit("status");
        assert_eq!(p.template(), "/nodes/{node}/tasks/{upid}/status");
        assert_eq!(p.path(), "/nodes/pve1/tasks/UPID%3Apve1%3A0000%3Ax%3A/status");
        let p = ApiPath::node("pve1")
            .lit("storage")
            .param("storage", "local")
            .lit("content")
            .param("volume", "local:iso/a b.iso");
        assert_eq!(
            p.path(),
            "/nodes/pve1/storage/local/content/local%3Aiso%2Fa%20b.iso"
        );
        assert_eq!(ApiPath::root().lit("/cluster/nextid/").path(), "/cluster/nextid");
    }

    #[test]
    fn encode_segment_keeps_unreserved() {
        assert_eq!(encode_segment("Az09-._~"), "Az09-._~");
        assert_eq!(encode_segment("ä/"), "%C3%A4%2F");
    }
}
