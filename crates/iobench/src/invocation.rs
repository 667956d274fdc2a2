//! What one JMH process runs: the study's cells ([`Cell`]) grouped into invocations
//! ([`Invocation`]), and what is left of an invocation after an interruption.

use crate::catalog::{self, Op, Size, DEFAULT_BUFFER};

/// The chunk size a program reads or writes with (reported in the buffer column).
pub fn app_buffer(op: Op) -> u32 {
    if op == Op::Zip4j {
        4096 // Zip4j's own default read buffer
    } else {
        DEFAULT_BUFFER
    }
}

/// One cell of the study: every run of it is a fresh JVM.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Cell {
    pub op: Op,
    pub method: String,
    pub size: Size,
    pub buffer: u32,
}

/// One JMH invocation of a round: benchmarks × sizes × buffers.
#[derive(Debug, Clone, PartialEq)]
pub struct Invocation {
    pub benchmarks: Vec<(Op, &'static str)>,
    pub sizes: Vec<Size>,
    pub buffers: Vec<u32>,
    /// For a program (RQ2): its swappable methods, passed as `-p method=...`.
    pub app_methods: Vec<&'static str>,
}

impl Invocation {
    /// The number of forks (= runs) one execution of this invocation yields.
    pub fn forks(&self) -> usize {
        self.benchmarks
            .iter()
            .map(|(op, _)| {
                // JMH crosses every benchmark of a class with that class's parameters.
                let per_size = match op {
                    Op::Read | Op::Write | Op::Writesync => self.buffers.len(),
                    o if o.is_app() => self.app_methods.len(),
                    _ => 1,
                };
                self.sizes.len() * per_size
            })
            .sum()
    }

    /// JMH `-p` options besides the size.
    pub fn params(&self) -> Vec<String> {
        let mut v = vec![];
        if !self.buffers.is_empty() {
            v.push("-p".into());
            v.push(format!(
                "buffer={}",
                self.buffers
                    .iter()
                    .map(|b| b.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        if !self.app_methods.is_empty() {
            v.push("-p".into());
            v.push(format!("method={}", self.app_methods.join(",")));
        }
        v
    }

    /// The cells one execution runs, in the order of `benchmarks` × `sizes` × buffers (or
    /// program methods).
    pub fn cells(&self) -> Vec<Cell> {
        let mut cells = vec![];
        for &(op, m) in &self.benchmarks {
            if op.is_app() {
                for &size in &self.sizes {
                    for am in &self.app_methods {
                        cells.push(Cell {
                            op,
                            method: am.to_string(),
                            size,
                            buffer: app_buffer(op),
                        });
                    }
                }
                continue;
            }
            let buffered = catalog::find(op, m).is_some_and(|i| i.buffered);
            for &size in &self.sizes {
                let bufs = if buffered {
                    self.buffers.clone()
                } else {
                    vec![DEFAULT_BUFFER]
                };
                for buffer in bufs {
                    cells.push(Cell {
                        op,
                        method: m.to_string(),
                        size,
                        buffer,
                    });
                }
            }
        }
        cells
    }

    /// What is left of this invocation in a round when the cells in `done` have had that
    /// round's run: all of it, nothing, or — after an interruption inside it — one
    /// invocation per (benchmark, size) still missing, covering exactly the missing cells.
    pub fn remaining(&self, done: impl Fn(&Cell) -> bool) -> Vec<Invocation> {
        let cells = self.cells();
        let missing: Vec<&Cell> = cells.iter().filter(|c| !done(c)).collect();
        if missing.len() == cells.len() {
            return vec![self.clone()];
        }
        let mut parts: Vec<Invocation> = vec![];
        for c in missing {
            let (bench, app_method) = if c.op.is_app() {
                let am = self.app_methods.iter().find(|m| **m == c.method).copied();
                (c.op.as_str(), am)
            } else {
                let b = self
                    .benchmarks
                    .iter()
                    .find(|(op, m)| *op == c.op && *m == c.method);
                (b.map_or("", |b| b.1), None)
            };
            let same = |p: &&mut Invocation| p.benchmarks == [(c.op, bench)] && p.sizes == [c.size];
            let part = match parts.iter_mut().find(same) {
                Some(p) => p,
                None => {
                    parts.push(Invocation {
                        benchmarks: vec![(c.op, bench)],
                        sizes: vec![c.size],
                        buffers: vec![],
                        app_methods: vec![],
                    });
                    parts.last_mut().expect("just pushed")
                }
            };
            match app_method {
                Some(am) => part.app_methods.push(am),
                None if !self.buffers.is_empty() => part.buffers.push(c.buffer),
                None => {}
            }
        }
        parts
    }

    /// JMH include patterns, one per benchmark, anchored.
    pub fn includes(&self) -> Vec<String> {
        self.benchmarks
            .iter()
            .map(|(op, m)| format!("^{}\\.{}$", op.bench_class().replace('.', "\\."), m))
            .collect()
    }
}
