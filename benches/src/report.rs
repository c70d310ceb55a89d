//! The benchmark's output: the Markdown table of times and ratios, and the CSV for
//! `benches/charts.py`.

use std::path::Path;
use std::time::Duration;

/// One workload's measurements: txvfs and each baseline that has an equivalent.
pub(crate) struct Row {
    pub(crate) name: String,
    pub(crate) unit: &'static str,
    pub(crate) txvfs: Duration,
    pub(crate) fs: Option<Duration>,
    pub(crate) rocks: Option<Duration>,
    /// SQLite (WAL), where a workload has an equivalent.
    pub(crate) sqlite: Option<Duration>,
    pub(crate) ops: usize,
}

/// A CSV field: quoted when it holds a comma or a quote (workload names such as "1,000").
fn csv_field(s: &str) -> String {
    if s.contains([',', '"']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// Writes the measurements as CSV for `benches/charts.py`: one line per workload and system,
/// `workload,system,role,seconds,per` (seconds per `per`: one operation, or one MiB for
/// throughputs); `role` is `txvfs` or `baseline`.
pub(crate) fn write_results(rows: &[Row], path: &Path) -> std::io::Result<()> {
    let mut out = String::from("workload,system,role,seconds,per\n");
    for r in rows.iter().filter(|r| r.fs.is_some() || r.rocks.is_some() || r.sqlite.is_some()) {
        let per = if r.unit == "MiB" { "MiB" } else { r.unit };
        for (system, role, d) in [
            ("txvfs", "txvfs", Some(r.txvfs)),
            ("std::fs", "baseline", r.fs),
            ("raw RocksDB", "baseline", r.rocks),
            ("SQLite", "baseline", r.sqlite),
        ] {
            if let Some(d) = d {
                out += &format!(
                    "{},{system},{role},{:.9e},{per}\n",
                    csv_field(&r.name),
                    d.as_secs_f64() / r.ops as f64
                );
            }
        }
    }
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, out)
}

/// A duration per operation (µs or ms), or a throughput for MiB rows.
fn per_op(d: Duration, ops: usize, unit: &str) -> String {
    if unit == "MiB" {
        format!("{:.0} MiB/s", ops as f64 / d.as_secs_f64())
    } else {
        let us = d.as_secs_f64() * 1e6 / ops as f64;
        if us >= 1000.0 {
            format!("{:.2} ms", us / 1000.0)
        } else {
            format!("{us:.1} µs")
        }
    }
}

/// Prints the table of every row: time per operation (or throughput) and the ratios.
pub(crate) fn print_table(rows: &[Row], create_ratio: f64, quick: bool) {
    println!("txvfs benchmark{} (time per op, or throughput; ratio = txvfs time / baseline time, lower is better)\n", if quick { " --quick" } else { "" });
    println!("| workload | txvfs | std::fs | raw RocksDB | SQLite | txvfs / std::fs | txvfs / RocksDB | txvfs / SQLite |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in rows {
        let cell =
            |d: Option<Duration>| d.map(|d| per_op(d, r.ops, r.unit)).unwrap_or_else(|| "-".into());
        let ratio = |d: Option<Duration>| {
            d.map(|d| format!("{:.2}x", r.txvfs.as_secs_f64() / d.as_secs_f64()))
                .unwrap_or_else(|| "-".into())
        };
        println!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |",
            r.name,
            cell(Some(r.txvfs)),
            cell(r.fs),
            cell(r.rocks),
            cell(r.sqlite),
            ratio(r.fs),
            ratio(r.rocks),
            ratio(r.sqlite)
        );
    }
    println!("\ncreate in a big directory / create in an empty one: {create_ratio:.2}x");
    // Throughput of the durable transactions relative to one thread, txvfs and raw RocksDB.
    let durable: Vec<&Row> =
        rows.iter().filter(|r| r.name.starts_with("durable 4 KiB txn")).collect();
    if let Some(one) = durable.first() {
        let rate = |d: Duration, ops: usize| ops as f64 / d.as_secs_f64();
        for r in &durable[1..] {
            let rk = match (r.rocks, one.rocks) {
                (Some(a), Some(b)) => format!("{:.2}x", rate(a, r.ops) / rate(b, one.ops)),
                _ => "-".into(),
            };
            println!(
                "{}: {:.2}x the throughput of one thread (raw RocksDB: {rk})",
                r.name,
                rate(r.txvfs, r.ops) / rate(one.txvfs, one.ops)
            );
        }
    }
}

/// The targets of issue 36: a row (by name prefix), the baseline it is compared with and
/// the least txvfs rate / baseline rate that meets it.
const TARGETS: [(&str, &str, f64); 13] = [
    ("create+write 4 KiB", "raw RocksDB", 0.8),
    ("stat each file once", "raw RocksDB", 0.8),
    ("stat (random", "std::fs", 1.0),
    ("open+read 4 KiB", "std::fs", 1.0),
    ("readdir of 1,000 ", "SQLite", 1.0),
    ("readdir of 100,000 ", "SQLite", 1.0),
    ("random 4 KiB pread", "std::fs", 1.0),
    ("sequential read", "std::fs", 0.7),
    ("sequential write", "raw RocksDB", 1.0),
    ("durable txn of", "raw RocksDB", 1.0),
    ("delete 4 KiB", "raw RocksDB", 0.5),
    ("rename 4 KiB", "raw RocksDB", 0.0),
    ("write_file 4 KiB", "raw RocksDB", 0.8),
];

/// Operations (or MiB) per second.
fn rate(d: Duration, ops: usize, unit: &str) -> String {
    let r = ops as f64 / d.as_secs_f64();
    let unit = if unit == "MiB" { " MiB" } else { "" };
    if r >= 1e6 {
        format!("{:.2}M{unit}/s", r / 1e6)
    } else if r >= 1e3 {
        format!("{:.1}k{unit}/s", r / 1e3)
    } else {
        format!("{r:.0}{unit}/s")
    }
}

/// Prints the rows that have a target as rates (higher is better), with txvfs's rate over the
/// target's baseline.
pub(crate) fn print_targets(rows: &[Row]) {
    println!("\nAs rates (higher is better); ratio = txvfs rate / the target's baseline rate:\n");
    println!("| workload | std::fs | raw RocksDB | SQLite (WAL) | txvfs | ratio | target | met |");
    println!("|---|---|---|---|---|---|---|---|");
    for r in rows {
        let Some((_, base, want)) = TARGETS.iter().find(|t| r.name.starts_with(t.0)) else {
            continue;
        };
        let cell =
            |d: Option<Duration>| d.map(|d| rate(d, r.ops, r.unit)).unwrap_or_else(|| "-".into());
        let b = match *base {
            "std::fs" => r.fs,
            "SQLite" => r.sqlite,
            _ => r.rocks,
        };
        let ratio = b.map(|b| b.as_secs_f64() / r.txvfs.as_secs_f64());
        let (ratio_s, target, met) = match ratio {
            Some(x) if *want > 0.0 => (
                format!("{x:.2}x {base}"),
                format!(">= {want}x {base}"),
                if x >= *want { "yes" } else { "no" },
            ),
            Some(x) => (format!("{x:.2}x {base}"), "-".into(), "-"),
            None => ("-".into(), "-".into(), "-"),
        };
        println!(
            "| {} | {} | {} | {} | {} | {ratio_s} | {target} | {met} |",
            r.name,
            cell(r.fs),
            cell(r.rocks),
            cell(r.sqlite),
            cell(Some(r.txvfs))
        );
    }
}
