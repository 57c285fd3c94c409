//! cgroups created for a run: cpu shares / quota (cpu controller) and cpusets, placed per
//! thread. cgroup v1 (what these machines have: the v2 hierarchy is mounted with no
//! controllers). Threads can only be placed individually in v1; on a v2-only host the
//! harness says so instead of guessing.
//!
//! Every directory is named `vcpulab-kvm.<pid>.<group>`; [`Cgroups`] moves its threads back
//! to where they were and removes its directories on drop (also after errors and Ctrl-C).
//! Directories left by a killed run (its pid gone) are removed at the next run's start.

use crate::config::CgroupConfig;
use crate::error::{Error, Result};
use std::fs;
use std::path::{Path, PathBuf};

pub const PREFIX: &str = "vcpulab-kvm.";

#[derive(Clone, Debug)]
pub struct Mounts {
    pub cpu: Option<PathBuf>,
    pub cpuset: Option<PathBuf>,
}

/// Finds the v1 `cpu` and `cpuset` hierarchies (from /proc/self/mountinfo).
pub fn mounts() -> Mounts {
    let mut m = Mounts {
        cpu: None,
        cpuset: None,
    };
    let Ok(info) = fs::read_to_string("/proc/self/mountinfo") else {
        return m;
    };
    for line in info.lines() {
        // ... mountpoint ... - cgroup cgroup rw,cpu,cpuacct
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let mut r = right.split_whitespace();
        if r.next() != Some("cgroup") {
            continue;
        }
        let opts: Vec<&str> = r.nth(1).unwrap_or("").split(',').collect();
        let mp = left.split_whitespace().nth(4).map(PathBuf::from);
        if opts.contains(&"cpu") && m.cpu.is_none() {
            m.cpu = mp.clone();
        }
        if opts.contains(&"cpuset") && m.cpuset.is_none() {
            m.cpuset = mp;
        }
    }
    m
}

/// "v1", "v2" or "none": what this machine offers for per-thread cpu control.
pub fn version() -> &'static str {
    let m = mounts();
    if m.cpu.is_some() || m.cpuset.is_some() {
        "v1"
    } else if fs::read_to_string("/sys/fs/cgroup/cgroup.controllers")
        .map(|c| c.contains("cpu"))
        .unwrap_or(false)
    {
        "v2"
    } else {
        "none"
    }
}

fn write(path: &Path, value: &str) -> Result<()> {
    fs::write(path, value)
        .map_err(|e| Error::Cgroup(format!("write {value:?} to {}", path.display()), e))
}

fn pid_alive(pid: i32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
}

/// The cgroup (relative path) of thread `tid` in the hierarchy holding `controller`.
fn thread_cgroup(tid: i32, controller: &str) -> Option<String> {
    let text = fs::read_to_string(format!("/proc/self/task/{tid}/cgroup")).ok()?;
    for line in text.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        if ctrls.split(',').any(|c| c == controller) {
            return Some(path.to_string());
        }
    }
    None
}

#[derive(Debug)]
struct Created {
    name: String,
    dir: PathBuf,
    root: PathBuf,
}

/// The cgroups of one run. Dropping it undoes everything.
#[derive(Debug, Default)]
pub struct Cgroups {
    created: Vec<Created>,
    /// (tid, tasks file it came from)
    moved: Vec<(i32, PathBuf)>,
    pub log: Vec<String>,
}

