//! `chaos judge DIR`: a recorded run judged again from its evidence and history files
//! ([`crate::judge::replay`]), printed as `chaos run` prints its end, with every scenario
//! whose verdict or numbers came out differently named on stderr. `--write` replaces the
//! report's files with the new judgement (a newer checker re-judging an old run).

use std::path::PathBuf;

use clap::Args;

use super::CommandError;
use crate::judge::replay::{Replay, rejudge};
use crate::run;

/// `chaos judge` arguments.
#[derive(Debug, Args)]
pub struct JudgeArgs {
    /// Report directory written by `chaos run --report DIR` (it holds report.json,
    /// history/ and evidence/).
    pub dir: PathBuf,
    /// Rewrite report.json, report.html and junit.xml with the new judgement (the
    /// evidence and history are left as they are).
    #[arg(long)]
    pub write: bool,
}

/// What `chaos judge` found: the run judged again, and how many scenarios came out
/// differently from the record.
#[derive(Debug)]
pub struct Judgement {
    /// The run judged again.
    pub replay: Replay,
    /// Scenarios judged again whose verdict or numbers differ from the record.
    pub changed: usize,
    /// Scenarios without evidence (their recorded verdict stands).
    pub unjudged: usize,
}

/// Judges `args.dir` again, printing the summary table on stdout and each difference on
/// stderr.
///
/// # Errors
/// [`CommandError::Usage`] when the directory holds no readable run (exit 64), a
/// harness error when the new report cannot be written.
pub fn run(args: &JudgeArgs) -> Result<Judgement, CommandError> {
    let replay = rejudge(&args.dir).map_err(|e| {
        CommandError::usage(format!(
            "{e}; give the directory `chaos run --report DIR` wrote, with its history/ and evidence/"
        ))
    })?;
    let mut changed = 0;
    let mut unjudged = 0;
    for s in &replay.scenarios {
        if s.judged.is_none() {
            unjudged += 1;
            continue;
        }
        let diff = s.differences();
        if !diff.is_empty() {
            changed += 1;
            eprintln!("{}: judged differently from the record:", s.recorded.name);
            for line in diff {
                eprintln!("  {line}");
            }
        }
    }
    crate::outln!("{}", run::table::render(&replay.report));
    let judged = replay.scenarios.len() - unjudged;
    crate::outln!(
        "judged again from {}: {judged} scenario(s), {changed} differ from the record{}",
        args.dir.display(),
        if unjudged > 0 {
            format!("; {unjudged} without evidence keep their recorded verdict")
        } else {
            String::new()
        }
    );
    if args.write {
        crate::report::write_all(&args.dir, &replay.report).map_err(CommandError::harness)?;
    }
    Ok(Judgement {
        replay,
        changed,
        unjudged,
    })
}
