//! `x-kubernetes-validations`: parsing, compiling with the `cel` crate, and evaluating one rule.

use std::sync::{Arc, Mutex, OnceLock};

use serde_json::Value;

use crate::SchemaError;

/// The CEL environment shared by all rules: the standard library plus the `strings` and `lists`
/// extensions that the Kubernetes CEL environment also offers.
fn env() -> Option<Arc<cel::Env>> {
    static ENV: OnceLock<Option<Arc<cel::Env>>> = OnceLock::new();
    ENV.get_or_init(|| {
        let mut env = cel::Env::stdlib();
        env.add_extension(cel::extensions::strings).ok()?;
        env.add_extension(cel::extensions::lists).ok()?;
        crate::k8slib::register(&mut env).ok()?;
        Some(Arc::new(env))
    })
    .clone()
}

/// One `x-kubernetes-validations` entry.
#[derive(Debug)]
pub struct Rule {
    /// The CEL expression.
    pub rule: String,
    /// `message`, if set.
    pub message: Option<String>,
    /// `fieldPath`, if set (relative JSON path such as `.spec.x`).
    pub field_path: Option<String>,
    /// `reason`, if set (`FieldValueInvalid`, `FieldValueForbidden`, ...).
    pub reason: Option<String>,
    /// Whether the rule references `oldSelf` (a transition rule).
    pub is_transition: bool,
    /// `optionalOldSelf`: `oldSelf` is an optional, and the rule also runs without an old value.
    pub optional_old_self: bool,
    /// Where the rule sits in the schema (for reports).
    pub schema_path: String,
    program: Option<cel::Program>,
    message_program: Option<cel::Program>,
    /// Why this rule cannot be evaluated (compile error, or a runtime gap of the CEL crate).
    unsupported: Mutex<Option<String>>,
}

/// The outcome of evaluating a rule.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Outcome {
    /// The rule holds.
    Pass,
    /// The rule evaluated to false: the message to report.
    Fail(String),
    /// Evaluation raised an error the apiserver reports (e.g. `no such key: x`).
    Error(String),
    /// The CEL crate cannot evaluate this rule; it is skipped.
    Skipped,
}

