//! Registry of served kinds: built-in kinds and kinds defined by installed CRDs.

use std::sync::Arc;

use base64::Engine;
use serde_json::{Value, json};

use super::admission::{self, FieldErr, VersionSchema};

/// How objects of a CRD are converted between versions.
#[derive(Debug, Clone, PartialEq)]
pub enum Conversion {
    /// Only `apiVersion` is rewritten.
    None,
    /// core/v1 ↔ events.k8s.io/v1 Events (one resource, fields mapped).
    Events,
    /// A ConversionReview v1 is sent to the webhook.
    Webhook {
        /// Webhook URL (`clientConfig.url`, or a `service` reference rendered as an in-cluster URL).
        url: String,
        /// PEM bundle from `clientConfig.caBundle`.
        ca_bundle: Option<Vec<u8>>,
    },
}

/// One version of a kind.
#[derive(Debug)]
pub struct VersionDef {
    /// Version name (`v1alpha2`).
    pub name: String,
    /// Whether it is served.
    pub served: bool,
    /// Whether it is the storage version.
    pub storage: bool,
    /// Whether the status subresource is enabled.
    pub status: bool,
    /// Structural schema, for CRDs.
    pub schema: Option<Arc<VersionSchema>>,
    /// The schema as written in the CRD (published under `/openapi/v3`).
    pub raw_schema: Option<Value>,
    /// `additionalPrinterColumns` (raw).
    pub columns: Vec<Value>,
}

/// A kind served by the server.
#[derive(Debug)]
pub struct ResourceDef {
    /// API group (empty for core).
    pub group: String,
    /// Plural resource name.
    pub plural: String,
    /// Singular name.
    pub singular: String,
    /// Kind.
    pub kind: String,
    /// List kind.
    pub list_kind: String,
    /// Namespaced or cluster-scoped.
    pub namespaced: bool,
    /// Short names.
    pub short_names: Vec<String>,
    /// Categories.
    pub categories: Vec<String>,
    /// Versions (served or not).
    pub versions: Vec<VersionDef>,
    /// Defined by a CRD.
    pub custom: bool,
    /// Conversion strategy.
    pub conversion: Conversion,
    /// OpenAPI schema of a built-in kind (CRDs have theirs per version).
    pub builtin_schema: Option<Arc<VersionSchema>>,
}

impl ResourceDef {
    /// Name of the storage version.
    pub fn storage_version(&self) -> &str {
        self.versions
            .iter()
            .find(|v| v.storage)
            .or(self.versions.first())
            .map(|v| v.name.as_str())
            .unwrap_or("v1")
    }

    /// Looks up a version.
    pub fn version(&self, v: &str) -> Option<&VersionDef> {
        self.versions.iter().find(|x| x.name == v)
    }

    /// `apiVersion` string for a version.
    pub fn api_version(&self, v: &str) -> String {
        if self.group.is_empty() {
            v.to_string()
        } else {
            format!("{}/{v}", self.group)
        }
    }

    /// Whether `metadata.generation` is maintained for this kind.
    pub fn tracks_generation(&self) -> bool {
        self.custom || self.plural == "customresourcedefinitions"
    }

    /// Whether the status subresource is enabled in version `v`.
    pub fn has_status(&self, v: &str) -> bool {
        self.version(v).is_some_and(|x| x.status)
    }

    /// Identity of the stored collection (events.k8s.io Events are stored with core Events).
    pub fn res_id(&self) -> (String, String) {
        if self.conversion == Conversion::Events {
            return (String::new(), "events".into());
        }
        (self.group.clone(), self.plural.clone())
    }

    /// `apiVersion` of the stored form.
    pub fn storage_api_version(&self) -> String {
        if self.conversion == Conversion::Events {
            return "v1".into();
        }
        self.api_version(self.storage_version())
    }

    /// The schema of version `v` (a CRD version's, a built-in kind's, or one accepting anything)
    /// for typed operations: server-side apply and managed fields.
    pub fn schema_for(&self, v: &str) -> Arc<VersionSchema> {
        self.version(v)
            .and_then(|x| x.schema.clone())
            .or_else(|| self.builtin_schema.clone())
            .unwrap_or_else(admission::untyped)
    }

