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
    /// `messageExpression`, if set.
    pub message_expression: Option<String>,
    /// `fieldPath`, if set (relative JSON path such as `.spec.x`).
    pub field_path: Option<String>,
    /// `reason`, if set (`FieldValueInvalid`, `FieldValueForbidden`, ...).
    pub reason: Option<String>,
    /// `optionalOldSelf`.
    pub optional_old_self: bool,
    /// Whether the rule references `oldSelf` (a transition rule).
    pub is_transition: bool,
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
            message_expression,
            field_path,
            reason,
            optional_old_self,
            is_transition,
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
        if let Ok(mut g) = self.unsupported.lock() {
            if g.is_none() {
                *g = Some(why);
            }
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
        let Some(program) = &self.program else {
            return Outcome::Skipped;
        };
        if self.unsupported_reason().is_some() {
            return Outcome::Skipped;
        }
        let Some(env) = env() else {
            return Outcome::Skipped;
        };
        let mut ctx = cel::Context::with_env(env);
        ctx.add_variable_from_value("self", this.clone());
        if let Some(o) = old {
            ctx.add_variable_from_value("oldSelf", o.clone());
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
            Err(e) => match classify(&e) {
                Some(text) => Outcome::Error(text),
                None => {
                    self.mark_unsupported(format!("the cel crate cannot evaluate it: {e}"));
                    Outcome::Skipped
                }
            },
        }
    }

    fn failure_message(&self, ctx: &cel::Context) -> String {
        if let Some(p) = &self.message_program {
            if let Ok(cel::Value::String(s)) = p.execute(ctx) {
                let s = s.trim();
                if !s.is_empty() && !s.contains('\n') {
                    return s.to_string();
                }
            }
        }
        self.message_or_default()
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
