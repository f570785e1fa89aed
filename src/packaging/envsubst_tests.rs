#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;

use super::*;

fn render(text: &str, vars: &[(&str, &str)]) -> String {
    let map: BTreeMap<String, String> = vars.iter().map(|(k, v)| ((*k).into(), (*v).into())).collect();
    Template::parse(text).unwrap().render(&|n| map.get(n).cloned())
}

#[test]
fn plain_variables_and_literal_text() {
    assert_eq!(
        render("name: ${CLUSTER_NAME}-cp", &[("CLUSTER_NAME", "c1")]),
        "name: c1-cp"
    );
    assert_eq!(render("${A}${B}", &[("A", "x"), ("B", "y")]), "xy");
    // Unset variables render empty; a `$` without `{` is text.
    assert_eq!(render("a${MISSING}b $HOME $ {x}", &[]), "ab $HOME $ {x}");
    // Names may contain `-`, so `${A-x}` is the variable `A-x`.
    assert_eq!(render("${A-x}", &[("A-x", "v"), ("A", "no")]), "v");
}

#[test]
fn escapes() {
    assert_eq!(
        render("$${HOSTNAME} and $$ and $$$${A}", &[("A", "v")]),
        "${HOSTNAME} and $ and $${A}"
    );
    assert_eq!(render("a\\\\b \\/ \\n", &[]), "a\\b / \\n");
    assert_eq!(render("x $${A=${B}}", &[("B", "b")]), "x ${A=b}");
}

#[test]
fn defaults_apply_when_unset_or_empty() {
    for op in ["=", ":=", ":-", ":?", ":+"] {
        let t = format!("${{V{op}dflt}}");
        assert_eq!(render(&t, &[]), "dflt", "{op}");
        assert_eq!(render(&t, &[("V", "")]), "dflt", "{op} empty");
        assert_eq!(render(&t, &[("V", "set")]), "set", "{op} set");
    }
    assert_eq!(render(r#"${VIP=""}"#, &[]), r#""""#);
    assert_eq!(render("${ALLOWED:=[]}", &[]), "[]");
    assert_eq!(render("${ADDR:=:8443}", &[]), ":8443");
    assert_eq!(render("${V:=pre${D}-post}", &[("D", "mid")]), "premid-post");
    assert_eq!(render("${V:=${D,,}}", &[("D", "UP")]), "up");
    // A `}` ends the default; what follows is text.
    assert_eq!(render("${V:=a}b}", &[]), "ab}");
}

#[test]
fn string_functions() {
    let v = [("P", "/home/user/file.tar.gz"), ("W", "hello World")];
    assert_eq!(render("${#W}", &v), "11");
    assert_eq!(
        render("${W^}|${W^^}|${W,}|${W,,}", &v),
        "Hello World|HELLO WORLD|hello World|hello world"
    );
    assert_eq!(render("${P:6}", &v), "user/file.tar.gz");
    assert_eq!(render("${P:6:4}", &v), "user");
    assert_eq!(render("${P:100}", &v), "");
    assert_eq!(render("${P#*/}", &v), "home/user/file.tar.gz");
    assert_eq!(render("${P##*/}", &v), "file.tar.gz");
    assert_eq!(render("${P%.*}", &v), "/home/user/file.tar");
    assert_eq!(render("${P%%.*}", &v), "/home/user/file");
    assert_eq!(render("${P#[/x]home}", &v), "/user/file.tar.gz");
    assert_eq!(render("${P#nomatch}", &v), "/home/user/file.tar.gz");
    assert_eq!(render("${W/o/0}", &v), "hell0 World");
    assert_eq!(render("${W//o/0}", &v), "hell0 W0rld");
    assert_eq!(render("${W//o/}", &v), "hell Wrld");
    assert_eq!(render("${W/#hello/bye}", &v), "bye World");
    assert_eq!(render("${W/%World/there}", &v), "hello there");
    assert_eq!(render("${P//\\//-}", &v), "-home-user-file.tar.gz");
}

#[test]
fn bad_substitutions_are_errors_with_a_position() {
    for bad in [
        "${}",
        "${ }",
        "x\n  ${A!}",
        "${A",
        "${A:=x",
        "${A/x}",
        "${A?x}",
        "${A::2}",
    ] {
        let err = Template::parse(bad).unwrap_err();
        assert!(
            matches!(err, EnvsubstError::BadSubstitution { .. }),
            "{bad}: {err}"
        );
    }
    let err = Template::parse("a: 1\nb: ${A!}\n").unwrap_err();
    assert_eq!(
        err,
        EnvsubstError::BadSubstitution {
            line: 2,
            column: 7,
            context: "a: 1\nb: ${A!}\n".into()
        }
    );
}

#[test]
fn legacy_spellings_are_normalized() {
    assert_eq!(
        normalize_legacy("[ ${ VM_SSH_KEYS } ] ${ A} ${B } ${C}"),
        "[ ${VM_SSH_KEYS} ] ${A} ${B} ${C}"
    );
    assert_eq!(render("keys: [${ KEYS }]", &[("KEYS", "a,b")]), "keys: [a,b]");
}

#[test]
fn variables_as_clusterctl_lists_them() {
    let t = Template::parse("${A} ${B:=2} ${C=\"\"} ${A:=ignored} ${D:=${E}x} ${#F} ${G:=}").unwrap();
    let got: Vec<(String, Option<String>)> = t.variables().into_iter().map(|v| (v.name, v.default)).collect();
    let want = [
        ("A", None),
        ("B", Some("2")),
        ("C", Some("\"\"")),
        ("D", Some("${E}x")),
        ("F", None),
        ("G", None),
    ];
    let want: Vec<(String, Option<String>)> = want
        .iter()
        .map(|(n, d)| ((*n).to_owned(), d.map(str::to_owned)))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn process_reports_missing_required_variables_sorted() {
    let err = process("${Z} ${A} ${B:=1} ${A}", &|_| None).unwrap_err();
    assert_eq!(err, EnvsubstError::MissingVariables(vec!["A".into(), "Z".into()]));
    assert_eq!(
        err.to_string(),
        "value for variables [A, Z] is not set. Please set the value using os environment variables or the clusterctl config file"
    );
    let mut values = BTreeMap::new();
    values.insert("A".to_owned(), "a".to_owned());
    values.insert("Z".to_owned(), String::new());
    // A variable set to the empty string counts as set.
    assert_eq!(process_with("${Z}|${A}|${B:=1}", &values).unwrap(), "|a|1");
}

#[test]
fn glob_classes() {
    let g = |p: &str, s: &str| glob(&p.chars().collect::<Vec<_>>(), &s.chars().collect::<Vec<_>>());
    assert!(g("[a-c]x", "bx"));
    assert!(!g("[!a-c]x", "bx"));
    assert!(g("[^a-c]x", "dx"));
    assert!(g("[]]", "]"));
    assert!(g("a?c*", "abcdef"));
    assert!(g("\\*", "*"));
    assert!(!g("\\*", "a"));
    assert!(!g("[abc", "a"));
}