impl Cgroups {
    /// Creates the directories and writes the settings.
    pub fn create(cfgs: &[CgroupConfig]) -> Result<Cgroups> {
        let mut cg = Cgroups::default();
        if cfgs.is_empty() {
            return Ok(cg);
        }
        let m = mounts();
        if m.cpu.is_none() && m.cpuset.is_none() {
            let why = if version() == "v2" {
                "only cgroup v2 is available; per-thread placement needs v1 (v2 would need threaded cgroups, not supported by this harness)"
            } else {
                "no cgroup cpu/cpuset hierarchy is mounted"
            };
            return Err(Error::Cgroup(
                "setup".into(),
                std::io::Error::new(std::io::ErrorKind::Unsupported, why),
            ));
        }
        remove_stale(&m, &mut cg.log);
        let pid = std::process::id();
        for c in cfgs {
            let dirname = format!("{PREFIX}{pid}.{}", c.name);
            if c.shares.is_some() || c.quota_ns.is_some() {
                let root = m.cpu.clone().ok_or_else(|| {
                    Error::Cgroup(
                        "cpu".into(),
                        std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "no cpu controller mounted",
                        ),
                    )
                })?;
                let dir = cg.mkdir(&c.name, &root, &dirname)?;
                if let Some(s) = c.shares {
                    write(&dir.join("cpu.shares"), &s.to_string())?;
                }
                if let Some(q) = c.quota_ns {
                    let period = c.period_ns.unwrap_or(100_000_000);
                    write(&dir.join("cpu.cfs_period_us"), &(period / 1000).to_string())?;
                    write(&dir.join("cpu.cfs_quota_us"), &(q / 1000).to_string())?;
                }
            }
            if let Some(cpus) = &c.cpus {
                let root = m.cpuset.clone().ok_or_else(|| {
                    Error::Cgroup(
                        "cpuset".into(),
                        std::io::Error::new(
                            std::io::ErrorKind::NotFound,
                            "no cpuset controller mounted",
                        ),
                    )
                })?;
                let dir = cg.mkdir(&c.name, &root, &dirname)?;
                write(&dir.join("cpuset.cpus"), cpus)?;
                let mems =
                    fs::read_to_string(root.join("cpuset.mems")).unwrap_or_else(|_| "0".into());
                write(&dir.join("cpuset.mems"), mems.trim())?;
            }
        }
        Ok(cg)
    }

    fn mkdir(&mut self, name: &str, root: &Path, dirname: &str) -> Result<PathBuf> {
        let dir = root.join(dirname);
        fs::create_dir(&dir).map_err(|e| Error::Cgroup(format!("mkdir {}", dir.display()), e))?;
        self.log.push(format!("created {}", dir.display()));
        self.created.push(Created {
            name: name.to_string(),
            dir: dir.clone(),
            root: root.to_path_buf(),
        });
        Ok(dir)
    }

    /// The directories of group `name` (one per controller).
    pub fn dirs(&self, name: &str) -> Vec<PathBuf> {
        self.created
            .iter()
            .filter(|c| c.name == name)
            .map(|c| c.dir.clone())
            .collect()
    }

    /// Moves thread `tid` into group `name` (every controller of it).
    pub fn place(&mut self, name: &str, tid: i32) -> Result<()> {
        let targets: Vec<(PathBuf, PathBuf)> = self
            .created
            .iter()
            .filter(|c| c.name == name)
            .map(|c| (c.dir.clone(), c.root.clone()))
            .collect();
        if targets.is_empty() {
            return Err(Error::Config(format!("cgroup {name:?} is not defined")));
        }
        for (dir, root) in targets {
            let ctrl = if dir.join("cpuset.cpus").exists() {
                "cpuset"
            } else {
                "cpu"
            };
            let orig = thread_cgroup(tid, ctrl).unwrap_or_else(|| "/".into());
            let orig_tasks = root.join(orig.trim_start_matches('/')).join("tasks");
            write(&dir.join("tasks"), &tid.to_string())?;
            self.moved.push((tid, orig_tasks));
        }
        Ok(())
    }

    /// Moves threads back and removes the directories; returns what was done.
    pub fn cleanup(&mut self) -> Vec<String> {
        for (tid, tasks) in self.moved.drain(..).rev() {
            if Path::new(&format!("/proc/self/task/{tid}")).exists()
                && fs::write(&tasks, tid.to_string()).is_ok()
            {
                self.log
                    .push(format!("moved tid {tid} back to {}", tasks.display()));
            }
        }
        for c in self.created.drain(..).rev() {
            match remove_dir(&c.dir, &c.root) {
                Ok(()) => self.log.push(format!("removed {}", c.dir.display())),
                Err(e) => self
                    .log
                    .push(format!("could not remove {}: {e}", c.dir.display())),
            }
        }
        std::mem::take(&mut self.log)
    }
}

