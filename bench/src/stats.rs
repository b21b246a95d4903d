//! Medians, spreads and percentiles, and how figures are printed.

pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn sorted(v: &[f64]) -> Vec<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    s
}

/// `median (min–max, n=N)`, with the value formatted by `fmt`.
pub fn summary(v: &[f64], fmt: impl Fn(f64) -> String) -> String {
    if v.is_empty() {
        return "n/a".into();
    }
    let s = sorted(v);
    if s.len() == 1 {
        return format!("{} (n=1)", fmt(s[0]));
    }
    format!(
        "{} (spread {}–{}, n={})",
        fmt(percentile(&s, 50.0)),
        fmt(s[0]),
        fmt(s[s.len() - 1]),
        s.len()
    )
}

pub fn median(v: &[f64]) -> f64 {
    percentile(&sorted(v), 50.0)
}

pub fn ms(x: f64) -> String {
    if x < 10.0 {
        format!("{x:.2} ms")
    } else {
        format!("{x:.1} ms")
    }
}

pub fn mb(bytes: f64) -> String {
    format!("{:.1} MB", bytes / 1e6)
}

pub fn mib(bytes: f64) -> String {
    format!("{:.1} MiB", bytes / (1024.0 * 1024.0))
}

pub fn rate(x: f64) -> String {
    format!("{x:.1} MB/s")
}

pub fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

pub fn times(x: f64) -> String {
    format!("{x:.2}×")
}

pub fn secs(x: f64) -> String {
    format!("{x:.2} s")
}

/// One line of the report: the figure, the target, and whether the median meets it.
pub fn line(name: &str, figure: &str, target: &str, met: Option<bool>) {
    let verdict = match met {
        Some(true) => "met",
        Some(false) => "MISSED",
        None => "",
    };
    println!("  {name:<34} {figure:<46} target {target:<10} {verdict}");
}