    /// The schema pruning a write (CRD versions and built-in kinds), if any.
    pub fn pruning_schema(&self, v: &str) -> Option<Arc<VersionSchema>> {
        self.version(v)
            .and_then(|x| x.schema.clone())
            .or_else(|| self.builtin_schema.clone())
    }

    /// Verbs served on the collection and its objects.
    pub fn verbs(&self) -> Vec<&'static str> {
        let mut v = vec![
            "create",
            "delete",
            "deletecollection",
            "get",
            "list",
            "patch",
            "update",
            "watch",
        ];
        if self.plural == "namespaces" && self.group.is_empty() {
            v.retain(|x| *x != "deletecollection");
        }
        v
    }
}

fn builtin(
    group: &str,
    versions: &[&str],
    plural: &str,
    kind: &str,
    namespaced: bool,
    short: &[&str],
    status: bool,
) -> ResourceDef {
    ResourceDef {
        group: group.into(),
        plural: plural.into(),
        singular: kind.to_lowercase(),
        kind: kind.into(),
        list_kind: format!("{kind}List"),
        namespaced,
        short_names: short.iter().map(|s| s.to_string()).collect(),
        categories: Vec::new(),
        versions: versions
            .iter()
            .enumerate()
            .map(|(i, v)| VersionDef {
                name: v.to_string(),
                served: true,
                storage: i == 0,
                status,
                schema: None,
                raw_schema: None,
                columns: Vec::new(),
            })
            .collect(),
        custom: false,
        conversion: if plural == "events" {
            Conversion::Events
        } else {
            Conversion::None
        },
        builtin_schema: super::builtin_schemas::schema(group, plural)
            .and_then(|s| admission::compile(&s).ok())
            .map(Arc::new),
    }
}

/// The built-in kinds served by the in-tree server.
pub fn builtins() -> Vec<Arc<ResourceDef>> {
    vec![
        Arc::new(builtin(
            "",
            &["v1"],
            "namespaces",
            "Namespace",
            false,
            &["ns"],
            true,
        )),
        Arc::new(builtin(
            "",
            &["v1"],
            "configmaps",
            "ConfigMap",
            true,
            &["cm"],
            false,
        )),
        Arc::new(builtin("", &["v1"], "secrets", "Secret", true, &[], false)),
        Arc::new(builtin("", &["v1"], "events", "Event", true, &["ev"], false)),
        Arc::new(builtin(
            "events.k8s.io",
            &["v1"],
            "events",
            "Event",
            true,
            &["ev"],
            false,
        )),
        Arc::new(builtin(
            "",
            &["v1"],
            "serviceaccounts",
            "ServiceAccount",
            true,
            &["sa"],
            false,
        )),
        Arc::new(builtin(
            "rbac.authorization.k8s.io",
            &["v1"],
            "clusterroles",
            "ClusterRole",
            false,
            &[],
            false,
        )),
        Arc::new(builtin(
            "rbac.authorization.k8s.io",
            &["v1"],
            "clusterrolebindings",
            "ClusterRoleBinding",
            false,
            &[],
            false,
        )),
        Arc::new(builtin(
            "coordination.k8s.io",
            &["v1"],
            "leases",
            "Lease",
            true,
            &[],
            false,
        )),
        Arc::new(builtin(
            "apiextensions.k8s.io",
            &["v1"],
            "customresourcedefinitions",
            "CustomResourceDefinition",
            false,
            &["crd", "crds"],
            true,
        )),
    ]
}

/// The set of kinds currently served.
#[derive(Debug, Default)]
pub struct Registry {
    defs: Vec<Arc<ResourceDef>>,
}

impl Registry {
    /// A registry holding the built-in kinds.
    pub fn new() -> Self {
        Self { defs: builtins() }
    }

    /// All kinds.
    pub fn all(&self) -> &[Arc<ResourceDef>] {
        &self.defs
    }

    /// Finds the kind served at `group`/`version`/`plural`.
    pub fn lookup(&self, group: &str, version: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.defs
            .iter()
            .find(|d| d.group == group && d.plural == plural && d.version(version).is_some_and(|v| v.served))
            .cloned()
    }

