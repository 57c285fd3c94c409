//! rt-app workloads (`kind = "rt-app"`, `file = "x.json"`): the JSON use-case files of
//! rt-app (github.com/scheduler-tools/rt-app, doc/tutorial.txt at commit 55cb0c0, May 2026),
//! which LISA and sched_ext's tooling generate, run as guest workloads.
//!
//! Each task of the file becomes one workload of the VM, named `rt-app:<task>`, whose
//! `instance` threads loop over the task's phases (each phase repeated its `loop` times).
//! Only what has a counterpart in the guest model is taken, and the rest is refused with
//! the file, the task, the key and what is allowed, so that a file never runs as
//! something other than it says:
//!
//! | rt-app | vcpulab |
//! |---|---|
//! | `run: N` (N us of calibrated work) | `compute` of N us at the base clock (rt-app calibrates on CPU0 at its nominal speed, so the work is fixed and its duration scales with the clock, as here) |
//! | `sleep: N` | `sleep` N us |
//! | `timer: {ref, period, mode}` | a timer op: wait until the thread's next period boundary (rt-app's `t_next += period` from the use case's start; `relative`, the default, restarts from now when late, `absolute` catches up) |
//! | `lock: m`, `run`s, `unlock: m` | `lock` of the mutex `m` held for the runs' total (a pthread mutex: `kind = "mutex"`, user mode) |
//! | task `instance`, `loop`, `phases`, phase `loop` | threads; a finite task `loop` N ends the workload after N x instance loops; phases expanded in order |
//! | `policy` `SCHED_FIFO`/`SCHED_RR` | `priority = "rt"` (`SCHED_OTHER`/`SCHED_BATCH`: normal); `priority` values are not modelled |
//! | task `cpus` | the workload's `vcpus` (instance j on `cpus[j mod len]`) |
//!
//! Refused: `runtime` (a busy loop for wall-clock time, which goes on while preempted;
//! vcpulab's compute is an amount of work), `wait`/`signal`/`broad`/`sync`, `barrier`,
//! `suspend`/`resume`, `sem_post`/`sem_wait`, `yield`, `fork`, `mem`/`memrun`/`iorun`
//! (no condition variables, barriers, semaphores, directed yields or memory traffic in
//! the guest model yet), a task `delay`, phase-level `cpus`/`policy`, SCHED_DEADLINE and
//! SCHED_IDLE, `pi_enabled = true`, and a non-`unique` timer shared by several threads.
//!
//! The file is read as rt-app's json-c reads it: `/* */` and `//` comments and trailing
//! commas are allowed, and repeated keys in an object (`"run" : 10, ..., "run" : 20`, as
//! workgen accepts) are kept in order. Event keys are matched by prefix in rt-app's order
//! (`runtime0` is a runtime, `run1` a run).

use super::{Dist, Mode, Op, Work, WorkloadSpec};
use crate::reader::{Res, Table};
use crate::vocab::LockKind;

/// A JSON value with object members in file order (duplicates kept).
#[derive(Clone, Debug)]
enum J {
    Null,
    Bool(bool),
    Num(f64),
    Str(String),
    Arr(Vec<J>),
    Obj(Vec<(String, J)>),
}

impl J {
    fn type_name(&self) -> &'static str {
        match self {
            J::Null => "null",
            J::Bool(_) => "a boolean",
            J::Num(_) => "a number",
            J::Str(_) => "a string",
            J::Arr(_) => "an array",
            J::Obj(_) => "an object",
        }
    }
}

/// A lenient JSON reader (comments, trailing commas, repeated keys); errors carry the line.
struct Parser<'a> {
    s: &'a [u8],
    i: usize,
}

