//! `capmox convert` (capmox's `clusterctl capmox-convert`): rewrites v1alpha1 manifests and
//! cluster templates to v1alpha2, and the Cluster API v1beta1 objects beside them to v1beta2.
//!
//! Multi-document YAML in, multi-document YAML out: documents that need no conversion are copied
//! byte for byte; converted documents keep their key order, comments (where the field still
//! exists), scalar styles and clusterctl variables (`${VAR}`, `${VAR:=default}`; a variable in an
//! integer or list field is written back unquoted so it still substitutes to a number or list).
//! The Proxmox kinds go through the same object conversion the API server's conversion webhook
//! uses (`capmox_api::conversion`); what v1alpha2 cannot express is reported. A Proxmox object
//! that cannot be converted is an error; a CAPI object is left at v1beta1 (which CAPI still
//! serves) with a warning.
//!
//! [`convert_text_to`] with [`Generation::V1beta1`] runs it the other way: v1alpha2 → v1alpha1,
//! CAPI v1beta2 → v1beta1 (ClusterClasses included) and KamajiControlPlane v1alpha2 → v1alpha1 —
//! how `make release` makes the templates of a v1beta1-contract series (CAPI v1.10) from the
//! v1beta2 ones in `templates/`. There anything that cannot be expressed is an error.

mod capi;
mod capi_down;
pub mod emit;
mod proxmox;
mod proxmox_down;
mod tokens;
pub mod tree;

use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use tokens::Tokens;
use tree::{Node, Style};

/// Arguments of `capmox convert`.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct ConvertArgs {
    /// File to convert (repeatable); standard input when none is given.
    #[arg(short = 'f', long = "filename", value_name = "FILE")]
    pub filenames: Vec<PathBuf>,
    /// Rewrite the files in place; with a suffix (`-i.bak`, `--in-place=.bak`) keep the original
    /// as FILE<suffix>.
    #[arg(short = 'i', long = "in-place", value_name = "SUFFIX", num_args = 0..=1,
          require_equals = true, default_missing_value = "")]
    pub in_place: Option<String>,
    /// The generation to write: v1beta2 (CAPI >= v1.11, Proxmox kinds v1alpha2) or v1beta1
    /// (CAPI v1.10, Proxmox kinds and KamajiControlPlane v1alpha1).
    #[arg(long = "to", value_enum, default_value_t = Generation::V1beta2)]
    pub to: Generation,
}

/// Rewrites `-i<suffix>` after the `convert` subcommand into `--in-place=<suffix>`: the long
/// form needs `=` (so `--in-place FILE` is not read as a suffix) and clap applies that to the
/// attached short form too.
pub fn normalize_args(args: Vec<std::ffi::OsString>) -> Vec<std::ffi::OsString> {
    let Some(at) = args.iter().position(|a| a == "convert") else {
        return args;
    };
    args.into_iter()
        .enumerate()
        .map(|(i, a)| match a.to_str() {
            Some(s) if i > at && s.len() > 2 && s.starts_with("-i") && !s.starts_with("-i=") => {
                format!("--in-place={}", &s[2..]).into()
            }
            Some(s) if i > at && s.starts_with("-i=") => format!("--in-place={}", &s[3..]).into(),
            _ => a,
        })
        .collect()
}

/// Errors of a conversion.
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// A document that should be converted cannot be.
    #[error("{file}: document {index} (line {line}){what}: {message}")]
    Document {
        /// File name (`<stdin>` for standard input).
        file: String,
        /// 1-based document number.
        index: usize,
        /// Line where the document starts.
        line: usize,
        /// ` Kind/name` when known.
        what: String,
        /// What is wrong.
        message: String,
    },
    /// Reading or writing failed.
    #[error("{path}: {source}")]
    Io {
        /// The file (or `<stdin>`/`<stdout>`).
        path: String,
        /// Underlying error.
        #[source]
        source: std::io::Error,
    },
    /// `--in-place` without files.
    #[error("--in-place needs --filename")]
    InPlaceWithoutFiles,
}

/// A converted file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The converted text.
    pub output: String,
    /// Warnings, each prefixed with the file and document.
    pub warnings: Vec<String>,
}

/// Splits into documents at lines that are exactly `---`; each chunk keeps its separator line.
fn split_documents(input: &str) -> Vec<(usize, &str)> {
    let mut chunks = Vec::new();
    let mut start = 0;
    let mut start_line = 1;
    let mut offset = 0;
    for (line_no, line) in (1..).zip(input.split_inclusive('\n')) {
        if line.trim_end_matches(['\n', '\r']).trim_end() == "---" && offset > start {
            chunks.push((start_line, &input[start..offset]));
            start = offset;
            start_line = line_no;
        }
        offset += line.len();
    }
    if start < input.len() {
        chunks.push((start_line, &input[start..]));
    }
    chunks
}

