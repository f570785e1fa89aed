//! Unit tests of [`crate::Schema::validate`], one family of keywords at a time.

use serde_json::{Value, json};

use crate::{FieldErrorKind, Schema};

fn schema(spec_props: Value) -> Schema {
    Schema::from_openapi(&json!({
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": {"type": "object", "properties": spec_props}
        }
    }))
    .unwrap()
}

const BLOCKED: &str = "<nil>: Invalid value: \"null\": some validation rules were not checked because the object was invalid; correct the existing errors to complete validation";

fn msgs(s: &Schema, spec: Value) -> Vec<String> {
    s.validate(&json!({"spec": spec}), None)
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn types() {
    let s = schema(
        json!({"i": {"type": "integer"}, "n": {"type": "number"}, "b": {"type": "boolean"},
        "o": {"type": "object"}, "a": {"type": "array", "items": {"type": "string"}}, "nn": {"type": "string", "nullable": true}}),
    );
    assert_eq!(
        msgs(
            &s,
            json!({"i": 1, "n": 1, "b": true, "o": {}, "a": ["x"], "nn": null})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        msgs(&s, json!({"i": 2.0})),
        Vec::<String>::new(),
        "integral float is an integer"
    );
    let errs = msgs(&s, json!({"i": "string"}));
    assert_eq!(
        errs[0],
        "spec.i: Invalid value: \"string\": spec.i in body must be of type integer: \"string\""
    );
    assert_eq!(errs[1], BLOCKED);
    assert_eq!(
        msgs(&s, json!({"i": 1.5}))[0],
        "spec.i: Invalid value: \"number\": spec.i in body must be of type integer: \"number\""
    );
    assert_eq!(
        msgs(&s, json!({"a": [1]}))[0],
        "spec.a[0]: Invalid value: \"integer\": spec.a[0] in body must be of type string: \"integer\""
    );
    assert_eq!(
        msgs(&s, json!({"b": null}))[0],
        "spec.b: Invalid value: \"null\": spec.b in body must be of type boolean: \"null\""
    );
    let f = schema(
        json!({"i32": {"type": "integer", "format": "int32"}, "d": {"type": "string", "format": "date-time"}}),
    );
    assert_eq!(
        msgs(&f, json!({"i32": 1.5}))[0],
        "spec.i32: Invalid value: \"double\": spec.i32 in body must be of type int32: \"double\""
    );
    assert_eq!(
        msgs(&f, json!({"i32": true}))[0],
        "spec.i32: Invalid value: \"\": spec.i32 in body must be of type int32: \"\""
    );
    assert_eq!(
        msgs(&f, json!({"i32": "7"}))[0],
        "spec.i32: Invalid value: \"string\": spec.i32 in body must be of type integer: \"string\""
    );
    assert_eq!(
        msgs(&f, json!({"d": 5}))[0],
        "spec.d: Invalid value: \"int64\": spec.d in body must be of type date-time: \"int64\""
    );
    let e = s.validate(&json!({"spec": {"o": []}}), None);
    assert_eq!(e[0].kind, FieldErrorKind::TypeInvalid);
}

#[test]
fn numbers() {
    let s = schema(json!({
        "r": {"type": "integer", "minimum": 1, "maximum": 5},
        "x": {"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 10, "exclusiveMaximum": true},
        "m": {"type": "integer", "multipleOf": 8},
        "f": {"type": "number", "multipleOf": 0.5}
    }));
    assert_eq!(
        msgs(&s, json!({"r": 3, "x": 5, "m": 2048, "f": 1.5})),
        Vec::<String>::new()
    );
    assert_eq!(
        msgs(&s, json!({"r": 0})),
        ["spec.r: Invalid value: 0: spec.r in body should be greater than or equal to 1"]
    );
    assert_eq!(
        msgs(&s, json!({"r": 6})),
        ["spec.r: Invalid value: 6: spec.r in body should be less than or equal to 5"]
    );
    assert_eq!(
        msgs(&s, json!({"x": 0})),
        ["spec.x: Invalid value: 0: spec.x in body should be greater than 0"]
    );
    assert_eq!(
        msgs(&s, json!({"x": 10})),
        ["spec.x: Invalid value: 10: spec.x in body should be less than 10"]
    );
    assert_eq!(
        msgs(&s, json!({"m": 2049})),
        ["spec.m: Invalid value: 2049: spec.m in body should be a multiple of 8"]
    );
    assert_eq!(
        msgs(&s, json!({"f": 1.2})),
        ["spec.f: Invalid value: 1.2: spec.f in body should be a multiple of 0.5"]
    );
}

#[test]
fn strings() {
    let s = schema(json!({
        "s": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^net[0-9]+$"},
        "e": {"type": "string", "enum": ["a", "b"]},
        "d": {"type": "string", "format": "date-time"}
    }));
    assert_eq!(
        msgs(&s, json!({"s": "net1", "e": "a", "d": "2024-01-01T00:00:00Z"})),
        Vec::<String>::new()
    );
    assert_eq!(
        msgs(&s, json!({"s": "net123"})),
        ["spec.s: Too long: may not be more than 5 bytes", BLOCKED]
    );
    assert_eq!(
        msgs(&s, json!({"s": "n"})),
        ["spec.s: Invalid value: \"n\": spec.s in body should be at least 2 chars long"]
    );
    assert_eq!(
        msgs(&s, json!({"s": "eth0"})),
        ["spec.s: Invalid value: \"eth0\": spec.s in body should match '^net[0-9]+$'"]
    );
    assert_eq!(
        msgs(&s, json!({"s": "nëtt"}))[0],
        "spec.s: Invalid value: \"nëtt\": spec.s in body should match '^net[0-9]+$'",
        "length counts characters"
    );
    let e = msgs(&s, json!({"e": "c"}));
    assert_eq!(
        e[0],
        "spec.e: Unsupported value: \"c\": supported values: \"a\", \"b\""
    );
    assert!(e[1].starts_with("<nil>: Invalid value: \"null\": some validation rules were not checked"));
    assert_eq!(
        msgs(&s, json!({"d": "nope"}))[0],
        "spec.d: Invalid value: \"nope\": spec.d in body must be of type date-time: \"nope\""
    );
}

#[test]
fn arrays_objects_and_required() {
    let s = schema(json!({
        "l": {"type": "array", "minItems": 1, "maxItems": 2, "items": {"type": "string"}},
        "o": {"type": "object", "required": ["name"], "minProperties": 1,
              "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}},
        "m": {"type": "object", "maxProperties": 1, "additionalProperties": {"type": "integer", "minimum": 0}}
    }));
    assert_eq!(
        msgs(&s, json!({"l": ["a"], "o": {"name": "x"}, "m": {"k": 1}})),
        Vec::<String>::new()
    );
    assert_eq!(
        msgs(&s, json!({"l": []})),
        ["spec.l: Invalid value: 0: spec.l in body should have at least 1 items"]
    );
    assert_eq!(
        msgs(&s, json!({"l": ["a", "b", "c"]})),
        ["spec.l: Too many: 3: must have at most 2 items", BLOCKED]
    );
    assert_eq!(
        msgs(&s, json!({"o": {"v": 1}})),
        ["spec.o.name: Required value", BLOCKED]
    );
    assert_eq!(
        msgs(&s, json!({"o": {}})),
        [
            "spec.o: Invalid value: 0: spec.o in body should have at least 1 properties",
            "spec.o.name: Required value",
            BLOCKED
        ]
    );
    assert_eq!(
        msgs(&s, json!({"m": {"a": 1, "b": 2}})),
        ["spec.m: Too many: 2: must have at most 1 item", BLOCKED]
    );
    assert_eq!(
        msgs(&s, json!({"m": {"a": -1}})),
        ["spec.m.a: Invalid value: -1: spec.m.a in body should be greater than or equal to 0"]
    );
}

#[test]
fn int_or_string_and_composition() {
    let s = schema(json!({
        "p": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}], "pattern": "^[0-9]+%$"},
        "one": {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}},
                "oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
        "no": {"type": "string", "not": {"enum": ["x"]}}
    }));
    assert_eq!(msgs(&s, json!({"p": 5})), Vec::<String>::new());
    assert_eq!(msgs(&s, json!({"p": "50%"})), Vec::<String>::new());
    let e = msgs(&s, json!({"p": true}));
    assert!(
        e.contains(
            &"spec.p: Invalid value: \"\": spec.p in body must validate at least one schema (anyOf)"
                .to_string()
        ),
        "{e:?}"
    );
    assert_eq!(msgs(&s, json!({"one": {"a": "1"}})), Vec::<String>::new());
    let e = msgs(&s, json!({"one": {"a": "1", "b": "2"}}));
    assert_eq!(
        e,
        ["spec.one: Invalid value: \"\": spec.one in body must validate one and only one schema (oneOf)"]
    );
    assert_eq!(
        msgs(&s, json!({"no": "x"})),
        ["spec.no: Invalid value: \"\": spec.no in body must not validate the schema (not)"]
    );
}