impl Parser<'_> {
    fn line(&self) -> usize {
        1 + self.s[..self.i.min(self.s.len())]
            .iter()
            .filter(|&&c| c == b'\n')
            .count()
    }

    fn fail<T>(&self, msg: &str) -> Result<T, String> {
        Err(format!("line {}: {msg}", self.line()))
    }

    fn skip(&mut self) -> Result<(), String> {
        loop {
            while self.i < self.s.len() && self.s[self.i].is_ascii_whitespace() {
                self.i += 1;
            }
            if self.s[self.i..].starts_with(b"/*") {
                match self.s[self.i + 2..].windows(2).position(|w| w == b"*/") {
                    Some(p) => self.i += p + 4,
                    None => return self.fail("a /* comment is never closed"),
                }
            } else if self.s[self.i..].starts_with(b"//") {
                while self.i < self.s.len() && self.s[self.i] != b'\n' {
                    self.i += 1;
                }
            } else {
                return Ok(());
            }
        }
    }

    fn peek(&mut self) -> Result<Option<u8>, String> {
        self.skip()?;
        Ok(self.s.get(self.i).copied())
    }

    fn value(&mut self, depth: u32) -> Result<J, String> {
        if depth > 64 {
            return self.fail("nested too deeply");
        }
        match self.peek()? {
            None => self.fail("the file ends where a value should be"),
            Some(b'{') => {
                self.i += 1;
                let mut members = Vec::new();
                loop {
                    match self.peek()? {
                        Some(b'}') => {
                            self.i += 1;
                            return Ok(J::Obj(members));
                        }
                        Some(b'"') => {}
                        _ => return self.fail("expected a \"key\" or }"),
                    }
                    let key = self.string()?;
                    if self.peek()? != Some(b':') {
                        // workgen fills in values a file leaves out ("suspend",); rt-app
                        // and this reader need them written.
                        return self.fail(&format!(
                            "expected : after \"{key}\" (every key needs a value; workgen's shorthand is not read)"
                        ));
                    }
                    self.i += 1;
                    let v = self.value(depth + 1)?;
                    members.push((key, v));
                    match self.peek()? {
                        Some(b',') => self.i += 1,
                        Some(b'}') => {}
                        _ => return self.fail("expected , or } after a member"),
                    }
                }
            }
            Some(b'[') => {
                self.i += 1;
                let mut items = Vec::new();
                loop {
                    if self.peek()? == Some(b']') {
                        self.i += 1;
                        return Ok(J::Arr(items));
                    }
                    items.push(self.value(depth + 1)?);
                    match self.peek()? {
                        Some(b',') => self.i += 1,
                        Some(b']') => {}
                        _ => return self.fail("expected , or ] after an item"),
                    }
                }
            }
            Some(b'"') => Ok(J::Str(self.string()?)),
            Some(_) => {
                let start = self.i;
                while self.i < self.s.len()
                    && (self.s[self.i].is_ascii_alphanumeric() || b"+-.".contains(&self.s[self.i]))
                {
                    self.i += 1;
                }
                let word = std::str::from_utf8(&self.s[start..self.i]).unwrap_or("");
                match word {
                    "true" => Ok(J::Bool(true)),
                    "false" => Ok(J::Bool(false)),
                    "null" => Ok(J::Null),
                    "" => self.fail(&format!("unexpected character {:?}", self.s[start] as char)),
                    w => match w.parse::<f64>() {
                        Ok(x) if x.is_finite() => Ok(J::Num(x)),
                        _ => self.fail(&format!("{w:?} is not a JSON value")),
                    },
                }
            }
        }
    }

    fn string(&mut self) -> Result<String, String> {
        self.i += 1; // the opening quote
        let mut out = Vec::new();
        while let Some(&c) = self.s.get(self.i) {
            self.i += 1;
            match c {
                b'"' => {
                    return String::from_utf8(out).or_else(|_| self.fail("a string is not UTF-8"))
                }
                b'\\' => {
                    let e = self.s.get(self.i).copied();
                    self.i += 1;
                    match e {
                        Some(b'n') => out.push(b'\n'),
                        Some(b't') => out.push(b'\t'),
                        Some(b'r') => out.push(b'\r'),
                        Some(b'b') => out.push(8),
                        Some(b'f') => out.push(12),
                        Some(b'u') => {
                            let hex = self.s.get(self.i..self.i + 4).unwrap_or(b"");
                            let code = std::str::from_utf8(hex)
                                .ok()
                                .and_then(|h| u32::from_str_radix(h, 16).ok())
                                .and_then(char::from_u32);
                            match code {
                                Some(ch) => {
                                    let mut buf = [0u8; 4];
                                    out.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                                    self.i += 4;
                                }
                                None => return self.fail("a bad \\u escape"),
                            }
                        }
                        Some(x @ (b'"' | b'\\' | b'/')) => out.push(x),
                        _ => return self.fail("a bad escape in a string"),
                    }
                }
                _ => out.push(c),
            }
        }
        self.fail("a string is never closed")
    }
}

