//! Property strings as pve-common's `PVE::JSONSchema::parse_property_string` parses and checks
//! them, with the error texts PVE puts into `errors.<param>` (for example
//! `invalid format - format error\nboot.legacy: value does not match the regex pattern\n`).

pub mod inline;
pub mod named;

use std::collections::{BTreeMap, HashMap};
use std::sync::{LazyLock, Mutex};

use regex::Regex;

use crate::version::PveVersion;

/// The type of a sub-key.
#[derive(Debug, Clone, Copy)]
pub enum Ty {
    /// `boolean` (`1|on|yes|true`, `0|off|no|false` are normalised to 1/0 first).
    Bool,
    /// `integer` with bounds.
    Int(Option<i64>, Option<i64>),
    /// `number` with bounds.
    Num(Option<f64>, Option<f64>),
    /// `string` with `enum`.
    Enum(&'static [&'static str]),
    /// `string` with `pattern` (anchored as PVE anchors it).
    Pattern(&'static str),
    /// Any string.
    Str,
    /// `pve-volume-id-or-qm-path` / `pve-volume-id`.
    Volume,
    /// `disk-size`.
    Size,
    /// `mac-addr` (unicast).
    Mac,
    /// `pve-bridge-id`.
    Bridge,
    /// `pve-configid`.
    ConfigId,
    /// `urlencoded`.
    Urlencoded,
    /// A format with its own verifier (its `die` text, without `invalid format - `).
    Custom(fn(&str) -> Result<(), String>),
}

/// Which versions have a sub-key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Avail {
    /// 8.4 and 9.1.
    Both,
    /// 8.4 only (gone in 9.1).
    Until91,
    /// 9.1 only.
    Since91,
}

impl Avail {
    /// Whether `version` has it.
    pub fn has(self, version: PveVersion) -> bool {
        match self {
            Avail::Both => true,
            Avail::Until91 => !version.is_9(),
            Avail::Since91 => version.is_9(),
        }
    }
}

/// One sub-key of a property-string format.
#[derive(Debug, Clone, Copy)]
pub struct Sub {
    /// Key.
    pub name: &'static str,
    /// Type.
    pub ty: Ty,
    /// `default_key`: a bare value is this key's.
    pub default_key: bool,
    /// May be omitted.
    pub optional: bool,
    /// `maxLength`.
    pub max_len: Option<usize>,
    /// `alias`: the key this one stands for.
    pub alias: Option<&'static str>,
    /// `keyAlias`: the key that records which alias was used (`virtio=<mac>` → `model=virtio`).
    pub key_alias: Option<&'static str>,
    /// Versions having it.
    pub avail: Avail,
}

const fn sub(name: &'static str, ty: Ty, default_key: bool, optional: bool) -> Sub {
    Sub {
        name,
        ty,
        default_key,
        optional,
        max_len: None,
        alias: None,
        key_alias: None,
        avail: Avail::Both,
    }
}

/// An optional sub-key.
pub const fn opt(name: &'static str, ty: Ty) -> Sub {
    sub(name, ty, false, true)
}

/// A required sub-key.
pub const fn req(name: &'static str, ty: Ty) -> Sub {
    sub(name, ty, false, false)
}

/// The required default key.
pub const fn dkey(name: &'static str, ty: Ty) -> Sub {
    sub(name, ty, true, false)
}

/// The optional default key.
pub const fn dkey_opt(name: &'static str, ty: Ty) -> Sub {
    sub(name, ty, true, true)
}

/// An alias of `target`.
pub const fn alias(name: &'static str, target: &'static str) -> Sub {
    let mut s = sub(name, Ty::Str, false, true);
    s.alias = Some(target);
    s
}

/// An alias of `target` that records its own name in `key` (net models carrying the MAC).
pub const fn key_alias(name: &'static str, target: &'static str, key: &'static str) -> Sub {
    let mut s = alias(name, target);
    s.key_alias = Some(key);
    s
}

impl Sub {
    /// With a `maxLength`.
    pub const fn max_len(mut self, n: usize) -> Self {
        self.max_len = Some(n);
        self
    }

    /// Only on 8.4.
    pub const fn until91(mut self) -> Self {
        self.avail = Avail::Until91;
        self
    }

    /// Only on 9.1.
    pub const fn since91(mut self) -> Self {
        self.avail = Avail::Since91;
        self
    }
}

/// A parsed property string: key → value (booleans as `1`/`0`).
pub type Parsed = BTreeMap<String, String>;

static REGEXES: LazyLock<Mutex<HashMap<&'static str, Option<Regex>>>> =
    LazyLock::new(|| Mutex::new(HashMap::new()));

/// Whether `value` matches `pattern` entirely (PVE tests `m/^$pattern$/`).
pub fn pattern_matches(pattern: &'static str, value: &str) -> bool {
    let mut cache = REGEXES.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    cache
        .entry(pattern)
        .or_insert_with(|| Regex::new(&format!("^(?:{pattern})$")).ok())
        .as_ref()
        .is_some_and(|re| re.is_match(value))
}