impl Drop for Cgroups {
    fn drop(&mut self) {
        self.cleanup();
    }
}

/// Moves any remaining tasks to the hierarchy's root, then removes the directory (retrying
/// while exiting threads still hold it).
fn remove_dir(dir: &Path, root: &Path) -> std::io::Result<()> {
    let mut last = None;
    for attempt in 0..200 {
        if let Ok(tasks) = fs::read_to_string(dir.join("tasks")) {
            for t in tasks.split_whitespace() {
                let _ = fs::write(root.join("tasks"), t);
            }
        }
        match fs::remove_dir(dir) {
            Ok(()) => return Ok(()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => last = Some(e),
        }
        std::thread::sleep(std::time::Duration::from_millis(if attempt < 20 {
            1
        } else {
            10
        }));
    }
    Err(last.unwrap())
}

/// Removes `vcpulab-kvm.<pid>.*` directories whose process is gone (a killed run).
fn remove_stale(m: &Mounts, log: &mut Vec<String>) {
    for root in [&m.cpu, &m.cpuset].into_iter().flatten() {
        let Ok(rd) = fs::read_dir(root) else { continue };
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            let Some(rest) = name.strip_prefix(PREFIX) else {
                continue;
            };
            let pid: i32 = rest
                .split('.')
                .next()
                .and_then(|p| p.parse().ok())
                .unwrap_or(0);
            if pid > 0 && !pid_alive(pid) && remove_dir(&e.path(), root).is_ok() {
                log.push(format!("removed stale {}", e.path().display()));
            }
        }
    }
}

/// Our directories that exist now (for tests: none should remain after a run).
pub fn leftovers() -> Vec<PathBuf> {
    let m = mounts();
    let mut out = Vec::new();
    for root in [&m.cpu, &m.cpuset].into_iter().flatten() {
        if let Ok(rd) = fs::read_dir(root) {
            out.extend(
                rd.flatten()
                    .filter(|e| e.file_name().to_string_lossy().starts_with(PREFIX))
                    .map(|e| e.path()),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Creates a group with shares and a cpuset, places a thread in it, and checks that
    /// cleanup moves it back and removes the directories. Skips without v1 or privilege.
    #[test]
    fn create_place_cleanup() {
        let m = mounts();
        if m.cpu.is_none() || m.cpuset.is_none() {
            eprintln!("skipped: no cgroup v1 cpu+cpuset");
            return;
        }
        let cfg = vec![CgroupConfig {
            name: format!("unit{}", line!()),
            shares: Some(128),
            cpus: Some("0".into()),
            ..Default::default()
        }];
        let mut cg = match Cgroups::create(&cfg) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("skipped: {e}");
                return;
            }
        };
        let dirs = cg.dirs(&cfg[0].name);
        assert_eq!(dirs.len(), 2);
        let (tx, rx) = std::sync::mpsc::channel();
        let (tx2, rx2) = std::sync::mpsc::channel::<()>();
        let h = std::thread::spawn(move || {
            tx.send(crate::policy::gettid()).unwrap();
            rx2.recv().unwrap();
            crate::policy::get_affinity(0).unwrap()
        });
        let tid = rx.recv().unwrap();
        let before = thread_cgroup(tid, "cpu");
        cg.place(&cfg[0].name, tid).unwrap();
        assert!(thread_cgroup(tid, "cpu").unwrap().contains(PREFIX));
        assert_eq!(crate::policy::get_affinity(tid).unwrap(), vec![0]);
        let log = cg.cleanup();
        assert_eq!(thread_cgroup(tid, "cpu"), before, "{log:?}");
        tx2.send(()).unwrap();
        h.join().unwrap();
        for d in dirs {
            assert!(!d.exists(), "{} remains", d.display());
        }
    }
}