fn parse_json(text: &str) -> Result<J, String> {
    let mut p = Parser {
        s: text.as_bytes(),
        i: 0,
    };
    let v = p.value(0)?;
    if p.peek()?.is_some() {
        return p.fail("text after the end of the top-level object");
    }
    Ok(v)
}

/// rt-app's event keys, in the order its parser tries them (`obj_is_event`): a key is the
/// first of these it starts with.
const EVENTS: &[&str] = &[
    "lock", "unlock", "wait", "signal", "broad", "sync", "sleep", "runtime", "run", "timer",
    "suspend", "resume", "memrun", "mem", "iorun", "yield", "barrier", "fork", "sem_post",
    "sem_wait",
];
const MAPPED_EVENTS: &str = "run, sleep, timer, lock/unlock around runs";
const TASK_KEYS: &str =
    "instance, loop, phases, policy, priority, cpus, delay (0 only) and the events";
const PHASE_KEYS: &str = "loop and the events";
/// Operations one task may expand to (phases times their loops).
const MAX_OPS: usize = 100_000;

fn event_of(key: &str) -> Option<&'static str> {
    EVENTS.iter().copied().find(|e| key.starts_with(e))
}

/// Where an error is: the scenario key (`vm[0].workload[1].file`) and the rt-app file.
struct Ctx<'a, 't> {
    t: &'a Table<'t>,
    file: &'a str,
}

impl Ctx<'_, '_> {
    fn err<T>(&self, msg: impl std::fmt::Display) -> Res<T> {
        self.t.err("file", format!("{}: {msg}", self.file))
    }
}

/// An integer number of microseconds (rt-app's unit) as nanoseconds.
fn micros(c: &Ctx, who: &str, key: &str, v: &J) -> Res<f64> {
    match v {
        J::Num(x) if *x >= 0.0 && x.fract() == 0.0 && *x < 1e12 => Ok(x * 1000.0),
        other => c.err(format!(
            "{who}, {key:?}: expected a whole number of microseconds >= 0, got {}",
            match other {
                J::Num(x) => x.to_string(),
                o => o.type_name().to_string(),
            }
        )),
    }
}

fn int(c: &Ctx, who: &str, key: &str, v: &J, lo: i64) -> Res<i64> {
    match v {
        J::Num(x) if x.fract() == 0.0 && *x >= lo as f64 && *x < 1e12 => Ok(*x as i64),
        _ => c.err(format!(
            "{who}, {key:?}: expected a whole number >= {lo}, got {}",
            match v {
                J::Num(x) => x.to_string(),
                o => o.type_name().to_string(),
            }
        )),
    }
}

fn string<'j>(c: &Ctx, who: &str, key: &str, v: &'j J) -> Res<&'j str> {
    match v {
        J::Str(s) => Ok(s),
        o => c.err(format!(
            "{who}, {key:?}: expected a string, got {}",
            o.type_name()
        )),
    }
}

/// A timer a thread uses: rt-app's `ref`, and whether each thread has its own.
struct TimerRef {
    name: String,
    unique: bool,
}

