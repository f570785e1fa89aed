//! Writes the generated CRD YAML into `config/crd/bases/`.
fn main() {}
