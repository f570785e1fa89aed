//! A few of the Kubernetes CEL library functions the `cel` crate lacks: lists (`isSorted`, `sum`,
//! `min`, `max`, `indexOf`, `lastIndexOf`), regex (`find`, `findAll`), and `isIP`/`isCIDR`.

use std::net::IpAddr;

use cel::common::types::{DYN_TYPE, INT_TYPE, LIST_TYPE, STRING_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError, Value};

type Res<'b, 'v> = Result<CowVal<'b, 'v>, ExecutionError>;

/// Registers the functions on `env`.
pub(crate) fn register(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("isSorted", "k8s_list_is_sorted", LIST_TYPE, vec![], is_sorted)?;
    env.add_member_overload("sum", "k8s_list_sum", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "k8s_list_min", LIST_TYPE, vec![], list_min)?;
    env.add_member_overload("max", "k8s_list_max", LIST_TYPE, vec![], list_max)?;
    env.add_member_overload(
        "indexOf",
        "k8s_list_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        index_of,
    )?;
    env.add_member_overload(
        "lastIndexOf",
        "k8s_list_last_index_of",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    env.add_member_overload("find", "k8s_string_find", STRING_TYPE, vec![STRING_TYPE], find)?;
    env.add_member_overload(
        "findAll",
        "k8s_string_find_all",
        STRING_TYPE,
        vec![STRING_TYPE],
        find_all,
    )?;
    env.add_member_overload(
        "findAll",
        "k8s_string_find_all_n",
        STRING_TYPE,
        vec![STRING_TYPE, INT_TYPE],
        find_all_n,
    )?;
    env.add_overload("isIP", "k8s_is_ip", vec![STRING_TYPE], is_ip)?;
    env.add_overload("isCIDR", "k8s_is_cidr", vec![STRING_TYPE], is_cidr)?;
    Ok(())
}

fn values(args: &[CowVal<'_, '_>]) -> Result<Vec<Value>, ExecutionError> {
    args.iter().map(|a| Value::try_from(a.as_ref())).collect()
}

fn out<'b, 'v>(v: Value) -> Res<'b, 'v> {
    let b: Box<dyn Val> = v.try_into()?;
    Ok(CowVal::Owned(b))
}

fn list_arg(v: &Value, f: &str) -> Result<Vec<Value>, ExecutionError> {
    match v {
        Value::List(l) => Ok(l.as_ref().clone()),
        _ => Err(ExecutionError::function_error(f, "receiver must be a list")),
    }
}

fn str_arg<'a>(v: &'a Value, f: &str) -> Result<&'a str, ExecutionError> {
    match v {
        Value::String(s) => Ok(s.as_str()),
        _ => Err(ExecutionError::function_error(f, "argument must be a string")),
    }
}

fn is_sorted<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = values(&args)?;
    let l = list_arg(&a[0], "isSorted")?;
    let sorted = l
        .windows(2)
        .all(|w| w[0].partial_cmp(&w[1]).is_some_and(|o| o.is_le()));
    out(Value::Bool(sorted))
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = values(&args)?;
    let l = list_arg(&a[0], "sum")?;
    let mut acc = Value::Int(0);
    for (i, v) in l.into_iter().enumerate() {
        acc = match (acc, v) {
            (_, v) if i == 0 => v,
            (Value::Int(x), Value::Int(y)) => Value::Int(
                x.checked_add(y)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::UInt(x), Value::UInt(y)) => Value::UInt(
                x.checked_add(y)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?,
            ),
            (Value::Float(x), Value::Float(y)) => Value::Float(x + y),
            _ => return Err(ExecutionError::function_error("sum", "mixed or non-numeric list")),
        };
    }
    out(acc)
}

fn extreme<'b, 'v>(args: Vec<CowVal<'b, 'v>>, name: &str, want_less: bool) -> Res<'b, 'v> {
    let a = values(&args)?;
    let l = list_arg(&a[0], name)?;
    let mut best: Option<Value> = None;
    for v in l {
        best = Some(match best {
            None => v,
            Some(b) => {
                let ord = v
                    .partial_cmp(&b)
                    .ok_or_else(|| ExecutionError::function_error(name, "values not comparable"))?;
                if (want_less && ord.is_lt()) || (!want_less && ord.is_gt()) {
                    v
                } else {
                    b
                }
            }
        });
    }
    match best {
        Some(b) => out(b),
        None => Err(ExecutionError::function_error(
            name,
            format!("{name} called on empty list"),
        )),
    }
}

fn list_min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    extreme(args, "min", true)
}

fn list_max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    extreme(args, "max", false)
}