/// The operations of one phase's events, in order. `timers` collects the task's timer
/// refs (an op's slot is its index there).
#[allow(clippy::too_many_arguments)]
fn phase_ops(
    c: &Ctx,
    who: &str,
    events: &[(&String, &J)],
    locks: &mut Vec<String>,
    timers: &mut Vec<TimerRef>,
    ops: &mut Vec<Op>,
) -> Res<()> {
    let mut held: Option<(String, f64)> = None;
    for &(key, v) in events {
        let ev = event_of(key).unwrap_or("");
        if let Some((name, hold)) = &mut held {
            match ev {
                "run" => *hold += micros(c, who, key, v)?,
                "unlock" => {
                    let un = string(c, who, key, v)?;
                    if un != name.as_str() {
                        return c.err(format!("{who}, {key:?}: unlocks {un:?} while {name:?} is held; vcpulab maps lock, runs, unlock of one mutex (no nesting)"));
                    }
                    let id = match locks.iter().position(|l| *l == *name) {
                        Some(i) => i,
                        None => {
                            locks.push(name.clone());
                            locks.len() - 1
                        }
                    };
                    ops.push(Op::Lock {
                        lock: id as u32,
                        hold: Dist::Fixed(*hold),
                        kind: LockKind::Mutex,
                        mode: Mode::User,
                        shards: 1,
                    });
                    held = None;
                }
                _ => {
                    return c.err(format!("{who}, {key:?}: only run events may come between lock {name:?} and its unlock (vcpulab's lock op holds a mutex for an amount of work)"))
                }
            }
            continue;
        }
        match ev {
            "run" => ops.push(Op::Compute {
                work: Work::Time(Dist::Fixed(micros(c, who, key, v)?)),
                mode: Mode::User,
            }),
            "sleep" => ops.push(Op::Sleep {
                duration: Dist::Fixed(micros(c, who, key, v)?),
            }),
            "timer" => {
                let J::Obj(members) = v else {
                    return c.err(format!("{who}, {key:?}: expected an object {{\"ref\": ..., \"period\": ...}}, got {}", v.type_name()));
                };
                let (mut name, mut period, mut relative) = (None, None, true);
                for (k, x) in members {
                    match k.as_str() {
                        "ref" => name = Some(string(c, who, &format!("{key}.ref"), x)?.to_string()),
                        "period" => period = Some(micros(c, who, &format!("{key}.period"), x)?),
                        "mode" => {
                            relative = match string(c, who, &format!("{key}.mode"), x)? {
                                "relative" => true,
                                "absolute" => false,
                                other => return c.err(format!("{who}, \"{key}.mode\": unknown timer mode {other:?}; allowed: \"relative\", \"absolute\"")),
                            }
                        }
                        other => return c.err(format!("{who}, {key:?}: unknown timer key {other:?}; allowed: ref, period, mode")),
                    }
                }
                let (Some(name), Some(period)) = (name, period) else {
                    return c.err(format!("{who}, {key:?}: a timer needs a ref and a period"));
                };
                if period <= 0.0 {
                    return c.err(format!("{who}, \"{key}.period\": must be longer than 0"));
                }
                let slot = match timers.iter().position(|t| t.name == name) {
                    Some(i) => i,
                    None => {
                        timers.push(TimerRef {
                            unique: name.starts_with("unique"),
                            name,
                        });
                        timers.len() - 1
                    }
                };
                ops.push(Op::Timer {
                    period,
                    relative,
                    slot: slot as u32,
                });
            }
            "lock" => held = Some((string(c, who, key, v)?.to_string(), 0.0)),
            "unlock" => {
                return c.err(format!("{who}, {key:?}: unlock without a lock before it in the phase"))
            }
            "runtime" => return c.err(format!("{who}, {key:?}: runtime is a busy loop for wall-clock time (it goes on while the thread is preempted) and has no counterpart: vcpulab's compute is an amount of work; use run. Events that map: {MAPPED_EVENTS}")),
            "" => unreachable!("callers pass events only"),
            other => return c.err(format!("{who}, {key:?}: the {other} event has no counterpart in vcpulab's guest model; events that map: {MAPPED_EVENTS}")),
        }
        if ops.len() > MAX_OPS {
            return c.err(format!(
                "{who}: expands to more than {MAX_OPS} operations (phases x their loops)"
            ));
        }
    }
    if let Some((name, _)) = held {
        return c.err(format!(
            "{who}: lock {name:?} is not unlocked in the same phase"
        ));
    }
    Ok(())
}

fn policy_is_rt(c: &Ctx, who: &str, v: &J) -> Res<bool> {
    match string(c, who, "policy", v)? {
        "SCHED_OTHER" | "SCHED_BATCH" => Ok(false),
        "SCHED_FIFO" | "SCHED_RR" => Ok(true),
        other => c.err(format!("{who}, \"policy\": {other:?} is not modelled; allowed: SCHED_OTHER, SCHED_BATCH (normal threads), SCHED_FIFO, SCHED_RR (real-time threads)")),
    }
}