/// `parse_boolean`.
pub fn parse_boolean(v: &str) -> Option<&'static str> {
    match v.to_ascii_lowercase().as_str() {
        "1" | "on" | "yes" | "true" => Some("1"),
        "0" | "off" | "no" | "false" => Some("0"),
        _ => None,
    }
}

fn is_integer(v: &str) -> bool {
    let t = v.strip_prefix(['+', '-']).unwrap_or(v);
    !t.is_empty() && t.chars().all(|c| c.is_ascii_digit())
}

/// `is_number`.
pub fn is_number(v: &str) -> bool {
    pattern_matches(r"[+-]?(?:\d+\.\d+|\d+\.|\.\d+|\d+)(?:[eE][+-]?\d+)?", v)
}

/// Checks a volume id (`pve-volume-id-or-qm-path`).
pub fn check_volume(v: &str) -> Result<(), String> {
    static VOLID: LazyLock<Option<Regex>> =
        LazyLock::new(|| Regex::new(r"^(?i:[a-z][a-z0-9\-_.]*[a-z0-9]):.+$").ok());
    if v == "none" || v == "cdrom" || v.starts_with('/') || VOLID.as_ref().is_some_and(|r| r.is_match(v)) {
        Ok(())
    } else {
        Err(format!("unable to parse volume ID '{v}'"))
    }
}

fn check_format(ty: Ty, v: &str) -> Result<(), String> {
    let bad = |msg: String| Err(format!("invalid format - {msg}\n"));
    match ty {
        Ty::Volume => check_volume(v).or_else(bad),
        Ty::Size if crate::propstr::parse_size_pve(v).is_none() => {
            bad(format!("value does not look like a valid disk size: {v}"))
        }
        Ty::Mac if !pattern_matches(r"(?i:[a-f0-9][02468ace](?::[a-f0-9]{2}){5})", v) => {
            bad("value does not look like a valid unicast MAC address".into())
        }
        Ty::Bridge if !pattern_matches(r"[-_.\w\d]+", v) => bad(format!("invalid bridge ID '{v}'")),
        Ty::ConfigId if !pattern_matches(r"[a-zA-Z][a-zA-Z0-9_\-]*", v) => {
            bad(format!("invalid configuration ID '{v}'"))
        }
        Ty::Urlencoded if !pattern_matches(r"[-%a-zA-Z0-9_.!~*'()]*", v) => {
            bad(format!("invalid urlencoded string: {v}"))
        }
        Ty::Custom(f) => f(v).or_else(bad),
        _ => Ok(()),
    }
}

/// `check_prop` of one sub-key value: type, format, pattern, length, bounds, enum.
fn check_value(s: &Sub, v: &str) -> Result<(), String> {
    match s.ty {
        Ty::Bool if v != "1" && v != "0" => return Err(format!("type check ('boolean') failed - got '{v}'")),
        Ty::Int(..) if !is_integer(v) => return Err(format!("type check ('integer') failed - got '{v}'")),
        Ty::Num(..) if !is_number(v) => return Err(format!("type check ('number') failed - got '{v}'")),
        _ => {}
    }
    check_format(s.ty, v)?;
    if let Ty::Pattern(p) = s.ty
        && !pattern_matches(p, v)
    {
        return Err("value does not match the regex pattern".into());
    }
    if let Some(max) = s.max_len
        && v.chars().count() > max
    {
        return Err(format!("value may only be {max} characters long"));
    }
    let bounds = match s.ty {
        Ty::Int(lo, hi) => Some((lo.map(|x| x as f64), hi.map(|x| x as f64))),
        Ty::Num(lo, hi) => Some((lo, hi)),
        _ => None,
    };
    if let (Some((lo, hi)), Ok(n)) = (bounds, v.parse::<f64>()) {
        if let Some(hi) = hi
            && n > hi
        {
            return Err(format!("value must have a maximum value of {}", num_text(hi)));
        }
        if let Some(lo) = lo
            && n < lo
        {
            return Err(format!("value must have a minimum value of {}", num_text(lo)));
        }
    }
    if let Ty::Enum(values) = s.ty
        && !values.contains(&v)
    {
        return Err(format!(
            "value '{v}' does not have a value in the enumeration '{}'",
            values.join(", ")
        ));
    }
    Ok(())
}

fn num_text(n: f64) -> String {
    if n.fract() == 0.0 {
        format!("{n:.0}")
    } else {
        n.to_string()
    }
}

fn lookup<'a>(format: &'a [Sub], version: PveVersion, key: &str) -> Option<&'a Sub> {
    format.iter().find(|s| s.name == key && s.avail.has(version))
}

