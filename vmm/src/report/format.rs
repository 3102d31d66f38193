//! Number, time and interval formatting shared by every renderer.

pub(crate) use crate::analysis::answers::fmt_fraction;
pub(crate) use crate::statistics::{Ci, Estimate, MIN_CI_SAMPLES};

/// A per-operation rate with 4 significant digits; tiny or huge ones in exponent form so the
/// column stays narrow.
pub(crate) fn fmt_rate(v: f64) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { format!("{v}") };
    }
    let mag = v.abs().log10().floor() as i32;
    if !(-3..5).contains(&mag) {
        return format!("{v:.3e}");
    }
    let mut decimals = (3 - mag).max(0) as usize;
    let mut s = format!("{v:.decimals$}");
    // 9.99996 rounds up to "10.0000": one digit too many.
    let rounded_up = s
        .parse::<f64>()
        .is_ok_and(|r| r.abs() >= 10f64.powi(mag + 1));
    if rounded_up && decimals > 0 {
        decimals -= 1;
        s = format!("{v:.decimals$}");
    }
    s
}

/// A big number with a k/M/G/T suffix and 3 significant digits; small ones exactly.
pub(crate) fn fmt_si(v: f64) -> String {
    if !v.is_finite() {
        return format!("{v}");
    }
    if v.abs() < 10_000.0 {
        return if v.fract() == 0.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        };
    }
    let mut scaled = v;
    let mut suffix = "";
    for s in ["k", "M", "G", "T"] {
        if scaled.abs() < 1000.0 {
            break;
        }
        scaled /= 1000.0;
        suffix = s;
    }
    let digits = if scaled.abs() < 10.0 {
        2
    } else if scaled.abs() < 100.0 {
        1
    } else {
        0
    };
    format!("{scaled:.digits$}{suffix}")
}

pub(crate) fn fmt_count(v: u64) -> String {
    fmt_si(v as f64)
}

pub(crate) fn fmt_pct(fraction: f64) -> String {
    format!("{:.1}%", fraction * 100.0)
}

/// `-0` reads as a sign error in a spreadsheet; every other value prints as Rust prints it.
pub(crate) fn raw_number(v: f64) -> String {
    if v.is_nan() {
        // No figure: an empty cell, as a spreadsheet reads a missing value.
        String::new()
    } else if v == 0.0 {
        "0".into()
    } else {
        v.to_string()
    }
}

/// Shortens `s` to `max` characters by cutting out its middle: phase names differ at both ends.
pub(crate) fn ellipsize(s: &str, max: usize) -> String {
    let n = s.chars().count();
    if n <= max || max < 3 {
        return s.into();
    }
    let keep = max - 1;
    let head = keep.div_ceil(2);
    let tail = keep - head;
    let mut out: String = s.chars().take(head).collect();
    out.push('…');
    out.extend(s.chars().skip(n - tail));
    out
}

/// What a figure without data prints as.
pub(crate) const NO_DATA: &str = "no data";

/// The power of ten the last printed digit stands for: two significant digits of the
/// half-width, so a value is never shown finer than its interval resolves.
fn resolution_exponent(half: f64) -> i32 {
    half.abs().log10().floor() as i32 - 1
}

/// `v` rounded to 10^`exp`, without decimals when `exp` ≥ 0.
fn fmt_at(v: f64, exp: i32) -> String {
    let v = if exp >= 0 {
        let unit = 10f64.powi(exp);
        (v / unit).round() * unit
    } else {
        v
    };
    let decimals = (-exp).clamp(0, 9) as usize;
    let s = format!("{v:.decimals$}");
    // Rounding may leave "-0" or "-0.00": a sign with nothing behind it.
    if s.trim_start_matches('-')
        .chars()
        .all(|c| c == '0' || c == '.')
    {
        s.trim_start_matches('-').to_string()
    } else {
        s
    }
}

/// A non-negative spread with two significant digits.
pub(crate) fn fmt_spread(half: f64) -> String {
    if half <= 0.0 || !half.is_finite() {
        return "0".into();
    }
    fmt_at(half, resolution_exponent(half))
}

