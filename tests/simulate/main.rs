//! The simulator's command (`scripts/simulate`, and a test binary CI
//! runs): the committed corpus of seeds that once failed, then fresh
//! seeds for a time budget, on every core. A failing seed is shrunk to the
//! shortest fault list that still fails and printed as a replay command.
//!
//! ```text
//! scripts/simulate [--seeds N] [--seed S] [--from S] [--budget-s T]
//!                  [--faults LIST] [--jobs J] [--no-corpus] [--verbose] [--trace]
//! ```
//! With no flag (as `cargo test` runs it): the corpus, then fresh seeds
//! for `SIMULATE_BUDGET_S` seconds (default 0: none; `scripts/simulate`
//! sets 60). `--seed S` runs one
//! seed (with `--faults cut@120,seek@300` its workload with those faults
//! instead of its own; with `--trace` the broker's events too). The last line is
//! `simulation: N seeds, F faults, V violations`; the exit code is 1 on a
//! violation.

// The budget is wall-clock time (each seed runs on its own paused runtime).
#![allow(clippy::disallowed_methods)]

use std::path::Path;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pulsar_wire::testing::{Fault, Report, Simulation};

/// Seeds that once failed, one per line (`SEED` or `SEED FAULTS`).
const CORPUS: &str = "tests/simulate/corpus.txt";

#[derive(Debug, Default)]
struct Args {
    seeds: Option<u64>,
    seed: Option<u64>,
    from: Option<u64>,
    budget: Option<Duration>,
    faults: Option<Vec<Fault>>,
    jobs: Option<usize>,
    no_corpus: bool,
    verbose: bool,
    trace: bool,
}

fn parse() -> Result<Args, String> {
    let mut args = Args::default();
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        let mut value = |name: &str| it.next().ok_or(format!("{name} needs a value"));
        let number = |name: &str, v: String| {
            v.parse::<u64>()
                .map_err(|_| format!("{name} {v:?} is not a number"))
        };
        match arg.as_str() {
            "--seeds" => args.seeds = Some(number("--seeds", value("--seeds")?)?),
            "--seed" => args.seed = Some(number("--seed", value("--seed")?)?),
            "--from" => args.from = Some(number("--from", value("--from")?)?),
            "--budget-s" => {
                args.budget = Some(Duration::from_secs(number(
                    "--budget-s",
                    value("--budget-s")?,
                )?));
            }
            "--jobs" => args.jobs = Some(number("--jobs", value("--jobs")?)? as usize),
            "--faults" => args.faults = Some(faults(&value("--faults")?)?),
            "--no-corpus" => args.no_corpus = true,
            "--verbose" => args.verbose = true,
            "--trace" => args.trace = true,
            // What `cargo test` passes to every test binary.
            "--nocapture" | "--quiet" | "-q" | "--ignored" | "--include-ignored" | "--exact" => {}
            other if other.starts_with("--") => return Err(format!("unknown flag {other}")),
            // A test-name filter meant for other binaries.
            _ => {}
        }
    }
    Ok(args)
}

fn faults(list: &str) -> Result<Vec<Fault>, String> {
    list.split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| s.trim().parse().map_err(|e| format!("{e}")))
        .collect()
}

/// The corpus: seeds with the fault lists they failed with.
fn corpus() -> Vec<(u64, Option<Vec<Fault>>)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(CORPUS);
    let text = std::fs::read_to_string(&path).unwrap_or_default();
    text.lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter(|l| !l.is_empty())
        .map(|l| {
            let (seed, rest) = l.split_once(' ').unwrap_or((l, ""));
            let seed = seed
                .parse()
                .unwrap_or_else(|_| panic!("{CORPUS}: {seed:?} is not a seed"));
            let faults = (!rest.trim().is_empty())
                .then(|| faults(rest.trim()).unwrap_or_else(|e| panic!("{CORPUS}: {e}")));
            (seed, faults)
        })
        .collect()
}

/// What all the runs found.
#[derive(Default)]
struct Tally {
    seeds: AtomicU64,
    faults: AtomicU64,
    failed: Mutex<Vec<Report>>,
}

impl Tally {
    fn add(&self, report: Report, verbose: bool) {
        self.seeds.fetch_add(1, Ordering::Relaxed);
        self.faults
            .fetch_add(report.fired as u64, Ordering::Relaxed);
        if verbose {
            eprint!("{report}");
        }
        if !report.passed() {
            self.failed.lock().unwrap().push(report);
        }
    }
}

