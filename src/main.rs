//! The capmox manager binary.
fn main() {}