impl Rule {
    /// Parses (and compiles) a rule entry found at `schema_path`.
    pub(crate) fn parse(v: &Value, schema_path: &str) -> Result<Rule, SchemaError> {
        let bad = |reason: &str| SchemaError::InvalidKeyword {
            path: schema_path.to_string(),
            keyword: "x-kubernetes-validations".to_string(),
            reason: reason.to_string(),
        };
        let obj = v.as_object().ok_or_else(|| bad("entries must be objects"))?;
        let get_str = |k: &str| -> Result<Option<String>, SchemaError> {
            match obj.get(k) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone())),
                Some(_) => Err(bad(&format!("{k} must be a string"))),
            }
        };
        let rule = get_str("rule")?.ok_or_else(|| bad("rule is required"))?;
        let message = get_str("message")?;
        let message_expression = get_str("messageExpression")?;
        let field_path = get_str("fieldPath")?;
        let reason = get_str("reason")?;
        let optional_old_self = matches!(obj.get("optionalOldSelf"), Some(Value::Bool(true)));
        let mut unsupported = None;
        let mut is_transition = false;
        let program = match compile(&rule) {
            Ok(p) => {
                is_transition = p.references().has_variable("oldSelf");
                Some(p)
            }
            Err(e) => {
                unsupported = Some(format!("does not compile with the cel crate: {e}"));
                None
            }
        };
        let message_program = message_expression.as_deref().and_then(|m| compile(m).ok());
        Ok(Rule {
            rule,
            message,
            field_path,
            reason,
            is_transition,
            optional_old_self,
            schema_path: schema_path.to_string(),
            program,
            message_program,
            unsupported: Mutex::new(unsupported),
        })
    }

    /// Why the rule is not evaluated, if it is not.
    pub(crate) fn unsupported_reason(&self) -> Option<String> {
        self.unsupported.lock().ok().and_then(|g| g.clone())
    }

    fn mark_unsupported(&self, why: String) {
        if let Ok(mut g) = self.unsupported.lock()
            && g.is_none()
        {
            *g = Some(why);
        }
    }

    /// `ruleErrorString`: the trimmed message if set, else the trimmed rule.
    pub(crate) fn error_string(&self) -> String {
        match &self.message {
            Some(m) if !m.trim().is_empty() => m.trim().to_string(),
            _ => self.rule.trim().to_string(),
        }
    }

    /// `ruleMessageOrDefault`.
    fn message_or_default(&self) -> String {
        match &self.message {
            Some(m) if !m.trim().is_empty() => m.trim().to_string(),
            _ => format!("failed rule: {}", self.rule.trim()),
        }
    }

    /// Evaluates the rule with `self` (and `oldSelf` for transition rules) bound.
    pub(crate) fn evaluate(&self, this: &cel::Value, old: Option<&cel::Value>) -> Outcome {
        if self.program.is_none() || self.unsupported_reason().is_some() {
            return Outcome::Skipped;
        }
        // A panic inside the CEL crate must not take the API server down: the rule is skipped.
        let run = std::panic::AssertUnwindSafe(|| self.evaluate_inner(this, old));
        match std::panic::catch_unwind(run) {
            Ok(outcome) => outcome,
            Err(_) => {
                self.mark_unsupported("the cel crate panicked while evaluating it".to_string());
                Outcome::Skipped
            }
        }
    }

    fn evaluate_inner(&self, this: &cel::Value, old: Option<&cel::Value>) -> Outcome {
        let (Some(program), Some(env)) = (&self.program, env()) else {
            return Outcome::Skipped;
        };
        let mut ctx = cel::Context::with_env(env);
        let Ok(this_val) = Box::<dyn cel::common::value::Val>::try_from(this.clone()) else {
            return Outcome::Skipped;
        };
        ctx.add_variable_as_val("self", this_val);
        let old_val: Option<Box<dyn cel::common::value::Val>> = old.and_then(|o| o.clone().try_into().ok());
        if self.optional_old_self {
            let optional = cel::common::types::CelOptional::from(old_val);
            ctx.add_variable_as_val("oldSelf", Box::new(optional));
        } else if let Some(o) = old_val {
            ctx.add_variable_as_val("oldSelf", o);
        }
        match program.execute(&ctx) {
            Ok(cel::Value::Bool(true)) => Outcome::Pass,
            Ok(cel::Value::Bool(false)) => Outcome::Fail(self.failure_message(&ctx)),
            Ok(other) => {
                self.mark_unsupported(format!(
                    "evaluates to {:?} instead of a bool with the cel crate",
                    other.type_of()
                ));
                Outcome::Skipped
            }
            Err(e) => {
                let e = first_error(program.expression(), &ctx).unwrap_or(e);
                match classify(&e) {
                    Some(text) => Outcome::Error(text),
                    None => {
                        self.mark_unsupported(format!("the cel crate cannot evaluate it: {e}"));
                        Outcome::Skipped
                    }
                }
            }
        }
    }

    fn failure_message(&self, ctx: &cel::Context) -> String {
        if let Some(p) = &self.message_program
            && let Ok(cel::Value::String(s)) = p.execute(ctx)
        {
            let s = s.trim();
            if !s.is_empty() && !s.contains('\n') {
                return s.to_string();
            }
        }
        self.message_or_default()
    }
}

/// cel-go reports the left operand's error when both operands of `||`/`&&` fail; the cel crate
/// reports the right one. Re-evaluates left operands to find the error cel-go would return.
fn first_error(expr: &cel::IdedExpr, ctx: &cel::Context) -> Option<cel::ExecutionError> {
    use cel::common::ast::{Expr, operators};
    let Expr::Call(call) = &expr.expr else {
        return None;
    };
    let logical = call.func_name == operators::LOGICAL_OR || call.func_name == operators::LOGICAL_AND;
    if !logical || call.args.len() != 2 {
        return None;
    }
    match cel::Value::resolve(&call.args[0], ctx) {
        Err(e) => Some(first_error(&call.args[0], ctx).unwrap_or(e)),
        Ok(_) => first_error(&call.args[1], ctx),
    }
}

fn compile(src: &str) -> Result<cel::Program, String> {
    let env = env().ok_or_else(|| "CEL environment unavailable".to_string())?;
    env.compile(src).map_err(|e| e.to_string().replace('\n', " "))
}

