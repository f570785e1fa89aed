//! `ProxmoxVMImage` (short `pvmimage`): a Proxmox VE VM template made from a disk image at a URL
//! — downloaded by Proxmox itself (`download-url`, content `import`), imported into a new VM's
//! disk (`import-from`) and converted to a template — or an existing template of the same name
//! and image reused ("ensure existence"). `ProxmoxVirtualMachine` and `ProxmoxMachine` name one
//! with `spec.imageRef`.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::spec::{CredentialsRef, DeletionPolicy, OsType};
use crate::v1alpha2::{NetworkModel, VmIdRange, schema};

/// The kind.
pub const IMAGE_KIND: &str = "ProxmoxVMImage";
/// The plural resource name.
pub const IMAGE_PLURAL: &str = "proxmoxvmimages";
/// The finalizer the controller holds while the image's template may exist.
pub const IMAGE_FINALIZER: &str = "proxmoxvmimage.vm.capmox-rs.io";
/// The prefix of the Proxmox tag a template made from an image carries: `capmox-image_<key>`,
/// where the key names the image's content (its checksum, or its URL without one), so that a
/// template of the same name and image is found and reused.
pub const IMAGE_TAG_PREFIX: &str = "capmox-image_";
/// `Ready` of an image: its template exists on every node.
pub const IMAGE_READY_CONDITION: &str = "Ready";

/// Pattern of `spec.url`: `http://` or `https://` (what Proxmox's `download-url` takes).
pub const URL_PATTERN: &str = r"^https?://[^\s]+$";
/// Pattern of a template name (Proxmox's DNS-name format).
pub const TEMPLATE_NAME_PATTERN: &str =
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?\.)*[a-zA-Z0-9](?:[a-zA-Z0-9\-]*[a-zA-Z0-9])?$";
/// CEL: exactly one of `node` and `nodes`.
pub const RULE_ONE_PLACE: &str = "has(self.node) != has(self.nodes)";
/// CEL: a checksum comes with its algorithm.
pub const RULE_CHECKSUM_PAIR: &str = "has(self.checksum) == has(self.checksumAlgorithm)";
/// CEL: a fixed VMID or a range, not both; a fixed VMID names one template.
pub const RULE_ONE_VMID_SOURCE: &str =
    "!has(self.templateVMID) || (!has(self.vmIDRange) && (!has(self.nodes) || size(self.nodes) == 1))";

/// A Proxmox VE VM template made from a disk image at a URL.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[kube(
    group = "vm.capmox-rs.io",
    version = "v1alpha1",
    kind = "ProxmoxVMImage",
    doc = "ProxmoxVMImage is a Proxmox VE VM template made from a disk image at a URL (downloaded by Proxmox, imported, converted to a template), or an existing one of the same name and image.",
    plural = "proxmoxvmimages",
    singular = "proxmoxvmimage",
    namespaced,
    status = "ProxmoxVMImageStatus",
    shortname = "pvmimage",
    category = "proxmox",
    derive = "PartialEq",
    derive = "Default",
    printcolumn = r#"{"name":"Phase","type":"string","description":"Where the image stands","jsonPath":".status.phase"}"#,
    printcolumn = r#"{"name":"Progress","type":"integer","description":"Percent downloaded","jsonPath":".status.progress"}"#,
    printcolumn = r#"{"name":"Node","type":"string","description":"Node of the template","jsonPath":".status.node"}"#,
    printcolumn = r#"{"name":"VMID","type":"integer","description":"VMID of the template","jsonPath":".status.templateVMID"}"#,
    printcolumn = r#"{"name":"Age","type":"date","jsonPath":".metadata.creationTimestamp"}"#
)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-validations" = [
    {"rule": RULE_ONE_PLACE, "message": "set exactly one of node and nodes"},
    {"rule": RULE_CHECKSUM_PAIR, "message": "checksum and checksumAlgorithm go together"},
    {"rule": RULE_ONE_VMID_SOURCE, "message": "templateVMID names one template: not with vmIDRange or several nodes"}
]))]
pub struct ProxmoxVMImageSpec {
    /// A Secret in this namespace with the Proxmox connection (as a ProxmoxVirtualMachine's);
    /// the manager's global credentials when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub credentials_ref: Option<CredentialsRef>,