/// A cost as `median ±h`, where h is the distance from the median to the farther end of the
/// 95% CI, and the median has only the digits that h supports. A net whose CI includes 0
/// is `≈0 (±h)` and one wholly below 0 is `<0 (±h)`: subtracting the baseline can leave a
/// negative number that is noise, never a negative cost. Without a CI: 3 significant digits
/// and `±?`.
pub(crate) fn fmt_cost(e: impl Into<Option<Estimate>>) -> String {
    // No figure at all (no kept rounds): said so, never a 0.
    let Some(e) = e.into() else {
        return NO_DATA.into();
    };
    let Some(ci) = e.ci else {
        if e.point < 0.0 {
            return "<0 (±?)".into();
        }
        return format!("{} ±?", fmt_sig(e.point, 3));
    };
    let half = ci.half_width(e.point);
    if ci == (Ci { lo: 0.0, hi: 0.0 }) && e.point == 0.0 {
        return "0".into();
    }
    if ci.holds_zero() {
        return format!("≈0 (±{})", fmt_spread(half));
    }
    if ci.hi < 0.0 {
        return format!("<0 (±{})", fmt_spread(half));
    }
    if half == 0.0 {
        return fmt_sig(e.point, 4);
    }
    let exp = resolution_exponent(half);
    format!("{} ±{}", fmt_at(e.point, exp), fmt_at(half, exp))
}

/// A value with its CI bounds, `5650 [5600, 5700]`, all at the resolution of the CI; for
/// figures that may be negative (paired differences).
pub(crate) fn fmt_interval(e: Estimate) -> String {
    let half = e.half_width().unwrap_or(0.0);
    let (Some(ci), false) = (e.ci, half == 0.0) else {
        return format!("{} [no CI]", fmt_sig(e.point, 4));
    };
    let exp = resolution_exponent(half);
    format!(
        "{} [{}, {}]",
        fmt_at(e.point, exp),
        fmt_at(ci.lo, exp),
        fmt_at(ci.hi, exp)
    )
}

/// `v` with `digits` significant digits (whole numbers stay whole).
pub(crate) fn fmt_sig(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v == 0.0 { "0".into() } else { v.to_string() };
    }
    let exp = v.abs().log10().floor() as i32 - (digits - 1);
    fmt_at(v, exp)
}

/// A ratio − 1 as a signed percentage with its CI: `−9.1% [−10.0, −8.2]` (U+2212 minus, as in
/// print). One decimal; the CI rarely resolves finer, and never coarser matters here.
pub(crate) fn fmt_ratio_change(e: Estimate) -> String {
    let pct = |r: f64| {
        let s = format!("{:+.1}", (r - 1.0) * 100.0);
        if s == "-0.0" || s == "+0.0" {
            "0.0".to_string()
        } else {
            s.replace('-', "−")
        }
    };
    match e.ci {
        Some(ci) => format!("{}% [{}, {}]", pct(e.point), pct(ci.lo), pct(ci.hi)),
        None => format!("{}% [no CI]", pct(e.point)),
    }
}

// ---------------------------------------------------------------------------------------------
// Time

/// (year, month, day, hour, minute, second) in UTC; a time past what `time` represents (year
/// 9999) shows as the epoch.
fn utc_fields(unix: u64) -> (i32, u8, u8, u8, u8, u8) {
    let t = i64::try_from(unix)
        .ok()
        .and_then(|s| time::OffsetDateTime::from_unix_timestamp(s).ok())
        .unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let (h, mi, s) = t.to_hms();
    (t.year(), u8::from(t.month()), t.day(), h, mi, s)
}

/// `20260321-142501`: sorts chronologically in a directory listing.
pub(crate) fn compact_timestamp(unix: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_fields(unix);
    format!("{y:04}{mo:02}{d:02}-{h:02}{mi:02}{s:02}")
}

pub(crate) fn human_timestamp(unix: u64) -> String {
    let (y, mo, d, h, mi, s) = utc_fields(unix);
    format!("{y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

pub(crate) fn tsc_ghz(khz: u64) -> String {
    if khz == 0 {
        "unknown".into()
    } else {
        format!("{:.2} GHz", khz as f64 / 1e6)
    }
}