/// Maps runtime errors the apiserver would also raise to cel-go's wording; `None` for errors that
/// come from gaps in the CEL crate (missing functions/overloads), which skip the rule instead.
fn classify(e: &cel::ExecutionError) -> Option<String> {
    use cel::ExecutionError as E;
    match e {
        E::NoSuchKey(k) => Some(format!("no such key: {k}")),
        E::IndexOutOfBounds(i) => Some(format!("index out of bounds: {}", cel_value_text(i))),
        E::DivisionByZero(_) => Some("division by zero".to_string()),
        E::RemainderByZero(_) => Some("modulus by zero".to_string()),
        E::Overflow(..) => Some("integer overflow".to_string()),
        _ => None,
    }
}

fn cel_value_text(v: &cel::Value) -> String {
    match v {
        cel::Value::Int(i) => i.to_string(),
        cel::Value::UInt(u) => u.to_string(),
        cel::Value::String(s) => s.to_string(),
        other => format!("{other:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::celvalue::to_cel;
    use crate::node;
    use serde_json::json;

    fn eval(rule: &str, schema: Value, this: Value, old: Option<Value>) -> Outcome {
        let mut rules = Vec::new();
        let n = node::parse(&schema, "s", &mut rules).unwrap();
        let r = Rule::parse(&json!({"rule": rule}), "s").unwrap();
        assert!(
            r.unsupported_reason().is_none(),
            "{rule}: {:?}",
            r.unsupported_reason()
        );
        let out = r.evaluate(
            &to_cel(&this, Some(&n)),
            old.map(|o| to_cel(&o, Some(&n))).as_ref(),
        );
        assert!(
            r.unsupported_reason().is_none(),
            "{rule}: {:?}",
            r.unsupported_reason()
        );
        out
    }

    fn obj(props: Value) -> Value {
        json!({"type": "object", "properties": props})
    }

    #[test]
    fn has_and_exists_one() {
        let s = obj(
            json!({"templateID": {"type": "integer"}, "sourceNode": {"type": "string"},
            "templateSelector": {"type": "object", "properties": {"matchTags": {"type": "array", "items": {"type": "string"}}}}}),
        );
        let r = "[has(self.templateID), has(self.templateSelector)].exists_one(c, c)";
        assert_eq!(eval(r, s.clone(), json!({"templateID": 1}), None), Outcome::Pass);
        assert!(matches!(eval(r, s.clone(), json!({}), None), Outcome::Fail(_)));
        assert!(matches!(
            eval(
                r,
                s.clone(),
                json!({"templateID": 1, "templateSelector": {"matchTags": []}}),
                None
            ),
            Outcome::Fail(_)
        ));
        let r = "has(self.templateSelector) || (has(self.templateID) && has(self.sourceNode))";
        assert_eq!(
            eval(r, s.clone(), json!({"templateID": 1, "sourceNode": "pve"}), None),
            Outcome::Pass
        );
        assert!(matches!(
            eval(r, s.clone(), json!({"templateID": 1}), None),
            Outcome::Fail(_)
        ));
        // null-valued optional fields count as absent
        assert!(matches!(
            eval(r, s, json!({"templateSelector": null}), None),
            Outcome::Fail(_)
        ));
    }

    #[test]
    fn null_comparisons_and_absent_fields() {
        let s = obj(
            json!({"ipv4Config": {"type": "object", "properties": {"a": {"type": "string"}}},
            "ipv6Config": {"type": "object", "properties": {"a": {"type": "string"}}}}),
        );
        let r = "self.ipv4Config != null || self.ipv6Config != null";
        assert_eq!(eval(r, s.clone(), json!({"ipv4Config": {}}), None), Outcome::Pass);
        assert_eq!(
            eval(r, s.clone(), json!({"ipv6Config": {"a": "x"}}), None),
            Outcome::Pass
        );
        assert_eq!(
            eval(r, s, json!({}), None),
            Outcome::Error("no such key: ipv4Config".to_string())
        );
    }

    #[test]
    fn numbers() {
        let int = json!({"type": "integer"});
        for (rule, ok, bad) in [
            ("self == 1 || ( self >= 576 && self <= 65520)", 1500, 100),
            ("(self > 0 && self < 254) || (self > 255)", 100, 254),
            ("(self > 0 && self < 32765) || (self > 32766)", 32767, 32766),
        ] {
            assert_eq!(eval(rule, int.clone(), json!(ok), None), Outcome::Pass, "{rule}");
            assert!(
                matches!(eval(rule, int.clone(), json!(bad), None), Outcome::Fail(_)),
                "{rule}"
            );
        }
        let s = obj(
            json!({"start": {"type": "integer"}, "end": {"type": "integer"}, "port": {"type": "integer"}}),
        );
        assert_eq!(
            eval(
                "self.end >= self.start",
                s.clone(),
                json!({"start": 1, "end": 2}),
                None
            ),
            Outcome::Pass
        );
        assert!(matches!(
            eval(
                "self.end >= self.start",
                s.clone(),
                json!({"start": 3, "end": 2}),
                None
            ),
            Outcome::Fail(_)
        ));
        assert_eq!(
            eval(
                "self.port > 0 && self.port < 65536",
                s.clone(),
                json!({"port": 6443}),
                None
            ),
            Outcome::Pass
        );
        assert!(matches!(
            eval(
                "self.port > 0 && self.port < 65536",
                s,
                json!({"port": 70000}),
                None
            ),
            Outcome::Fail(_)
        ));
        let num = json!({"type": "number"});
        assert_eq!(
            eval("self > 1.5", num, json!(2), None),
            Outcome::Pass,
            "number is double even when integral"
        );
    }

    #[test]
    fn strings_and_lists() {
        let st = json!({"type": "string"});
        assert_eq!(
            eval("self != 'net0'", st.clone(), json!("net1"), None),
            Outcome::Pass
        );
        assert!(matches!(
            eval("self != 'net0'", st.clone(), json!("net0"), None),
            Outcome::Fail(_)
        ));
        let r = "!(self in ['Ready','Available','HealthCheckSucceeded','OwnerRemediated','ExternallyRemediated'])";
        assert_eq!(eval(r, st.clone(), json!("Custom"), None), Outcome::Pass);
        assert!(matches!(
            eval(r, st.clone(), json!("Ready"), None),
            Outcome::Fail(_)
        ));
        let r = "self.contains('/') ? ( self.split('/') [0].size() <= 253 && self.split('/') [1].size() <= 63 && self.split('/').size() == 2 ) : self.size() <= 63";
        assert_eq!(eval(r, st.clone(), json!("example.com/key"), None), Outcome::Pass);
        assert!(matches!(
            eval(r, st.clone(), json!("a/b/c"), None),
            Outcome::Fail(_)
        ));
        assert!(matches!(
            eval(r, st.clone(), json!("x".repeat(64)), None),
            Outcome::Fail(_)
        ));
        assert_eq!(
            eval("self.matches('^net[0-9]+$')", st.clone(), json!("net3"), None),
            Outcome::Pass
        );
        assert_eq!(
            eval(
                "self.startsWith('proxmox://')",
                st.clone(),
                json!("proxmox://x"),
                None
            ),
            Outcome::Pass
        );
        let s = obj(json!({"apiGroup": {"type": "string"}, "kind": {"type": "string"},
            "addresses": {"type": "array", "items": {"type": "string"}}, "full": {"type": "boolean"}, "format": {"type": "string"}}));
        assert_eq!(
            eval(
                "self.apiGroup == 'ipam.cluster.x-k8s.io'",
                s.clone(),
                json!({"apiGroup": "ipam.cluster.x-k8s.io"}),
                None
            ),
            Outcome::Pass
        );
        assert_eq!(
            eval(
                "self.kind == 'InClusterIPPool' || self.kind == 'GlobalInClusterIPPool'",
                s.clone(),
                json!({"kind": "GlobalInClusterIPPool"}),
                None
            ),
            Outcome::Pass
        );
        assert!(matches!(
            eval(
                "self.addresses.size() > 0",
                s.clone(),
                json!({"addresses": []}),
                None
            ),
            Outcome::Fail(_)
        ));
        assert_eq!(
            eval(
                "self.addresses.all(a, a.size() > 3)",
                s.clone(),
                json!({"addresses": ["10.0.0.1"]}),
                None
            ),
            Outcome::Pass
        );
        assert_eq!(
            eval(
                "self.full || !has(self.format)",
                s.clone(),
                json!({"full": false}),
                None
            ),
            Outcome::Pass
        );
        assert!(matches!(
            eval(
                "self.full || !has(self.format)",
                s,
                json!({"full": false, "format": "raw"}),
                None
            ),
            Outcome::Fail(_)
        ));
    }

    #[test]
    fn kubernetes_library_functions_beside_extensions() {
        let st = json!({"type": "string"});
        assert_eq!(
            eval("self.indexOf('c') == 2", st.clone(), json!("abc"), None),
            Outcome::Pass
        );
        assert_eq!(
            eval("self.find('[0-9]+') == '42'", st, json!("v42"), None),
            Outcome::Pass
        );
        let l = json!({"type": "array", "items": {"type": "integer"}});
        assert_eq!(
            eval(
                "self.indexOf(3) == 1 && self.isSorted() && self.sum() == 4",
                l,
                json!([1, 3]),
                None
            ),
            Outcome::Pass
        );
    }

    #[test]
    fn timestamps_and_durations() {
        let s = obj(
            json!({"at": {"type": "string", "format": "date-time"}, "d": {"type": "string", "format": "duration"}}),
        );
        let v = json!({"at": "2024-01-02T03:04:05Z", "d": "90s"});
        assert_eq!(
            eval(
                "self.at > timestamp('2024-01-01T00:00:00Z')",
                s.clone(),
                v.clone(),
                None
            ),
            Outcome::Pass
        );
        assert_eq!(
            eval("self.d == duration('1m30s')", s.clone(), v.clone(), None),
            Outcome::Pass
        );
        assert_eq!(eval("self.at.getFullYear() == 2024", s, v, None), Outcome::Pass);
    }

    #[test]
    fn transition_rule() {
        let st = json!({"type": "string"});
        let r = Rule::parse(
            &json!({"rule": "self == oldSelf", "message": "Value is immutable"}),
            "s",
        )
        .unwrap();
        assert!(r.is_transition);
        let mut rules = Vec::new();
        let n = node::parse(&st, "s", &mut rules).unwrap();
        let a = to_cel(&json!("a"), Some(&n));
        let b = to_cel(&json!("b"), Some(&n));
        assert_eq!(r.evaluate(&a, Some(&a)), Outcome::Pass);
        assert_eq!(
            r.evaluate(&a, Some(&b)),
            Outcome::Fail("Value is immutable".to_string())
        );
    }

    #[test]
    fn optional_old_self() {
        let mut rules = Vec::new();
        let n = node::parse(&json!({"type": "integer"}), "s", &mut rules).unwrap();
        let r = Rule::parse(
            &json!({"rule": "oldSelf.hasValue() ? self >= oldSelf.value() : self < 10", "optionalOldSelf": true}),
            "s",
        )
        .unwrap();
        assert!(r.is_transition && r.optional_old_self);
        let v = |i: i64| to_cel(&json!(i), Some(&n));
        assert_eq!(r.evaluate(&v(5), None), Outcome::Pass);
        assert!(matches!(r.evaluate(&v(50), None), Outcome::Fail(_)));
        assert_eq!(r.evaluate(&v(50), Some(&v(40))), Outcome::Pass);
        assert!(matches!(r.evaluate(&v(30), Some(&v(40))), Outcome::Fail(_)));
        assert!(r.unsupported_reason().is_none(), "{:?}", r.unsupported_reason());
    }

    #[test]
    fn message_expression_and_default_message() {
        let mut rules = Vec::new();
        let n = node::parse(&json!({"type": "integer"}), "s", &mut rules).unwrap();
        let v = to_cel(&json!(5), Some(&n));
        let r = Rule::parse(
            &json!({"rule": "self > 10", "messageExpression": "'got ' + string(self)"}),
            "s",
        )
        .unwrap();
        assert_eq!(r.evaluate(&v, None), Outcome::Fail("got 5".to_string()));
        let r = Rule::parse(&json!({"rule": "self > 10"}), "s").unwrap();
        assert_eq!(
            r.evaluate(&v, None),
            Outcome::Fail("failed rule: self > 10".to_string())
        );
    }

    #[test]
    fn unsupported_rules_are_skipped() {
        let r = Rule::parse(&json!({"rule": "self.(("}), "s").unwrap();
        assert!(r.unsupported_reason().is_some());
        assert_eq!(r.evaluate(&cel::Value::Null, None), Outcome::Skipped);
        let r = Rule::parse(&json!({"rule": "self.noSuchFunction()"}), "s").unwrap();
        assert_eq!(r.evaluate(&cel::Value::Int(1), None), Outcome::Skipped);
        assert!(r.unsupported_reason().is_some());
    }
}