fn position<'b, 'v>(args: Vec<CowVal<'b, 'v>>, last: bool) -> Res<'b, 'v> {
    let a = values(&args)?;
    let l = list_arg(&a[0], "indexOf")?;
    let found = if last {
        l.iter().rposition(|x| x == &a[1])
    } else {
        l.iter().position(|x| x == &a[1])
    };
    out(Value::Int(found.map_or(-1, |i| i as i64)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    position(args, true)
}

fn regex_of(pattern: &str, f: &str) -> Result<regex::Regex, ExecutionError> {
    regex::Regex::new(&crate::pattern::translate(pattern)).map_err(|e| ExecutionError::function_error(f, e))
}

fn find<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = values(&args)?;
    let re = regex_of(str_arg(&a[1], "find")?, "find")?;
    let s = str_arg(&a[0], "find")?;
    out(Value::from(
        re.find(s).map(|m| m.as_str().to_string()).unwrap_or_default(),
    ))
}

fn find_all_limit<'b, 'v>(a: &[Value], limit: Option<usize>) -> Res<'b, 'v> {
    let re = regex_of(str_arg(&a[1], "findAll")?, "findAll")?;
    let s = str_arg(&a[0], "findAll")?;
    let found: Vec<Value> = re
        .find_iter(s)
        .take(limit.unwrap_or(usize::MAX))
        .map(|m| Value::from(m.as_str().to_string()))
        .collect();
    out(Value::from(found))
}

fn find_all<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = values(&args)?;
    find_all_limit(&a, None)
}

fn find_all_n<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = values(&args)?;
    let limit = match a.get(2) {
        Some(Value::Int(n)) if *n >= 0 => Some(*n as usize),
        _ => None,
    };
    if matches!(a.get(2), Some(Value::Int(0))) {
        return out(Value::from(Vec::<Value>::new()));
    }
    find_all_limit(&a, limit)
}

fn is_ip<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = values(&args)?;
    let s = str_arg(&a[0], "isIP")?;
    // Kubernetes rejects IPv4-mapped IPv6 and zones; `IpAddr` parsing already rejects zones.
    let ok = s.parse::<IpAddr>().is_ok_and(|ip| match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().is_none(),
        IpAddr::V4(_) => true,
    });
    out(Value::Bool(ok))
}

fn is_cidr<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Res<'b, 'v> {
    let a = values(&args)?;
    let s = str_arg(&a[0], "isCIDR")?;
    out(Value::Bool(crate::formats::is_valid("cidr", s)))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    fn eval(src: &str) -> cel::Value {
        let mut env = cel::Env::stdlib();
        super::register(&mut env).unwrap();
        let env = Arc::new(env);
        let p = env.compile(src).unwrap();
        p.execute(&cel::Context::with_env(env)).unwrap()
    }

    #[test]
    fn list_functions() {
        assert_eq!(eval("[1, 2, 2, 5].isSorted()"), cel::Value::Bool(true));
        assert_eq!(eval("['b', 'a'].isSorted()"), cel::Value::Bool(false));
        assert_eq!(eval("[1, 2, 3].sum()"), cel::Value::Int(6));
        assert_eq!(eval("[1.5, 2.0].sum()"), cel::Value::Float(3.5));
        assert_eq!(eval("[].sum()"), cel::Value::Int(0));
        assert_eq!(eval("[3, 1, 2].min()"), cel::Value::Int(1));
        assert_eq!(eval("[3, 1, 2].max()"), cel::Value::Int(3));
        assert_eq!(eval("['a', 'b', 'a'].indexOf('a')"), cel::Value::Int(0));
        assert_eq!(eval("['a', 'b', 'a'].lastIndexOf('a')"), cel::Value::Int(2));
        assert_eq!(eval("[1].indexOf(5)"), cel::Value::Int(-1));
    }

    #[test]
    fn regex_and_ip_functions() {
        assert_eq!(eval("'abc 123'.find('[0-9]+')"), cel::Value::from("123"));
        assert_eq!(eval("'a1b22c333'.findAll('[0-9]+').size()"), cel::Value::Int(3));
        assert_eq!(
            eval("'a1b22c333'.findAll('[0-9]+', 2).size()"),
            cel::Value::Int(2)
        );
        assert_eq!(
            eval("isIP('10.0.0.1') && isIP('fd00::1') && !isIP('10.0.0.300')"),
            cel::Value::Bool(true)
        );
        assert_eq!(
            eval("isCIDR('10.0.0.0/24') && !isCIDR('10.0.0.0')"),
            cel::Value::Bool(true)
        );
    }
}