fn main() {
    let args = match parse() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("simulate: {e}");
            std::process::exit(2);
        }
    };
    start_watchdog();
    let tally = Arc::new(Tally::default());
    let started = Instant::now();

    if let Some(seed) = args.seed {
        let mut sim = Simulation::new(seed);
        if let Some(faults) = args.faults.clone() {
            sim = sim.with_faults(faults);
        }
        if args.trace {
            sim = sim.traced();
            // The client's own log too, as RUST_LOG asks.
            tracing_subscriber::fmt()
                .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
                .with_writer(std::io::stderr)
                .without_time()
                .with_ansi(false)
                .init();
        }
        let report = sim.run();
        for line in &report.trace {
            eprintln!("  {line}");
        }
        eprint!("{report}");
        tally.add(report, false);
    } else {
        if !args.no_corpus {
            let corpus = corpus();
            println!("simulation: the corpus, {} seeds ({CORPUS})", corpus.len());
            run_all(
                &args,
                &tally,
                corpus
                    .into_iter()
                    .map(|(s, f)| {
                        let sim = Simulation::new(s);
                        match f {
                            Some(f) => sim.with_faults(f),
                            None => sim,
                        }
                    })
                    .collect(),
            );
        }
        let from = args.from.unwrap_or_else(|| {
            std::time::UNIX_EPOCH
                .elapsed()
                .map_or(1, |d| d.as_nanos() as u64 % 1_000_000_000)
        });
        let budget = args.budget.unwrap_or_else(|| {
            let seconds = std::env::var("SIMULATE_BUDGET_S")
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            Duration::from_secs(seconds)
        });
        match args.seeds {
            Some(n) => println!("simulation: {n} fresh seeds from {from}"),
            None if budget.is_zero() => {
                println!(
                    "simulation: no fresh seeds (SIMULATE_BUDGET_S or --budget-s asks for some)"
                );
            }
            None => println!("simulation: fresh seeds from {from} for {budget:?}"),
        }
        if args.seeds.is_some() || !budget.is_zero() {
            run_fresh(&args, &tally, from, budget);
        }
    }

    let failed = std::mem::take(&mut *tally.failed.lock().unwrap());
    println!(
        "simulation: {} seeds run in {:.1} s, {} failed; shrinking those",
        tally.seeds.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64(),
        failed.len()
    );
    for report in &failed {
        eprint!("FAILED {report}");
        let shortest = if args.seed.is_some() && args.faults.is_some() {
            Some(report.clone())
        } else {
            Simulation::new(report.seed)
                .with_faults(report.faults.clone())
                .shrink()
        };
        match shortest {
            Some(short) => eprintln!("  replay (shortest fault list): {}", short.replay_command()),
            None => eprintln!(
                "  passed when run again: the run is not deterministic; replay: {}",
                report.replay_command()
            ),
        }
    }
    let violations: usize = failed.iter().map(|r| r.violations.len()).sum();
    println!(
        "simulation: {} seeds, {} faults, {violations} violations ({:.1} s)",
        tally.seeds.load(Ordering::Relaxed),
        tally.faults.load(Ordering::Relaxed),
        started.elapsed().as_secs_f64()
    );
    if violations > 0 {
        std::process::exit(1);
    }
}

/// Wall time a seed may take; more is a run that spins without moving
/// virtual time on (a livelock), which no virtual-time bound can catch.
const WALL_BOUND: Duration = Duration::from_secs(300);

/// The seeds running now, with when each started; `CHANGED` tells the
/// watchdog when one starts or ends.
static RUNNING: Mutex<Vec<(u64, Instant)>> = Mutex::new(Vec::new());
static CHANGED: std::sync::Condvar = std::sync::Condvar::new();

/// Runs `sim` (of `seed`) while the watchdog looks on.
fn watched(seed: u64, sim: &Simulation) -> Report {
    let started = Instant::now();
    RUNNING.lock().unwrap().push((seed, started));
    CHANGED.notify_all();
    let report = sim.run();
    RUNNING.lock().unwrap().retain(|r| *r != (seed, started));
    CHANGED.notify_all();
    report
}

/// Ends the process with the seed's replay command if a seed runs past
/// [`WALL_BOUND`]: its runtime cannot be stopped from outside. It waits
/// for the oldest running seed's deadline, or for a seed to start or end.
fn start_watchdog() {
    std::thread::spawn(|| {
        let mut running = RUNNING.lock().unwrap();
        loop {
            let oldest = running.iter().min_by_key(|(_, started)| *started).copied();
            let Some((seed, started)) = oldest else {
                running = CHANGED.wait(running).unwrap();
                continue;
            };
            let left = WALL_BOUND.saturating_sub(started.elapsed());
            if left.is_zero() {
                println!(
                    "FAILED seed {seed}: still running after {WALL_BOUND:?} of wall time (it spins without moving virtual time on)"
                );
                println!("  replay: scripts/simulate --seed {seed}");
                println!("simulation: stopped, 1 violation");
                std::process::exit(1);
            }
            running = CHANGED.wait_timeout(running, left).unwrap().0;
        }
    });
}

fn jobs(args: &Args) -> usize {
    args.jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, std::num::NonZero::get))
}

/// Runs `sims` on every core.
fn run_all(args: &Args, tally: &Arc<Tally>, sims: Vec<Simulation>) {
    let sims = Arc::new(Mutex::new(sims));
    let threads: Vec<_> = (0..jobs(args))
        .map(|_| {
            let (sims, tally, verbose) = (sims.clone(), tally.clone(), args.verbose);
            std::thread::spawn(move || {
                loop {
                    let Some(sim) = sims.lock().unwrap().pop() else {
                        return;
                    };
                    tally.add(watched(sim.seed(), &sim), verbose);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a simulation thread");
    }
}

/// Runs seeds `from`, `from + 1`, ... on every core until `--seeds` are
/// done or the budget is spent.
fn run_fresh(args: &Args, tally: &Arc<Tally>, from: u64, budget: Duration) {
    let next = Arc::new(AtomicU64::new(from));
    let done = Arc::new(AtomicUsize::new(0));
    let end = Instant::now() + budget;
    let limit = args.seeds.map(|n| from + n);
    let threads: Vec<_> = (0..jobs(args))
        .map(|_| {
            let (next, tally, done, verbose) =
                (next.clone(), tally.clone(), done.clone(), args.verbose);
            std::thread::spawn(move || {
                loop {
                    if limit.is_none() && Instant::now() >= end {
                        return;
                    }
                    let seed = next.fetch_add(1, Ordering::Relaxed);
                    if limit.is_some_and(|l| seed >= l) {
                        return;
                    }
                    tally.add(watched(seed, &Simulation::new(seed)), verbose);
                    done.fetch_add(1, Ordering::Relaxed);
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a simulation thread");
    }
}
