//! Key-path edits on a scenario document: `vm[1].workload[0].threads = 4`.
//!
//! Used by reproductions (each case is the base scenario plus edits) and by sweeps (each
//! axis value is an edit). Paths are dotted keys with 0-based `[i]` indices, the same
//! form error messages use.

use toml::Value;

#[derive(Clone, Debug, PartialEq)]
enum Seg {
    Key(String),
    Index(usize),
}

fn parse_path(path: &str) -> Result<Vec<Seg>, String> {
    let mut segs = Vec::new();
    for part in path.split('.') {
        let (key, mut rest) = match part.find('[') {
            Some(i) => (&part[..i], &part[i..]),
            None => (part, ""),
        };
        if key.is_empty() {
            return Err(format!("key path {path:?} has an empty key"));
        }
        segs.push(Seg::Key(key.to_string()));
        while !rest.is_empty() {
            let close = rest
                .find(']')
                .ok_or_else(|| format!("key path {path:?}: missing ']'"))?;
            let idx: usize = rest[1..close].parse().map_err(|_| {
                format!(
                    "key path {path:?}: index {:?} is not a number",
                    &rest[1..close]
                )
            })?;
            segs.push(Seg::Index(idx));
            rest = &rest[close + 1..];
            if !rest.is_empty() && !rest.starts_with('[') {
                return Err(format!(
                    "key path {path:?}: unexpected {rest:?} after an index"
                ));
            }
        }
    }
    Ok(segs)
}

fn walk<'a>(
    root: &'a mut Value,
    segs: &[Seg],
    path: &str,
    create: bool,
) -> Result<&'a mut Value, String> {
    let mut cur = root;
    for (i, seg) in segs.iter().enumerate() {
        let here = || format!("key path {path:?}");
        cur = match seg {
            Seg::Key(k) => {
                let Value::Table(t) = cur else {
                    return Err(format!("{}: {:?} is not a table", here(), k));
                };
                if !t.contains_key(k) {
                    if !create {
                        return Err(format!("{}: no key {:?}", here(), k));
                    }
                    let fresh = if matches!(segs.get(i + 1), Some(Seg::Index(_))) {
                        Value::Array(vec![])
                    } else {
                        Value::Table(Default::default())
                    };
                    t.insert(k.clone(), fresh);
                }
                t.get_mut(k).unwrap()
            }
            Seg::Index(n) => {
                let Value::Array(a) = cur else {
                    return Err(format!(
                        "{}: [{}] indexes something that is not an array",
                        here(),
                        n
                    ));
                };
                let len = a.len();
                a.get_mut(*n).ok_or_else(|| {
                    format!(
                        "{}: index {n} is out of range (the array has {len} entries)",
                        here()
                    )
                })?
            }
        };
    }
    Ok(cur)
}

/// Sets the value at `path`, creating missing tables on the way; an array index one past
/// the end appends.
pub fn set(doc: &mut Value, path: &str, value: Value) -> Result<(), String> {
    let segs = parse_path(path)?;
    let (last, parent) = segs.split_last().unwrap();
    let p = walk(doc, parent, path, true)?;
    match (last, p) {
        (Seg::Key(k), Value::Table(t)) => {
            t.insert(k.clone(), value);
        }
        (Seg::Index(n), Value::Array(a)) if *n == a.len() => {
            // One past the end appends (e.g. adding a workload to a VM).
            a.push(value);
        }
        (Seg::Index(n), Value::Array(a)) => {
            let len = a.len();
            *a.get_mut(*n).ok_or_else(|| {
                format!(
                    "key path {path:?}: index {n} is out of range (the array has {len} entries)"
                )
            })? = value;
        }
        _ => {
            return Err(format!(
                "key path {path:?} does not fit the document's shape"
            ))
        }
    }
    Ok(())
}

/// Removes the value at `path` (a key, or an array entry).
pub fn remove(doc: &mut Value, path: &str) -> Result<(), String> {
    let segs = parse_path(path)?;
    let (last, parent) = segs.split_last().unwrap();
    let p = walk(doc, parent, path, false)?;
    match (last, p) {
        (Seg::Key(k), Value::Table(t)) => {
            t.remove(k)
                .ok_or_else(|| format!("key path {path:?}: no key {k:?}"))?;
        }
        (Seg::Index(n), Value::Array(a)) => {
            if *n >= a.len() {
                return Err(format!(
                    "key path {path:?}: index {n} is out of range (the array has {} entries)",
                    a.len()
                ));
            }
            a.remove(*n);
        }
        _ => {
            return Err(format!(
                "key path {path:?} does not fit the document's shape"
            ))
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_and_remove_by_path() {
        let mut doc: Value =
            toml::from_str("[[vm]]\nname='a'\nvcpus=1\n[[vm]]\nname='b'\nvcpus=2\n").unwrap();
        set(&mut doc, "vm[1].vcpus", Value::Integer(8)).unwrap();
        assert_eq!(doc["vm"][1]["vcpus"].as_integer(), Some(8));
        set(&mut doc, "scheduler.features.x", Value::Boolean(true)).unwrap();
        assert_eq!(doc["scheduler"]["features"]["x"].as_bool(), Some(true));
        remove(&mut doc, "vm[0]").unwrap();
        assert_eq!(doc["vm"][0]["name"].as_str(), Some("b"));
        assert!(set(&mut doc, "vm[5].vcpus", Value::Integer(1))
            .unwrap_err()
            .contains("out of range"));
        assert!(parse_path("vm[x]").unwrap_err().contains("not a number"));
    }
}