#[test]
fn list_types() {
    let s = schema(json!({
        "set": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
        "map": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "v": {"type": "integer"}}}}
    }));
    assert_eq!(
        msgs(
            &s,
            json!({"set": ["a", "b"], "map": [{"name": "a"}, {"name": "b"}]})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        msgs(&s, json!({"set": ["a", "b", "a", "a"]})),
        ["spec.set[2]: Duplicate value: \"a\""]
    );
    assert!(msgs(&s, json!({"map": [{"name": "a"}, "x"]})).contains(
        &"spec.map[1]: Invalid value: \"x\": must be an object for an array of list-type map".to_string()
    ));
    let old = json!({"spec": {"set": ["a", "a"]}});
    assert!(
        s.validate(&json!({"spec": {"set": ["b", "b"]}}), Some(&old))
            .is_empty(),
        "ratcheted: the old object already broke the invariant"
    );
    assert_eq!(
        s.validate(&json!({"spec": {"set": ["b", "b"]}}), Some(&json!({"spec": {}})))
            .len(),
        1
    );
    assert_eq!(
        msgs(&s, json!({"map": [{"name": "a", "v": 1}, {"name": "a", "v": 2}]})),
        ["spec.map[1]: Duplicate value: map[string]interface {}{\"name\":\"a\"}"]
    );
}

