#![allow(clippy::unwrap_used)]

use serde_json::json;

use super::*;

#[test]
fn values_resolve_like_yaml_core_schema() {
    let doc = parse_document(
        "a: 1\nb: \"1\"\nc: true\nd: ~\ne: 1.5\nf: 0x1F\ng: -3\nh: 1e3\ni: .5\nj: text\nk: [x, 2]\nl: {m: n}\n",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        to_value(&doc.root),
        json!({"a": 1, "b": "1", "c": true, "d": null, "e": 1.5, "f": "0x1F", "g": -3, "h": 1000.0,
               "i": 0.5, "j": "text", "k": ["x", 2], "l": {"m": "n"}})
    );
}

#[test]
fn empty_and_invalid_documents() {
    assert_eq!(parse_document("# only a comment\n\n").unwrap(), None);
    let err = parse_document("a: [1, 2\nb: c\n").unwrap_err();
    assert!(err.line >= 1, "{err}");
    assert!(
        parse_document("a: &x 1\nb: *x\n")
            .unwrap_err()
            .message
            .contains("anchors")
    );
}

#[test]
fn comments_attach_to_entries_and_items() {
    let doc = parse_document("# top\na: 1 # one\nb:\n  # above c\n  - c # right c\n# tail\n")
        .unwrap()
        .unwrap();
    let m = doc.root.as_map().unwrap();
    assert_eq!(m.entries[0].comments.head, vec![" top".to_owned()]);
    assert_eq!(m.entries[0].comments.line.as_deref(), Some(" one"));
    let Node::Seq(s) = &m.entries[1].value else {
        panic!()
    };
    assert_eq!(s.items[0].comments.head, vec![" above c".to_owned()]);
    assert_eq!(s.items[0].comments.line.as_deref(), Some(" right c"));
    assert_eq!(doc.tail, vec![" tail".to_owned()]);
}

#[test]
fn from_value_grafts_order_comments_and_styles() {
    let src = parse_document("z: \"q\" # keep\na: [x]\n").unwrap().unwrap();
    let v = json!({"a": ["x", "y"], "new": 1, "z": "q"});
    let node = from_value(&v, Some(&src.root));
    let m = node.as_map().unwrap();
    let keys: Vec<&str> = m.entries.iter().map(|e| e.key.as_str()).collect();
    assert_eq!(keys, ["z", "a", "new"]);
    assert_eq!(m.entries[0].comments.line.as_deref(), Some(" keep"));
    assert!(matches!(
        &m.entries[0].value,
        Node::Scalar(Scalar {
            style: Style::Double,
            ..
        })
    ));
    assert!(matches!(&m.entries[1].value, Node::Seq(Seq { flow: true, .. })));
}