/// Parses and checks `value` of parameter `param` against `format` as the given version does.
/// The error is the whole `errors.<param>` text.
pub fn parse(param: &str, value: &str, format: &[Sub], version: PveVersion) -> Result<Parsed, String> {
    let fail = |msg: &str| format!("invalid format - {msg}\n");
    let mut res = Parsed::new();
    let mut default_key: Option<&str> = None;
    for part in value.split(',') {
        if part.trim().is_empty() {
            continue;
        }
        match part.split_once('=') {
            Some((k, v)) if !k.is_empty() && !v.is_empty() => {
                if res.contains_key(k) {
                    return Err(fail(&format!(
                        "duplicate key in comma-separated list property: {k}"
                    )));
                }
                let mut key = k.to_owned();
                let mut schema = lookup(format, version, k);
                if let Some(target) = schema.and_then(|s| s.alias) {
                    if let Some(ka) = schema.and_then(|s| s.key_alias) {
                        if res.contains_key(ka) {
                            return Err(fail(&format!("key alias '{ka}' is already defined")));
                        }
                        res.insert(ka.to_owned(), k.to_owned());
                    }
                    key = target.to_owned();
                    schema = lookup(format, version, target);
                    if res.contains_key(&key) {
                        return Err(fail(&format!("key '{key}' is already defined (via alias)")));
                    }
                }
                let Some(schema) = schema else {
                    return Err(fail(&format!(
                        "invalid key in comma-separated list property: {key}"
                    )));
                };
                let v = match schema.ty {
                    Ty::Bool => parse_boolean(v).unwrap_or(v),
                    _ => v,
                };
                res.insert(key, v.to_owned());
            }
            None => {
                if let Some(d) = default_key {
                    return Err(fail(&format!(
                        "duplicate key in comma-separated list property: {d}"
                    )));
                }
                let Some(d) = format.iter().find(|s| s.default_key && s.avail.has(version)) else {
                    return Err(fail(
                        "value without key, but schema does not define a default key",
                    ));
                };
                default_key = Some(d.name);
                if res.contains_key(d.name) {
                    return Err(fail(&format!(
                        "duplicate key in comma-separated list property: {}",
                        d.name
                    )));
                }
                let v = match d.ty {
                    Ty::Bool => parse_boolean(part).unwrap_or(part),
                    _ => part,
                };
                res.insert(d.name.to_owned(), v.to_owned());
            }
            Some(_) => return Err(fail("missing key in comma-separated list property")),
        }
    }
    let mut errors = BTreeMap::new();
    for s in format
        .iter()
        .filter(|s| s.avail.has(version) && s.alias.is_none())
    {
        match res.get(s.name) {
            None if !s.optional => {
                errors.insert(s.name, "property is missing and it is not optional".to_owned());
            }
            Some(v) => {
                if let Err(e) = check_value(s, v) {
                    errors.insert(s.name, e);
                }
            }
            None => {}
        }
    }
    if errors.is_empty() {
        return Ok(res);
    }
    let mut msg = String::from("invalid format - format error\n");
    for (k, e) in errors {
        msg.push_str(&format!("{param}.{k}: {e}\n"));
    }
    Err(msg)
}

/// A failed check of a whole value in PVE's words (`invalid format - <msg>\n`).
pub fn invalid(msg: &str) -> String {
    format!("invalid format - {msg}\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn boot_legacy_is_the_default_key() {
        let v = PveVersion::V8_4;
        let err = parse("boot", ";ide0", named::BOOT, v).unwrap_err();
        assert_eq!(
            err,
            "invalid format - format error\nboot.legacy: value does not match the regex pattern\n"
        );
        assert!(parse("boot", "cdn", named::BOOT, v).is_ok());
        assert!(parse("boot", "order=scsi0;net0", named::BOOT, v).is_ok());
    }

    #[test]
    fn keys_aliases_and_booleans() {
        let v = PveVersion::V9_1;
        let p = parse("net0", "virtio=BC:24:11:00:00:01,bridge=vmbr0", inline::NET, v).unwrap();
        assert_eq!(p["model"], "virtio");
        assert_eq!(p["macaddr"], "BC:24:11:00:00:01");
        assert_eq!(
            parse("net0", "virtio,bogus=1", inline::NET, v).unwrap_err(),
            "invalid format - invalid key in comma-separated list property: bogus\n"
        );
        assert_eq!(
            parse("scsi0", "local:4,ssd=on", inline::SCSI, v).unwrap()["ssd"],
            "1"
        );
        assert!(parse("scsi0", "local:4,cyls=1", inline::SCSI, PveVersion::V8_4).is_ok());
        assert!(parse("scsi0", "local:4,cyls=1", inline::SCSI, v).is_err());
        let err = parse("net0", "virtio,tag=5000", inline::NET, v).unwrap_err();
        assert!(
            err.contains("net0.tag: value must have a maximum value of 4094\n"),
            "{err}"
        );
    }
}