#[test]
fn cel_rules_at_their_paths() {
    let s = schema(json!({
        "mtu": {"type": "integer", "x-kubernetes-validations": [
            {"rule": "self == 1 || (self >= 576 && self <= 65520)", "message": "invalid MTU value"}]},
        "r": {"type": "object", "properties": {"start": {"type": "integer"}, "end": {"type": "integer"}},
              "x-kubernetes-validations": [{"rule": "self.end >= self.start", "message": "end should be greater than or equal to start"}]},
        "imm": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "Value is immutable"}]},
        "fp": {"type": "object", "properties": {"a": {"type": "integer"}},
               "x-kubernetes-validations": [{"rule": "self.a > 0", "fieldPath": ".a", "reason": "FieldValueForbidden", "message": "a must be positive"}]},
        "items": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'net0'"}]}},
        "m": {"type": "object", "additionalProperties": {"type": "integer", "x-kubernetes-validations": [{"rule": "self < 10"}]}},
        "all": {"type": "integer", "allOf": [{"x-kubernetes-validations": [{"rule": "self % 2 == 0", "message": "must be even"}]}]},
        "cfg": {"type": "object", "properties": {"ipv4": {"type": "object"}, "ipv6": {"type": "object"}},
                "x-kubernetes-validations": [{"rule": "self.ipv4 != null || self.ipv6 != null", "message": "at least one ip config must be set"}]}
    }));
    assert_eq!(
        msgs(
            &s,
            json!({"mtu": 1500, "r": {"start": 1, "end": 2}, "imm": "a", "items": ["net1"], "m": {"k": 1}, "cfg": {"ipv4": {}}})
        ),
        Vec::<String>::new()
    );
    assert_eq!(
        msgs(&s, json!({"mtu": 100})),
        ["spec.mtu: Invalid value: \"integer\": invalid MTU value"]
    );
    assert_eq!(
        msgs(&s, json!({"all": 3})),
        ["spec.all: Invalid value: \"\": must be even"]
    );
    assert_eq!(
        msgs(&s, json!({"r": {"start": 5, "end": 2}})),
        ["spec.r: Invalid value: \"object\": end should be greater than or equal to start"]
    );
    assert_eq!(
        msgs(&s, json!({"fp": {"a": 0}})),
        ["spec.fp.a: Forbidden: a must be positive"]
    );
    assert_eq!(
        msgs(&s, json!({"items": ["net1", "net0"]})),
        ["spec.items[1]: Invalid value: \"string\": failed rule: self != 'net0'"]
    );
    assert_eq!(
        msgs(&s, json!({"m": {"big": 11}})),
        ["spec.m[big]: Invalid value: \"integer\": failed rule: self < 10"]
    );
    assert_eq!(
        msgs(&s, json!({"cfg": {}})),
        [
            "spec.cfg: Invalid value: \"object\": no such key: ipv4 evaluating rule: at least one ip config must be set"
        ]
    );
    // transition rule: skipped on create, enforced on update
    let new = json!({"spec": {"imm": "b"}});
    assert!(s.validate(&new, None).is_empty());
    let errs = s.validate(&new, Some(&json!({"spec": {"imm": "a"}})));
    assert_eq!(errs.len(), 1);
    assert_eq!(
        errs[0].to_string(),
        "spec.imm: Invalid value: \"string\": Value is immutable"
    );
    assert!(
        s.validate(&new, Some(&json!({"spec": {}}))).is_empty(),
        "no old value at that path"
    );
    assert!(s.unsupported_rules().is_empty(), "{:?}", s.unsupported_rules());
}

#[test]
fn ratcheting_keeps_unchanged_invalid_values() {
    let s = schema(json!({"r": {"type": "integer", "maximum": 5}, "other": {"type": "string"}}));
    let old = json!({"spec": {"r": 9, "other": "a"}});
    let new = json!({"spec": {"r": 9, "other": "b"}});
    assert!(s.validate(&new, Some(&old)).is_empty());
    assert_eq!(s.validate(&json!({"spec": {"r": 10}}), Some(&old)).len(), 1);
}

#[test]
fn root_rules_report_a_nil_path() {
    let s = Schema::from_openapi(&json!({
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"a": {"type": "integer"}}}},
        "x-kubernetes-validations": [
            {"rule": "has(self.spec)", "message": "spec is required"},
            {"rule": "!has(self.metadata.labels) && self.metadata.name == 'n'", "message": "root rules see only name and generateName"}
        ]
    }))
    .unwrap();
    let obj = json!({"kind": "K", "metadata": {"name": "n", "labels": {"a": "b"}}});
    let errs: Vec<String> = s.validate(&obj, None).iter().map(ToString::to_string).collect();
    assert_eq!(errs, ["<nil>: Invalid value: \"object\": spec is required"]);
}