    /// Where Proxmox downloads the image from (`http://` or `https://`).
    #[schemars(regex(pattern = URL_PATTERN), length(max = 2048))]
    pub url: String,

    /// The image's expected checksum (hex); Proxmox refuses a download that does not match.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^[0-9a-fA-F]+$"), length(max = 128))]
    pub checksum: Option<String>,

    /// The algorithm of `checksum`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checksum_algorithm: Option<ChecksumAlgorithm>,

    /// The node to make the template on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub node: Option<String>,

    /// Nodes to make the template on, one template on each.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1, max = 32), extend("x-kubernetes-list-type" = "set"))]
    pub nodes: Option<Vec<String>>,

    /// A file storage with the `import` content type, where Proxmox puts the downloaded image.
    #[schemars(length(min = 1))]
    pub storage: String,

    /// The image's format (default `qcow2`): the downloaded file's extension.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "qcow2"))]
    pub format: Option<ImageFormat>,

    /// The template's name in Proxmox (the object's name when unset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = TEMPLATE_NAME_PATTERN), length(max = 63))]
    pub template_name: Option<String>,

    /// The template's VMID (Proxmox's next free one, or one of `vmIDRange`, when unset).
    #[serde(rename = "templateVMID", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 100, max = 999_999_999))]
    pub template_vmid: Option<i64>,

    /// Range to pick the template's VMID from.
    #[serde(rename = "vmIDRange", default, skip_serializing_if = "Option::is_none")]
    pub vm_id_range: Option<VmIdRange>,

    /// Whether Proxmox verifies the TLS certificate of an `https://` URL (default true).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = true))]
    pub verify_certificates: Option<bool>,

    /// The template's hardware: what VMs cloned from it get unless they say otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hardware: Option<ImageHardware>,

    /// What deleting this object does to the template: `Delete` (default) destroys a template
    /// it made, `Retain` leaves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("default" = "Delete"))]
    pub deletion_policy: Option<DeletionPolicy>,
}

/// The checksum algorithms Proxmox's `download-url` offers.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ChecksumAlgorithm {
    /// MD5.
    Md5,
    /// SHA-1.
    Sha1,
    /// SHA-224.
    Sha224,
    /// SHA-256.
    Sha256,
    /// SHA-384.
    Sha384,
    /// SHA-512.
    Sha512,
}

impl ChecksumAlgorithm {
    /// Proxmox's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Md5 => "md5",
            Self::Sha1 => "sha1",
            Self::Sha224 => "sha224",
            Self::Sha256 => "sha256",
            Self::Sha384 => "sha384",
            Self::Sha512 => "sha512",
        }
    }
}

/// The image file's format.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ImageFormat {
    /// QEMU copy-on-write (most cloud images, also when served as `.img`).
    #[default]
    Qcow2,
    /// A raw disk image.
    Raw,
    /// A VMware disk.
    Vmdk,
}

impl ImageFormat {
    /// The file extension Proxmox needs.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Qcow2 => "qcow2",
            Self::Raw => "raw",
            Self::Vmdk => "vmdk",
        }
    }
}

