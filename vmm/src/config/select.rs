//! `--only GLOB`: the rows of a plan whose full names match, as the JSON and warnings name them
//! (`quick/pvop-skip/n0/none/1v`). `*` matches any run of characters, `/` included, and `?`
//! one character; everything else stands for itself. Each group still runs its `empty`
//! baseline, which the measuring adds to every group; a comparison with a row left out is
//! not made.

use crate::config::plan::Plan;

/// How many row names a glob that matched nothing lists.
const SHOWN: usize = 8;

/// A glob that selects no row.
#[derive(Debug, thiserror::Error)]
#[error(
    "--only {glob}: matches no row of `{plan}` (a glob matches the whole name: `*pvop-*` is a \
     strategy in every group); its rows are {}{}",
    shown.join(", "),
    more_text(*more)
)]
pub struct SelectError {
    pub glob: String,
    pub plan: String,
    pub shown: Vec<String>,
    pub more: usize,
}

fn more_text(more: usize) -> String {
    if more == 0 {
        String::new()
    } else {
        format!(" and {more} more (`*` matches `/` too: 'NAME/*')")
    }
}

/// Keeps the rows of `plan` that some glob matches; every glob must match a row.
pub fn only(plan: &mut Plan, globs: &[String]) -> Result<(), SelectError> {
    if globs.is_empty() {
        return Ok(());
    }
    for glob in globs {
        if !plan.phases.iter().any(|p| matches(glob, &p.name)) {
            let names: Vec<String> = plan.phases.iter().map(|p| p.name.clone()).collect();
            return Err(SelectError {
                glob: crate::text::escape_clipped(glob, 80),
                plan: plan.name.clone(),
                more: names.len().saturating_sub(SHOWN),
                shown: names.into_iter().take(SHOWN).collect(),
            });
        }
    }
    plan.phases
        .retain(|p| globs.iter().any(|g| matches(g, &p.name)));
    Ok(())
}

/// `*` and `?` glob match over characters, iterative with one backtrack point: linear in
/// practice, never exponential (`a*a*a*...b` against a long name).
pub fn matches(glob: &str, name: &str) -> bool {
    let g: Vec<char> = glob.chars().collect();
    let n: Vec<char> = name.chars().collect();
    let (mut gi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        match g.get(gi) {
            Some('*') => {
                star = Some((gi, ni));
                gi += 1;
            }
            Some(c) if *c == '?' || *c == n[ni] => {
                gi += 1;
                ni += 1;
            }
            _ => match star {
                Some((sg, sn)) => {
                    gi = sg + 1;
                    ni = sn + 1;
                    star = Some((sg, sn + 1));
                }
                None => return false,
            },
        }
    }
    g[gi..].iter().all(|c| *c == '*')
}

/// A plan whose largest round, at `run.block_us` per block, is longer than `run.max_seconds`:
/// known once `--only` has chosen the rows, so refused before any VM starts.
#[derive(Debug, thiserror::Error)]
#[error(
    "run.block_us = {block_us}: the largest group ({group}) runs {blocks} blocks a round (its rows \
     and the `empty` baseline), at least {round_s:.3} s, longer than run.max_seconds = \
     {max_seconds}; {instead}"
)]
pub struct RoundTooLong {
    pub block_us: u32,
    pub group: String,
    pub blocks: usize,
    pub round_s: f64,
    pub max_seconds: f64,
    pub instead: String,
}

/// Refuses a plan whose largest round cannot fit its budget (see [`RoundTooLong`]).
pub fn round_fits(plan: &Plan) -> Result<(), RoundTooLong> {
    let Some((blocks, group)) = plan.largest_round() else {
        return Ok(());
    };
    let round_s = blocks as f64 * f64::from(plan.block_us) / 1e6;
    if round_s <= plan.max_seconds {
        return Ok(());
    }
    let most = (plan.max_seconds * 1e6 / blocks as f64).floor() as u64;
    let instead = if most >= 20 {
        format!("valid with this budget: run.block_us 20..={most}")
    } else {
        "no run.block_us fits: raise run.max_seconds or run fewer rows (--only)".into()
    };
    Err(RoundTooLong {
        block_us: plan.block_us,
        group: crate::text::outside(&group).into_owned(),
        blocks,
        round_s,
        max_seconds: plan.max_seconds,
        instead,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_match_whole_names_and_star_crosses_slashes() {
        let name = "quick/pvop-skip/n0/none/1v";
        for yes in [
            "quick/pvop-*",
            "*",
            "quick/*/1v",
            "*pvop-skip*",
            "quick/pvop-s?ip/n0/none/1v",
            name,
        ] {
            assert!(matches(yes, name), "{yes}");
        }
        for no in [
            "quick/pvop",
            "pvop-*",
            "quick/native-*",
            "",
            "quick/pvop-skip/n0/none/1v?",
        ] {
            assert!(!matches(no, name), "{no}");
        }
        assert!(matches("", ""));
        assert!(!matches(&"a*".repeat(30), &"a".repeat(10)));
        assert!(!matches(&format!("{}b", "a*".repeat(30)), &"a".repeat(200)));
    }

    #[test]
    fn a_glob_that_matches_nothing_lists_rows() {
        let mut plan = crate::config::default_plan(&crate::config::Limits::default());
        let e = only(&mut plan, &["quick/nope*".into()])
            .unwrap_err()
            .to_string();
        let long = only(&mut plan.clone(), &["*".repeat(5000)])
            .map(|()| String::new())
            .unwrap_or_else(|e| e.to_string());
        assert!(long.is_empty(), "`*` matches every row: {long}");
        let long = only(&mut plan.clone(), &[format!("{}x", "*".repeat(5000))])
            .unwrap_err()
            .to_string();
        assert!(
            long.len() < 600 && long.contains("…: matches no row"),
            "{long}"
        );
        assert!(
            e.contains("--only quick/nope*: matches no row of `quick`"),
            "{e}"
        );
        assert!(e.contains("quick/native-popf/n0/none/1v"), "{e}");
        only(&mut plan, &["quick/pvop-*".into()]).unwrap();
        let names: Vec<&str> = plan.phases.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["quick/pvop-popf/n0/none/1v", "quick/pvop-skip/n0/none/1v"]
        );
    }
}