/// Reads the rt-app file named by a `kind = "rt-app"` workload table: one workload per
/// task with threads. `origin` is the scenario file (`file` is relative to its folder).
pub(super) fn parse(t: &Table, locks: &mut Vec<String>, vcpus: u32) -> Res<Vec<WorkloadSpec>> {
    // The file holds the workload; the table only names it.
    t.only(&["kind", "file"])?;
    let file = t.req("file")?.str()?.to_string();
    let path = match std::path::Path::new(t.origin).parent() {
        Some(dir) if !std::path::Path::new(&file).is_absolute() => dir.join(&file),
        _ => std::path::PathBuf::from(&file),
    };
    let text = match std::fs::read_to_string(&path) {
        Ok(s) => s,
        Err(e) => {
            return t.err(
                "file",
                format!("cannot read the rt-app file {}: {e}", path.display()),
            )
        }
    };
    let shown = path.display().to_string();
    let c = Ctx { t, file: &shown };
    let root = match parse_json(&text) {
        Ok(J::Obj(m)) => m,
        Ok(other) => {
            return c.err(format!(
                "expected an object with \"tasks\", got {}",
                other.type_name()
            ))
        }
        Err(e) => return c.err(format!("invalid JSON: {e}")),
    };
    let mut tasks = None;
    let mut default_rt = false;
    for (k, v) in &root {
        match k.as_str() {
            "tasks" => tasks = Some(v),
            // Resources are created on first use since rt-app 1.0; the object stays for
            // old files.
            "resources" => {}
            "global" => {
                let J::Obj(g) = v else {
                    return c.err(format!(
                        "\"global\": expected an object, got {}",
                        v.type_name()
                    ));
                };
                for (gk, gv) in g {
                    match gk.as_str() {
                        "default_policy" => default_rt = policy_is_rt(&c, "\"global\"", gv)?,
                        "pi_enabled" => {
                            if let J::Bool(true) = gv {
                                return c.err("\"global.pi_enabled\": priority inheritance is not modelled; allowed: false");
                            }
                        }
                        // The scenario's duration governs; calibration only converts run's
                        // microseconds to loops, which vcpulab takes as base-clock time; the
                        // rest is rt-app's logging and I/O set-up, and rt-app ignores keys it
                        // does not read (its own doc/examples/mp3-short.json has a "frag").
                        _ => {}
                    }
                }
            }
            other => {
                return c.err(format!(
                    "unknown top-level key {other:?}; allowed: tasks, global, resources"
                ))
            }
        }
    }
    let Some(J::Obj(tasks)) = tasks else {
        return c.err("needs a \"tasks\" object (one member per task)");
    };
    let mut specs = Vec::new();
    let mut shared_timers: Vec<(String, String)> = Vec::new(); // (ref, task)
    for (task, body) in tasks {
        let J::Obj(members) = body else {
            return c.err(format!(
                "task {task:?}: expected an object, got {}",
                body.type_name()
            ));
        };
        let who = format!("task {task:?}");
        let mut instances = 1i64;
        let mut task_loop = -1i64;
        let mut rt = default_rt;
        let mut placement = None;
        let mut phases: Vec<(String, &Vec<(String, J)>)> = Vec::new();
        let mut events: Vec<(&String, &J)> = Vec::new();
        for (k, v) in members {
            match k.as_str() {
                "instance" => instances = int(&c, &who, k, v, 0)?,
                "loop" => {
                    task_loop = int(&c, &who, k, v, -1)?;
                    if task_loop == 0 {
                        return c.err(format!("task {task:?}, \"loop\": 0 runs nothing; give -1 (forever) or a count >= 1"));
                    }
                }
                "policy" => rt = policy_is_rt(&c, &who, v)?,
                // Nice levels and RT priorities: the guest model has normal and RT threads only.
                "priority" => {}
                "delay" => {
                    if micros(&c, &who, k, v)? != 0.0 {
                        return c.err(format!("task {task:?}, \"delay\": a start delay is not modelled (a workload's threads start with the run); allowed: 0"));
                    }
                }
                "cpus" => {
                    let J::Arr(items) = v else {
                        return c.err(format!("task {task:?}, \"cpus\": expected an array of CPU numbers, got {}", v.type_name()));
                    };
                    let mut list = Vec::new();
                    for x in items {
                        let cpu = int(&c, &who, k, x, 0)?;
                        if cpu >= vcpus as i64 {
                            return c.err(format!("task {task:?}, \"cpus\": CPU {cpu} does not exist: the VM has vCPUs 0-{}", vcpus - 1));
                        }
                        if !list.contains(&(cpu as u32)) {
                            list.push(cpu as u32);
                        }
                    }
                    if list.is_empty() {
                        return c.err(format!("task {task:?}, \"cpus\": must list at least one CPU"));
                    }
                    placement = Some(list);
                }
                "phases" => {
                    let J::Obj(ps) = v else {
                        return c.err(format!("task {task:?}, \"phases\": expected an object of phases, got {}", v.type_name()));
                    };
                    for (pname, p) in ps {
                        let J::Obj(pm) = p else {
                            return c.err(format!("task {task:?}, phase {pname:?}: expected an object, got {}", p.type_name()));
                        };
                        phases.push((pname.clone(), pm));
                    }
                }
                _ if event_of(k).is_some() => events.push((k, v)),
                other => return c.err(format!("task {task:?}: unknown or unmodelled key {other:?}; allowed: {TASK_KEYS} ({MAPPED_EVENTS})")),
            }
        }
        if !phases.is_empty() && !events.is_empty() {
            return c.err(format!(
                "task {task:?}: give either phases or events at the task level, not both"
            ));
        }
        let mut ops = Vec::new();
        let mut timers = Vec::new();
        if phases.is_empty() {
            if events.is_empty() {
                return c.err(format!(
                    "task {task:?}: has no events; events that map: {MAPPED_EVENTS}"
                ));
            }
            phase_ops(&c, &who, &events, locks, &mut timers, &mut ops)?;
        }
        for (pname, pm) in &phases {
            let mut reps = 1i64;
            let mut pev = Vec::new();
            for (k, v) in pm.iter() {
                match k.as_str() {
                    "loop" => reps = int(&c, &format!("task {task:?}, phase {pname:?}"), k, v, 1)?,
                    _ if event_of(k).is_some() => pev.push((k, v)),
                    other => return c.err(format!("task {task:?}, phase {pname:?}: unknown or unmodelled key {other:?}; allowed: {PHASE_KEYS} ({MAPPED_EVENTS})")),
                }
            }
            if reps as usize * pev.len() > MAX_OPS {
                return c.err(format!("task {task:?}: expands to more than {MAX_OPS} operations (phases x their loops)"));
            }
            for _ in 0..reps {
                phase_ops(
                    &c,
                    &format!("task {task:?}, phase {pname:?}"),
                    &pev,
                    locks,
                    &mut timers,
                    &mut ops,
                )?;
            }
        }
        if ops.is_empty() {
            return c.err(format!(
                "task {task:?}: has no events; events that map: {MAPPED_EVENTS}"
            ));
        }
        for tm in &timers {
            if tm.unique {
                continue;
            }
            if instances > 1 {
                return c.err(format!("task {task:?}: timer {:?} would be shared by the task's {instances} instances (rt-app shares a timer among every thread naming it; vcpulab keeps one per thread): name it \"unique...\" or use one instance", tm.name));
            }
            if let Some((_, other)) = shared_timers.iter().find(|(r, _)| *r == tm.name) {
                return c.err(format!("task {task:?}: timer {:?} is also used by task {other:?} (rt-app shares it; vcpulab keeps one per thread): give each task its own timer", tm.name));
            }
            shared_timers.push((tm.name.clone(), task.clone()));
        }
        if instances == 0 {
            continue; // rt-app creates no thread for it
        }
        specs.push(WorkloadSpec {
            kind: format!("rt-app:{task}"),
            threads: instances as u32,
            ops,
            unit: "loops/s".into(),
            counts_requests: false,
            arrivals: None,
            rt,
            dirty_bytes_per_ns: 0.0,
            request_bytes: 0,
            total_units: (task_loop > 0).then(|| task_loop as u64 * instances as u64),
            vcpus: placement,
            bytes_per_unit: 0,
            rx: None,
            latency_taken: false,
        });
    }
    if specs.is_empty() {
        return c.err("no task has a thread (every instance is 0)");
    }
    Ok(specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Parses `json` as the rt-app file of a workload in a 4-vCPU VM (written to a
    /// temporary folder, named by the scenario's path as the reader resolves it).
    fn read(name: &str, json: &str) -> (Res<Vec<WorkloadSpec>>, Vec<String>) {
        let dir = std::env::temp_dir().join(format!("vcpulab-rtapp-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("x.json"), json).unwrap();
        let origin = dir.join("s.toml").to_string_lossy().to_string();
        let v: toml::Value = "kind = \"rt-app\"\nfile = \"x.json\"".parse().unwrap();
        let t = Table::root(&origin, &v).unwrap();
        let mut locks = vec!["other".to_string()];
        let r = parse(&t, &mut locks, 4);
        std::fs::remove_dir_all(&dir).unwrap();
        (r, locks)
    }

    fn us(x: f64) -> Dist {
        Dist::Fixed(x * 1000.0)
    }

    #[test]
    fn each_event_maps_to_its_operation() {
        let (r, locks) = read(
            "map",
            r#"{ "tasks": {
                "a": { "instance": 2, "loop": 3, "policy": "SCHED_FIFO", "priority": 5, "cpus": [1, 3],
                       "run0": 100, "lock": "m", "run1": 20, "run2": 5, "unlock": "m",
                       "sleep": 50, "timer": { "ref": "unique", "period": 1000, "mode": "absolute" } },
                "b": { "phases": {
                         "p0": { "loop": 2, "run": 10, "timer": { "ref": "t", "period": 200 } },
                         "p1": { "sleep": 7, "timer": { "ref": "t", "period": 300 } } } },
                "c": { "instance": 0, "run": 1 }
              },
              "global": { "default_policy": "SCHED_OTHER", "duration": 5, "calibration": "CPU0" } }"#,
        );
        let specs = r.unwrap();
        assert_eq!(locks, ["other", "m"]);
        assert_eq!(specs.len(), 2, "c has no thread");
        let a = &specs[0];
        assert_eq!((a.kind.as_str(), a.threads, a.rt), ("rt-app:a", 2, true));
        assert_eq!(
            (a.total_units, a.vcpus.clone()),
            (Some(6), Some(vec![1, 3]))
        );
        assert_eq!(
            a.ops,
            [
                Op::Compute {
                    work: Work::Time(us(100.0)),
                    mode: Mode::User
                },
                Op::Lock {
                    lock: 1,
                    hold: us(25.0),
                    kind: LockKind::Mutex,
                    mode: Mode::User,
                    shards: 1
                },
                Op::Sleep { duration: us(50.0) },
                Op::Timer {
                    period: 1e6,
                    relative: false,
                    slot: 0
                },
            ]
        );
        let b = &specs[1];
        assert_eq!(
            (b.kind.as_str(), b.threads, b.rt, b.total_units),
            ("rt-app:b", 1, false, None)
        );
        let run = Op::Compute {
            work: Work::Time(us(10.0)),
            mode: Mode::User,
        };
        let t200 = Op::Timer {
            period: 2e5,
            relative: true,
            slot: 0,
        };
        assert_eq!(
            b.ops,
            [
                run.clone(),
                t200.clone(),
                run,
                t200,
                Op::Sleep { duration: us(7.0) },
                Op::Timer {
                    period: 3e5,
                    relative: true,
                    slot: 0
                },
            ]
        );
    }

    /// Each refusal names the rt-app file, the task, the key and what is allowed.
    #[test]
    fn what_does_not_map_is_refused_by_name() {
        let cases: &[(&str, &str, &[&str])] = &[
            (
                r#"{"tasks": {"t": {"run": 1, "barrier": "b"}}}"#,
                "task \"t\", \"barrier\": the barrier event has no counterpart",
                &["events that map: run, sleep, timer, lock/unlock"],
            ),
            (
                r#"{"tasks": {"t": {"phases": {"p": {"run": 1, "wait": {"ref": "c", "mutex": "m"}}}}}}"#,
                "task \"t\", phase \"p\", \"wait\": the wait event",
                &["events that map"],
            ),
            (
                r#"{"tasks": {"t": {"runtime": 5}}}"#,
                "task \"t\", \"runtime\": runtime is a busy loop for wall-clock time",
                &["use run"],
            ),
            (
                r#"{"tasks": {"t": {"lock": "m", "sleep": 1, "unlock": "m"}}}"#,
                "task \"t\", \"sleep\": only run events may come between lock \"m\"",
                &[],
            ),
            (
                r#"{"tasks": {"t": {"lock": "m", "run": 1}}}"#,
                "task \"t\": lock \"m\" is not unlocked",
                &[],
            ),
            (
                r#"{"tasks": {"t": {"run": 1, "util_min": 100}}}"#,
                "task \"t\": unknown or unmodelled key \"util_min\"",
                &["allowed: instance, loop, phases"],
            ),
            (
                r#"{"tasks": {"t": {"instance": 2, "run": 1, "timer": {"ref": "x", "period": 10}}}}"#,
                "timer \"x\" would be shared by the task's 2 instances",
                &["\"unique...\""],
            ),
            (
                r#"{"tasks": {"t": {"policy": "SCHED_DEADLINE", "run": 1}}}"#,
                "\"SCHED_DEADLINE\" is not modelled",
                &["allowed: SCHED_OTHER"],
            ),
            (
                r#"{"tasks": {"t": {"cpus": [4], "run": 1}}}"#,
                "CPU 4 does not exist: the VM has vCPUs 0-3",
                &[],
            ),
            (
                r#"{"tasks": {"t": {"run": 1.5}}}"#,
                "task \"t\", \"run\": expected a whole number of microseconds >= 0, got 1.5",
                &[],
            ),
            (
                r#"{"tasks": {"t": {"run": 1, "timer": {"ref": "x", "period": 10, "mode": "abs"}}}}"#,
                "unknown timer mode \"abs\"",
                &["allowed: \"relative\", \"absolute\""],
            ),
            (
                r#"{"global": {"pi_enabled": true}, "tasks": {"t": {"run": 1}}}"#,
                "priority inheritance is not modelled",
                &[],
            ),
            (
                "{\"tasks\": {\n\"t\": {\"run\": 1}\n\"u\": 2}}",
                "x.json: invalid JSON: line 3: expected , or } after a member",
                &[],
            ),
        ];
        for (i, (json, want, also)) in cases.iter().enumerate() {
            let err = read(&format!("bad{i}"), json).0.unwrap_err();
            let msg = err.to_string();
            assert_eq!(err.path, "file", "{msg}");
            assert!(msg.contains("x.json: "), "names the rt-app file: {msg}");
            assert!(msg.contains(want), "{msg}\n  wanted: {want}");
            for a in *also {
                assert!(msg.contains(a), "{msg}\n  wanted: {a}");
            }
        }
        let v: toml::Value = "kind = \"rt-app\"\nfile = \"missing.json\""
            .parse()
            .unwrap();
        let t = Table::root("/nonexistent/s.toml", &v).unwrap();
        let msg = parse(&t, &mut vec![], 4).unwrap_err().to_string();
        assert!(
            msg.contains("file: cannot read the rt-app file /nonexistent/missing.json"),
            "{msg}"
        );
    }

    #[test]
    fn lenient_json_keeps_repeated_keys_in_order() {
        let j = parse_json("/* c */ {\"a\": 1, // x\n \"a\": [true, null,], \"b\": \"\\u00e9\",}")
            .unwrap();
        let J::Obj(m) = j else { panic!() };
        let keys: Vec<&str> = m.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(keys, ["a", "a", "b"]);
        assert!(matches!(&m[1].1, J::Arr(v) if v.len() == 2));
        assert!(matches!(&m[2].1, J::Str(s) if s == "é"));
        let e = parse_json("{\n\"a\": 1\n\"b\": 2}").unwrap_err();
        assert_eq!(e, "line 3: expected , or } after a member");
        assert!(parse_json("{\"a\": /* open")
            .unwrap_err()
            .contains("never closed"));
    }

    #[test]
    fn event_keys_match_by_prefix_in_rt_apps_order() {
        assert_eq!(event_of("runtime0"), Some("runtime"));
        assert_eq!(event_of("run1"), Some("run"));
        assert_eq!(event_of("unlock"), Some("unlock"));
        assert_eq!(event_of("memrun"), Some("memrun"));
        assert_eq!(event_of("loop"), None);
    }
}