/// The template's hardware.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageHardware {
    /// Storage of the imported disk (an `images` storage; default `local-lvm`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1), extend("default" = "local-lvm"))]
    pub disk_storage: Option<String>,

    /// The disk's slot (default `scsi0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(regex(pattern = r"^(scsi([0-9]|[12][0-9]|30)|virtio([0-9]|1[0-5])|sata[0-5])$"), extend("default" = "scsi0"))]
    pub disk: Option<String>,

    /// CPU sockets (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_sockets: Option<i32>,

    /// Cores per socket (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 1))]
    pub num_cores: Option<i32>,

    /// Memory in MiB (default 2048).
    #[serde(rename = "memoryMiB", default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 64), extend("multipleOf" = 8))]
    pub memory_mib: Option<i32>,

    /// Bridge of the template's `net0` (default `vmbr0`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(length(min = 1))]
    pub bridge: Option<String>,

    /// Model of `net0` (default `virtio`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network_model: Option<NetworkModel>,

    /// Guest OS type (default `l26`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub os_type: Option<OsType>,

    /// The QEMU guest agent (default on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<bool>,
}

/// A reference to a `ProxmoxVMImage` in the same namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageRef {
    /// Name of the ProxmoxVMImage.
    #[schemars(length(min = 1))]
    pub name: String,
}

/// Observed state of a `ProxmoxVMImage`.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProxmoxVMImageStatus {
    /// Where the image stands (the least advanced of its templates; `Failed` when one failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ImagePhase>,

    /// Percent downloaded (from Proxmox's task log) while downloading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(range(min = 0, max = 100))]
    pub progress: Option<i32>,

    /// VMID of the (first node's) template.
    #[serde(rename = "templateVMID", default, skip_serializing_if = "Option::is_none")]
    pub template_vmid: Option<i64>,

    /// Node of the (first node's) template.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,

    /// The template on each node, with what the controller recorded before acting.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub templates: Option<Vec<ImageTemplateStatus>>,

    /// `Ready`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::conditions")]
    pub conditions: Option<Vec<Condition>>,

    /// The generation of the spec the status reflects.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,

    /// When the controller last wrote this status.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::date_time")]
    pub last_updated: Option<Time>,
}

/// The template of one node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageTemplateStatus {
    /// The node.
    pub node: String,
    /// Where this node's template stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<ImagePhase>,
    /// The template's VMID (reserved before anything is made).
    #[serde(rename = "templateVMID", default, skip_serializing_if = "Option::is_none")]
    pub template_vmid: Option<i64>,
    /// Percent downloaded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<i32>,
    /// The Proxmox task in flight (UPID): waited for, never issued twice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_ref: Option<String>,
    /// The template existed already (same name and image) and was reused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reused: Option<bool>,
    /// The image content key the record is about (a changed spec starts over).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    /// Why this node's template failed (`Failed`), or what it waits for.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The condition reason of a failure.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// A failure is not retried before this time (absent on a failure that waits for a spec
    /// change, such as a checksum mismatch).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(schema_with = "schema::date_time")]
    pub retry_after: Option<Time>,
    /// The generation whose failure is final (retried once the spec changes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failed_generation: Option<i64>,
}

/// Where an image stands.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema)]
pub enum ImagePhase {
    /// Nothing started yet (a VMID is being reserved, or credentials are missing).
    Pending,
    /// Proxmox downloads the image.
    Downloading,
    /// The image is imported into a VM, which becomes the template.
    Importing,
    /// The template exists.
    Ready,
    /// It failed: `Ready` says why (and whether it is retried).
    Failed,
}

impl ImagePhase {
    /// The spelling in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "Pending",
            Self::Downloading => "Downloading",
            Self::Importing => "Importing",
            Self::Ready => "Ready",
            Self::Failed => "Failed",
        }
    }
}

impl ProxmoxVMImageSpec {
    /// The nodes to make the template on, in the spec's order.
    pub fn node_list(&self) -> Vec<String> {
        match (&self.node, &self.nodes) {
            (Some(n), _) => vec![n.clone()],
            (None, Some(list)) => list.clone(),
            (None, None) => Vec::new(),
        }
    }

    /// The image format (default `qcow2`).
    pub fn image_format(&self) -> ImageFormat {
        self.format.unwrap_or_default()
    }

    /// The deletion policy (default `Delete`).
    pub fn deletion_policy(&self) -> DeletionPolicy {
        self.deletion_policy.unwrap_or_default()
    }
}