    /// Finds a kind by group and plural regardless of version.
    pub fn by_res(&self, group: &str, plural: &str) -> Option<Arc<ResourceDef>> {
        self.defs
            .iter()
            .find(|d| d.group == group && d.plural == plural)
            .cloned()
    }

    /// Adds or replaces a custom kind.
    pub fn upsert(&mut self, def: ResourceDef) {
        self.defs
            .retain(|d| !(d.group == def.group && d.plural == def.plural));
        self.defs.push(Arc::new(def));
    }

    /// Removes a custom kind.
    pub fn remove(&mut self, group: &str, plural: &str) {
        self.defs
            .retain(|d| !(d.custom && d.group == group && d.plural == plural));
    }
}

fn s(v: &Value, ptr: &str) -> String {
    v.pointer(ptr)
        .and_then(Value::as_str)
        .unwrap_or_default()
        .to_string()
}

fn strs(v: &Value, ptr: &str) -> Vec<String> {
    v.pointer(ptr)
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
        .unwrap_or_default()
}

fn ferr(field: &str, reason: &str, message: String) -> FieldErr {
    FieldErr {
        field: field.into(),
        reason: reason.into(),
        message,
    }
}

/// The defaults kube-apiserver fills into a CRD (apiextensions v1 `SetDefaults_*`): conversion
/// strategy `None`, `names.singular` (lower-case kind) and `names.listKind` (`<Kind>List`), and
/// port 443 of a conversion webhook service. Applied before field ownership is recorded, so the
/// writer owns them as on the real server.
pub fn set_defaults(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    let conversion = spec.entry("conversion").or_insert_with(|| json!({}));
    if let Some(c) = conversion.as_object_mut() {
        c.entry("strategy").or_insert_with(|| json!("None"));
        if let Some(svc) = c
            .get_mut("webhook")
            .and_then(|w| w.get_mut("clientConfig"))
            .and_then(|cc| cc.get_mut("service"))
            .and_then(Value::as_object_mut)
        {
            svc.entry("port").or_insert_with(|| json!(443));
        }
    }
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        if !kind.is_empty() {
            names
                .entry("singular")
                .or_insert_with(|| json!(kind.to_lowercase()));
            names
                .entry("listKind")
                .or_insert_with(|| json!(format!("{kind}List")));
        }
    }
}

