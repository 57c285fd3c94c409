//! A path-tracking reader over a parsed TOML document.
//!
//! Scenario files are read key by key so that every error names the file, the key path and
//! what is allowed, and so that unknown keys (usually typos) are rejected rather than
//! silently ignored. Python dicts arrive as JSON and are converted to the same TOML value
//! tree, so both inputs share one validator.

use crate::error::ScenarioError;
use crate::time::{parse_duration, SimDuration};
use std::cell::RefCell;
use toml::Value;

pub type Res<T> = Result<T, ScenarioError>;

/// A table being read. `finish()` rejects any key that was not asked for.
pub struct Table<'a> {
    pub origin: &'a str,
    pub path: String,
    map: &'a toml::map::Map<String, Value>,
    used: RefCell<Vec<&'a str>>,
}

pub fn type_name(v: &Value) -> &'static str {
    match v {
        Value::String(_) => "a string",
        Value::Integer(_) => "an integer",
        Value::Float(_) => "a float",
        Value::Boolean(_) => "a boolean",
        Value::Datetime(_) => "a datetime",
        Value::Array(_) => "an array",
        Value::Table(_) => "a table",
    }
}

fn join(path: &str, key: &str) -> String {
    if path.is_empty() {
        key.to_string()
    } else {
        format!("{path}.{key}")
    }
}

/// A single value at a key path.
pub struct Owned<'a> {
    pub origin: &'a str,
    pub v: &'a Value,
    pub path: String,
}

impl<'a> Owned<'a> {
    pub fn err<T>(&self, msg: impl Into<String>) -> Res<T> {
        Err(ScenarioError::new(self.origin, self.path.clone(), msg))
    }
    pub fn table(&self) -> Res<Table<'a>> {
        match self.v {
            Value::Table(map) => Ok(Table {
                origin: self.origin,
                path: self.path.clone(),
                map,
                used: RefCell::new(vec![]),
            }),
            other => self.err(format!("expected a table, got {}", type_name(other))),
        }
    }
    pub fn str(&self) -> Res<&'a str> {
        match self.v {
            Value::String(s) => Ok(s.as_str()),
            other => self.err(format!("expected a string, got {}", type_name(other))),
        }
    }
    pub fn bool(&self) -> Res<bool> {
        match self.v {
            Value::Boolean(b) => Ok(*b),
            other => self.err(format!("expected true or false, got {}", type_name(other))),
        }
    }
    pub fn u64_in(&self, lo: u64, hi: u64) -> Res<u64> {
        match self.v {
            Value::Integer(i) if *i >= lo as i64 && (*i as u64) <= hi => Ok(*i as u64),
            Value::Integer(i) => self.err(format!("{i} is out of range; allowed {lo} to {hi}")),
            Value::Float(f) if f.fract() == 0.0 && *f >= lo as f64 && *f <= hi as f64 => {
                Ok(*f as u64)
            }
            other => self.err(format!(
                "expected an integer from {lo} to {hi}, got {}",
                type_name(other)
            )),
        }
    }
    pub fn f64_in(&self, lo: f64, hi: f64) -> Res<f64> {
        let x = match self.v {
            Value::Integer(i) => *i as f64,
            Value::Float(f) => *f,
            other => return self.err(format!("expected a number, got {}", type_name(other))),
        };
        if !x.is_finite() || x < lo || x > hi {
            return self.err(format!("{x} is out of range; allowed {lo} to {hi}"));
        }
        Ok(x)
    }
    pub fn duration(&self) -> Res<SimDuration> {
        match self.v {
            Value::String(s) => parse_duration(s).or_else(|m| self.err(m)),
            Value::Integer(_) | Value::Float(_) => {
                self.err("durations are strings with a unit, e.g. \"250us\", \"1.5ms\", \"10s\"")
            }
            other => self.err(format!(
                "expected a duration string like \"1ms\", got {}",
                type_name(other)
            )),
        }
    }
    pub fn array(&self) -> Res<Vec<Owned<'a>>> {
        match self.v {
            Value::Array(items) => Ok(items
                .iter()
                .enumerate()
                .map(|(i, v)| Owned {
                    origin: self.origin,
                    v,
                    path: format!("{}[{}]", self.path, i),
                })
                .collect()),
            other => self.err(format!("expected an array, got {}", type_name(other))),
        }
    }
}