/// The contract generation a conversion writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum Generation {
    /// CAPI v1beta2 (CAPI >= v1.11), Proxmox kinds v1alpha2: what `capmox convert` writes.
    #[default]
    #[value(name = "v1beta2")]
    V1beta2,
    /// CAPI v1beta1 (CAPI v1.10), Proxmox kinds v1alpha1, KamajiControlPlane v1alpha1.
    #[value(name = "v1beta1")]
    V1beta1,
}

/// Converts the manifests in `input` (`file` names them in messages).
pub fn convert_text(input: &str, file: &str) -> Result<Outcome, ConvertError> {
    convert_text_to(input, file, Generation::V1beta2)
}

/// Converts the manifests in `input` to the objects of generation `to`.
pub fn convert_text_to(input: &str, file: &str, to: Generation) -> Result<Outcome, ConvertError> {
    let pool_v6 = if to == Generation::V1beta1 {
        ip_pool_families(input)
    } else {
        Default::default()
    };
    let mut output = String::with_capacity(input.len());
    let mut warnings = Vec::new();
    for (index, (line, chunk)) in split_documents(input).into_iter().enumerate() {
        let (separator, body) = match chunk.split_once('\n') {
            Some((first, rest)) if first.trim_end() == "---" => (&chunk[..first.len() + 1], rest),
            _ => ("", chunk),
        };
        let fail = |what: String, message: String| ConvertError::Document {
            file: file.to_owned(),
            index: index + 1,
            line,
            what,
            message,
        };
        let (tokenized, tokens) = Tokens::tokenize(body);
        let doc = match tree::parse_document(&tokenized) {
            Ok(Some(doc)) => doc,
            Ok(None) => {
                output.push_str(chunk);
                continue;
            }
            Err(e) => {
                if body.contains(capmox_api::v1alpha1::API_VERSION) {
                    return Err(fail(String::new(), format!("not valid YAML: {e}")));
                }
                warnings.push(format!(
                    "{file}: document {}: not YAML this tool can read ({e}); left unchanged",
                    index + 1
                ));
                output.push_str(chunk);
                continue;
            }
        };
        let field = |k: &str| {
            doc.root
                .get_path(&[k])
                .and_then(Node::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let (api_version, kind) = (field("apiVersion"), field("kind"));
        let name = doc
            .root
            .get_path(&["metadata", "name"])
            .and_then(Node::as_str)
            .map(|n| tokens.restore(n))
            .unwrap_or_default();
        let what = format!(" {kind}/{name}");
        let prefix = format!("{file}: document {} {kind}/{name}", index + 1);
        if to == Generation::V1beta1 {
            let converted = down(&doc, &tokens, &api_version, &kind, &pool_v6)
                .map_err(|m| fail(what.clone(), tokens.restore(&m)))?;
            match converted {
                Some((d, w)) => {
                    warnings.extend(w.iter().map(|w| format!("{prefix}: {}", tokens.restore(w))));
                    output.push_str(separator);
                    output.push_str(&tokens.restore(&emit::emit(&d)));
                }
                None => output.push_str(chunk),
            }
            continue;
        }
        let converted =
            if api_version == capmox_api::v1alpha1::API_VERSION && proxmox::KINDS.contains(&kind.as_str()) {
                let c = proxmox::convert(&doc, &tokens, &kind)
                    .map_err(|m| fail(what.clone(), tokens.restore(&m)))?;
                warnings.extend(
                    c.warnings
                        .iter()
                        .map(|w| format!("{prefix}: {}", tokens.restore(w))),
                );
                let mut d = c.doc;
                if let Some(Node::Scalar(s)) = d.root.as_map_mut().and_then(|m| m.get_mut("apiVersion")) {
                    s.text = capmox_api::v1alpha2::API_VERSION.to_owned();
                    s.style = Style::Auto;
                }
                Some(d)
            } else if let Some(target) = capi::target_version(&api_version, &kind) {
                let mut d = doc.clone();
                match capi::convert(&mut d.root, &kind, target, &tokens) {
                    Ok(w) => {
                        warnings.extend(w.iter().map(|w| format!("{prefix}: {}", tokens.restore(w))));
                        Some(d)
                    }
                    Err(reason) => {
                        warnings.push(format!(
                            "{prefix}: left at {api_version}: {}",
                            tokens.restore(&reason)
                        ));
                        None
                    }
                }
            } else {
                if capi::is_unconverted_v1beta1(&api_version) {
                    warnings.push(format!(
                        "{prefix}: left at {api_version} (not converted by this tool; CAPI still serves it)"
                    ));
                }
                None
            };
        match converted {
            Some(d) => {
                output.push_str(separator);
                output.push_str(&tokens.restore(&emit::emit(&d)));
            }
            None => output.push_str(chunk),
        }
    }
    Ok(Outcome { output, warnings })
}

/// The in-cluster IP pools defined in `input` (by name): whether each is IPv6 — its first
/// address has a `:`, or (a clusterctl variable there) the variable or else the pool's name says
/// IPv6 or IPv4 (`…IPV6…`, `…-v6-…`). Pools whose family is not clear are left out.
fn ip_pool_families(input: &str) -> std::collections::BTreeMap<String, bool> {
    let mut out = std::collections::BTreeMap::new();
    for (_, chunk) in split_documents(input) {
        let (tokenized, tokens) = Tokens::tokenize(chunk);
        let Ok(Some(doc)) = tree::parse_document(&tokenized) else {
            continue;
        };
        let kind = doc.root.get_path(&["kind"]).and_then(Node::as_str).unwrap_or("");
        if !matches!(kind, "InClusterIPPool" | "GlobalInClusterIPPool") {
            continue;
        }
        let v = tree::to_value(&doc.root);
        let Some(name) = v.pointer("/metadata/name").and_then(|n| n.as_str()) else {
            continue;
        };
        let name = tokens.restore(name);
        let raw = v
            .pointer("/spec/addresses/0")
            .or_else(|| v.pointer("/spec/addresses"))
            .and_then(|a| a.as_str())
            .unwrap_or_default();
        let first = tokens.restore(raw);
        let v6 = if tokens.contains_token(raw) {
            family(&first).or_else(|| family(&name))
        } else if first.is_empty() {
            family(&name)
        } else {
            Some(first.contains(':'))
        };
        if let Some(v6) = v6 {
            out.insert(name, v6);
        }
    }
    out
}

/// Whether a name or variable says IPv6 (`Some(true)`) or IPv4 (`Some(false)`).
fn family(text: &str) -> Option<bool> {
    let t = text.to_ascii_lowercase();
    match (t.contains("v6") || t.contains("inet6"), t.contains("v4")) {
        (true, false) => Some(true),
        (false, true) => Some(false),
        _ => None,
    }
}

/// One document to the v1beta1 generation: `None` when it needs no conversion.
fn down(
    doc: &tree::Document,
    tokens: &Tokens,
    api_version: &str,
    kind: &str,
    pool_v6: &std::collections::BTreeMap<String, bool>,
) -> Result<Option<(tree::Document, Vec<String>)>, String> {
    if api_version == capmox_api::v1alpha2::API_VERSION && proxmox::KINDS.contains(&kind) {
        let c = proxmox::convert_to(doc, tokens, kind, proxmox::Target::V1alpha1, pool_v6)?;
        let mut d = c.doc;
        if let Some(Node::Scalar(s)) = d.root.as_map_mut().and_then(|m| m.get_mut("apiVersion")) {
            s.text = capmox_api::v1alpha1::API_VERSION.to_owned();
            s.style = Style::Auto;
        }
        return Ok(Some((d, c.warnings)));
    }
    if let Some(target) = capi_down::target_version(api_version, kind) {
        let mut d = doc.clone();
        capi_down::convert(&mut d.root, kind, target, tokens)?;
        return Ok(Some((d, Vec::new())));
    }
    if capi_down::is_v1beta2_generation(api_version) {
        return Err(format!("{api_version} {kind} has no v1beta1 conversion here"));
    }
    Ok(None)
}

/// Runs `capmox convert`: warnings go to standard error.
pub fn run(args: &ConvertArgs) -> Result<(), ConvertError> {
    let stderr = |w: &str| eprintln!("warning: {w}");
    if args.filenames.is_empty() {
        if args.in_place.is_some() {
            return Err(ConvertError::InPlaceWithoutFiles);
        }
        let mut input = String::new();
        std::io::stdin()
            .read_to_string(&mut input)
            .map_err(|source| ConvertError::Io {
                path: "<stdin>".into(),
                source,
            })?;
        let out = convert_text_to(&input, "<stdin>", args.to)?;
        out.warnings.iter().for_each(|w| stderr(w));
        return write_stdout(&out.output);
    }
    let many = args.filenames.len() > 1;
    for path in &args.filenames {
        let shown = path.display().to_string();
        let io = |source| ConvertError::Io {
            path: shown.clone(),
            source,
        };
        let input = std::fs::read_to_string(path).map_err(io)?;
        let out = convert_text_to(&input, &shown, args.to)?;
        out.warnings.iter().for_each(|w| stderr(w));
        match &args.in_place {
            Some(suffix) => write_in_place(path, &input, &out.output, suffix)?,
            None => {
                if many {
                    eprintln!("--- {shown} ---");
                }
                write_stdout(&out.output)?;
            }
        }
    }
    Ok(())
}

fn write_stdout(text: &str) -> Result<(), ConvertError> {
    std::io::stdout()
        .write_all(text.as_bytes())
        .map_err(|source| ConvertError::Io {
            path: "<stdout>".into(),
            source,
        })
}

fn write_in_place(path: &Path, original: &str, converted: &str, suffix: &str) -> Result<(), ConvertError> {
    let io = |p: &Path| {
        let p = p.display().to_string();
        move |source| ConvertError::Io { path: p, source }
    };
    if !suffix.is_empty() {
        let mut backup = path.as_os_str().to_owned();
        backup.push(suffix);
        let backup = PathBuf::from(backup);
        std::fs::write(&backup, original).map_err(io(&backup))?;
    }
    std::fs::write(path, converted).map_err(io(path))
}

#[cfg(test)]
#[path = "convert_tests.rs"]
mod tests;