/// Validates a CRD object and builds the kind it defines.
pub fn from_crd(crd: &Value) -> Result<ResourceDef, Vec<FieldErr>> {
    let mut errs = Vec::new();
    let group = s(crd, "/spec/group");
    let plural = s(crd, "/spec/names/plural");
    let kind = s(crd, "/spec/names/kind");
    let name = s(crd, "/metadata/name");
    if group.is_empty() {
        errs.push(ferr("spec.group", "FieldValueRequired", "Required value".into()));
    }
    if plural.is_empty() {
        errs.push(ferr(
            "spec.names.plural",
            "FieldValueRequired",
            "Required value".into(),
        ));
    }
    if kind.is_empty() {
        errs.push(ferr(
            "spec.names.kind",
            "FieldValueRequired",
            "Required value".into(),
        ));
    }
    if name != format!("{plural}.{group}") {
        errs.push(ferr(
            "metadata.name",
            "FieldValueInvalid",
            format!("Invalid value: {name:?}: must be spec.names.plural+\".\"+spec.group"),
        ));
    }
    let scope = s(crd, "/spec/scope");
    if scope != "Namespaced" && scope != "Cluster" {
        errs.push(ferr(
            "spec.scope",
            "FieldValueNotSupported",
            format!("Unsupported value: {scope:?}: supported values: \"Cluster\", \"Namespaced\""),
        ));
    }
    let mut versions = Vec::new();
    let raw_versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    if raw_versions.is_empty() {
        errs.push(ferr(
            "spec.versions",
            "FieldValueInvalid",
            "Invalid value: null: must have exactly one version marked as storage version".into(),
        ));
    }
    for (i, v) in raw_versions.iter().enumerate() {
        let schema = match v.pointer("/schema/openAPIV3Schema") {
            Some(raw) => {
                errs.extend(admission::structural_violations(
                    raw,
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                ));
                match admission::compile(raw) {
                    Ok(sch) => Some(Arc::new(sch)),
                    Err(e) => {
                        errs.push(ferr(
                            &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                            "FieldValueInvalid",
                            format!("Invalid value: {e}"),
                        ));
                        None
                    }
                }
            }
            None => None,
        };
        versions.push(VersionDef {
            name: s(v, "/name"),
            served: v.get("served").and_then(Value::as_bool).unwrap_or(false),
            storage: v.get("storage").and_then(Value::as_bool).unwrap_or(false),
            status: v.pointer("/subresources/status").is_some(),
            schema,
            raw_schema: v.pointer("/schema/openAPIV3Schema").cloned(),
            columns: v
                .get("additionalPrinterColumns")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        });
    }
    if !raw_versions.is_empty() && versions.iter().filter(|v| v.storage).count() != 1 {
        errs.push(ferr(
            "spec.versions",
            "FieldValueInvalid",
            "Invalid value: ...: must have exactly one version marked as storage version".into(),
        ));
    }
    let conversion = if s(crd, "/spec/conversion/strategy") == "Webhook" {
        let cc = crd
            .pointer("/spec/conversion/webhook/clientConfig")
            .cloned()
            .unwrap_or(Value::Null);
        let url = match cc.get("url").and_then(Value::as_str) {
            Some(u) => u.to_string(),
            None => format!(
                "https://{}.{}.svc:{}{}",
                s(&cc, "/service/name"),
                s(&cc, "/service/namespace"),
                cc.pointer("/service/port").and_then(Value::as_u64).unwrap_or(443),
                s(&cc, "/service/path"),
            ),
        };
        let ca_bundle = cc
            .get("caBundle")
            .and_then(Value::as_str)
            .and_then(|b| base64::engine::general_purpose::STANDARD.decode(b).ok());
        Conversion::Webhook { url, ca_bundle }
    } else {
        Conversion::None
    };
    if !errs.is_empty() {
        return Err(errs);
    }
    let singular = match s(crd, "/spec/names/singular") {
        x if x.is_empty() => kind.to_lowercase(),
        x => x,
    };
    let list_kind = match s(crd, "/spec/names/listKind") {
        x if x.is_empty() => format!("{kind}List"),
        x => x,
    };
    Ok(ResourceDef {
        group,
        plural,
        singular,
        kind,
        list_kind,
        namespaced: scope == "Namespaced",
        short_names: strs(crd, "/spec/names/shortNames"),
        categories: strs(crd, "/spec/names/categories"),
        versions,
        custom: true,
        conversion,
        builtin_schema: None,
    })
}

/// Orders versions the way Kubernetes does (GA > beta > alpha, then by numbers, descending).
pub fn version_priority(v: &str) -> (u8, u32, u32) {
    let rest = match v.strip_prefix('v') {
        Some(r) => r,
        None => return (0, 0, 0),
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    let major: u32 = match digits.parse() {
        Ok(m) => m,
        Err(_) => return (0, 0, 0),
    };
    let tail = &rest[digits.len()..];
    if tail.is_empty() {
        return (3, major, 0);
    }
    let (stage, num) = if let Some(n) = tail.strip_prefix("beta") {
        (2, n)
    } else if let Some(n) = tail.strip_prefix("alpha") {
        (1, n)
    } else {
        return (0, 0, 0);
    };
    match num.parse() {
        Ok(n) => (stage, major, n),
        Err(_) => (0, 0, 0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn priority_orders_versions() {
        let mut v = vec!["v1alpha1", "v1beta2", "v1", "v1beta1", "v2", "v1alpha2"];
        v.sort_by_key(|x| std::cmp::Reverse(version_priority(x)));
        assert_eq!(v, vec!["v2", "v1", "v1beta2", "v1beta1", "v1alpha2", "v1alpha1"]);
    }

    #[test]
    fn crd_name_must_match() {
        let crd = json!({
            "metadata": {"name": "foos.wrong.io"},
            "spec": {"group": "example.io", "scope": "Namespaced",
                     "names": {"plural": "foos", "kind": "Foo"},
                     "versions": [{"name": "v1", "served": true, "storage": true}]}
        });
        let errs = from_crd(&crd).unwrap_err();
        assert_eq!(errs[0].field, "metadata.name");
    }
}