impl<'a> Table<'a> {
    pub fn root(origin: &'a str, v: &'a Value) -> Res<Table<'a>> {
        Owned {
            origin,
            v,
            path: String::new(),
        }
        .table()
    }

    /// The same table, reported under another key path.
    pub fn with_path(mut self, path: &str) -> Self {
        self.path = path.to_string();
        self
    }

    pub fn err<T>(&self, key: &str, msg: impl Into<String>) -> Res<T> {
        Err(ScenarioError::new(self.origin, join(&self.path, key), msg))
    }

    pub fn get(&self, key: &str) -> Option<Owned<'a>> {
        let (k, v) = self.map.get_key_value(key)?;
        self.used.borrow_mut().push(k.as_str());
        Some(Owned {
            origin: self.origin,
            v,
            path: join(&self.path, key),
        })
    }

    pub fn req(&self, key: &str) -> Res<Owned<'a>> {
        if let Some(o) = self.get(key) {
            return Ok(o);
        }
        // A misspelt required key is both missing and unknown: name the typo, as `finish`
        // would, rather than only the key it stands for. Keys already read are known
        // ones; of the rest, the closest. A key read later could still be a legitimate
        // neighbour, so short keys need a closer match.
        if key.len() >= 3 {
            let unread: Vec<&'a str> = {
                let used = self.used.borrow();
                let map: &'a toml::map::Map<String, Value> = self.map;
                map.keys()
                    .map(String::as_str)
                    .filter(|k| !used.contains(k))
                    .collect()
            };
            if let Some(typo) = closest(key, &unread).filter(|t| key.len() >= 4 || lev(t, key) <= 1)
            {
                return self.err(
                    typo,
                    format!("unknown key (did you mean {key:?}? it is required)"),
                );
            }
        }
        self.err(key, "is required but missing")
    }

    pub fn has(&self, key: &str) -> bool {
        self.map.contains_key(key)
    }

    /// Keys in document order that were not read; used for scheduler parameter tables.
    pub fn keys(&self) -> impl Iterator<Item = &'a String> {
        self.map.keys()
    }

    /// Marks a key as read without reading it (its owner validates it elsewhere).
    pub fn touch(&self, key: &str) {
        if let Some((k, _)) = self.map.get_key_value(key) {
            self.used.borrow_mut().push(k.as_str());
        }
    }

    /// Rejects keys that were never read, listing the allowed ones.
    pub fn finish(&self, allowed: &[&str]) -> Res<()> {
        let used = self.used.borrow();
        match self.map.keys().find(|k| !used.contains(&k.as_str())) {
            Some(key) => self.unknown(key, allowed),
            None => Ok(()),
        }
    }

    /// Rejects, before any key is read, a key outside `allowed`: for tables whose allowed
    /// keys are known up front (a distribution's, from its `dist`), so that a key of
    /// the wrong form (`value` with `exp`) is named instead of the key it replaced
    /// being reported missing.
    pub fn only(&self, allowed: &[&str]) -> Res<()> {
        match self.map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(key) => self.unknown(key, allowed),
            None => Ok(()),
        }
    }

    fn unknown<T>(&self, key: &str, allowed: &[&str]) -> Res<T> {
        let hint = closest(key, allowed)
            .map(|c| format!(" (did you mean {c:?}?)"))
            .unwrap_or_default();
        self.err(
            key,
            format!(
                "unknown key{hint}; allowed keys here: {}",
                allowed.join(", ")
            ),
        )
    }

    pub fn opt_str(&self, key: &str) -> Res<Option<&'a str>> {
        self.get(key).map(|o| o.str()).transpose()
    }
    pub fn opt_u64(&self, key: &str, lo: u64, hi: u64) -> Res<Option<u64>> {
        self.get(key).map(|o| o.u64_in(lo, hi)).transpose()
    }
    pub fn opt_f64(&self, key: &str, lo: f64, hi: f64) -> Res<Option<f64>> {
        self.get(key).map(|o| o.f64_in(lo, hi)).transpose()
    }
    pub fn opt_bool(&self, key: &str) -> Res<Option<bool>> {
        self.get(key).map(|o| o.bool()).transpose()
    }
    pub fn opt_duration(&self, key: &str) -> Res<Option<SimDuration>> {
        self.get(key).map(|o| o.duration()).transpose()
    }
}

/// Edit distance (insertions, deletions, substitutions).
fn lev(a: &str, b: &str) -> usize {
    let a: Vec<char> = a.chars().collect();
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for i in 1..=a.len() {
        let mut cur = vec![i; b.len() + 1];
        for j in 1..=b.len() {
            let sub = prev[j - 1] + usize::from(a[i - 1] != b[j - 1]);
            cur[j] = sub.min(prev[j] + 1).min(cur[j - 1] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The allowed word closest to a typo (edit distance at most 2), for "did you mean".
pub fn closest<'b>(word: &str, allowed: &[&'b str]) -> Option<&'b str> {
    allowed
        .iter()
        .map(|c| (lev(word, c), *c))
        .filter(|(d, _)| *d <= 2)
        .min_by_key(|(d, _)| *d)
        .map(|(_, c)| c)
}

/// Converts a JSON document (from a Python dict) into a TOML value tree.
pub fn json_to_toml(origin: &str, v: &serde_json::Value, path: &str) -> Res<Value> {
    Ok(match v {
        serde_json::Value::Null => {
            return Err(ScenarioError::new(
                origin,
                path,
                "null is not allowed; leave the key out instead",
            ))
        }
        serde_json::Value::Bool(b) => Value::Boolean(*b),
        serde_json::Value::Number(n) => {
            if let Some(i) = n.as_i64() {
                Value::Integer(i)
            } else if let Some(f) = n.as_f64() {
                Value::Float(f)
            } else {
                return Err(ScenarioError::new(
                    origin,
                    path,
                    format!("number {n} is out of range"),
                ));
            }
        }
        serde_json::Value::String(s) => Value::String(s.clone()),
        serde_json::Value::Array(a) => Value::Array(
            a.iter()
                .enumerate()
                .map(|(i, x)| json_to_toml(origin, x, &format!("{path}[{i}]")))
                .collect::<Res<_>>()?,
        ),
        serde_json::Value::Object(m) => {
            let mut t = toml::map::Map::new();
            for (k, x) in m {
                t.insert(k.clone(), json_to_toml(origin, x, &join(path, k))?);
            }
            Value::Table(t)
        }
    })
}

/// Parses TOML text, turning syntax errors into a ScenarioError with line and column.
pub fn parse_toml(origin: &str, text: &str) -> Res<Value> {
    text.parse::<toml::Table>().map(Value::Table).map_err(|e| {
        let mut msg = format!("TOML syntax error: {}", e.message());
        if let Some(span) = e.span() {
            let line = text[..span.start.min(text.len())].matches('\n').count() + 1;
            let col = span.start
                - text[..span.start.min(text.len())]
                    .rfind('\n')
                    .map_or(0, |p| p + 1)
                + 1;
            msg = format!("line {line}, column {col}: {msg}");
        }
        ScenarioError::new(origin, "", msg)
    })
}
