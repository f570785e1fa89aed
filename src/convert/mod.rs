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

mod capi;
pub mod emit;
mod proxmox;
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

/// Converts the manifests in `input` (`file` names them in messages).
pub fn convert_text(input: &str, file: &str) -> Result<Outcome, ConvertError> {
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
        let out = convert_text(&input, "<stdin>")?;
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
        let out = convert_text(&input, &shown)?;
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
