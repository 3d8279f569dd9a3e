"""Repeated-seed experiments and tables in the paper's layout.

    python -m cet_experiments synthetic --mode reference --runs 10 --out DIR

trains every model on the same dataset once per seed, evaluates on the test split and
writes ``DIR/metrics.json``, ``DIR/table.md`` and the paper's figures (mean +- std over runs,
plus the average over tasks). The models are the presets of :mod:`cet_model.evaluation`
(``CET`` is the product default; ``CET-paper`` the original code's objective; ``ET``, ``BC``
and ``Oracle`` the baselines), fitted with :func:`cet_model.presets.fit_preset` and scored
with :func:`cet_model.evaluation.evaluate` -- the same calls the production flow makes.
"""

from __future__ import annotations

import logging
import sys

import torch

from cet_model.atomic import claim_files
from cet_model.dataset import load_dataset
from cet_model.presets import PRESET_OF_ESTIMATOR, PRESETS
from flows.lib.experiment.records import DATA_FILES, data_fingerprint, resolved_params  # noqa: F401  (re-exported)
from flows.lib.experiment.report import REPORT_FILES, is_report_folder, write_figures, write_report  # noqa: F401
from flows.lib.experiment.runner import run
from flows.lib.experiment.search import overrides_from, random_search
from flows.lib.experiment.tables import table_markdown
from flows.lib.standin import synthetic

from .cli import experiments_parser, quiet_library

log = logging.getLogger("cet_experiments")


def parse_model_runs(text: str, models) -> dict:
    """``"CET-exact=3,CET-ARM=3"`` -> {"CET-exact": 3, "CET-ARM": 3}, keeping the names in ``models``."""
    out = {}
    for item in filter(None, (x.strip() for x in text.split(","))):
        name, sep, n = item.partition("=")
        if not sep or not n.strip().isdigit():
            raise SystemExit(f"--model-runs: expected MODEL=N, got {item!r}")
        if name.strip() not in PRESETS:
            raise SystemExit(f"--model-runs: unknown model {name.strip()!r}; choose from {sorted(PRESETS)}")
        if name.strip() in models:
            out[name.strip()] = int(n)
    return out


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else list(argv)
    args = experiments_parser().parse_args(argv)
    quiet_library()
    if args.command == "goal":
        from .goal import goal_from_folder

        try:
            print(goal_from_folder(args.report, model=args.model, oracle=args.oracle,
                                   baselines=tuple(b.strip() for b in args.baselines.split(",") if b.strip())))
        except ValueError as err:
            raise SystemExit(str(err)) from None
        return 0
    if args.command == "merge":
        from .merge import merge_folders

        try:
            merged = merge_folders(args.parts, args.out, args.title,
                                   [m.strip() for m in args.drop_first.split(",") if m.strip()])
        except (ValueError, FileExistsError) as err:
            raise SystemExit(str(err)) from None
        runs = ", ".join(f"{m} {n}" for m, n in merged["config"]["model_runs"].items())
        print(f"{args.out}: merged {len(args.parts)} reports ({runs} runs)")
        return 0
    if args.command == "summary":
        from .summary import update_results_block

        changed = update_results_block(args.doc, args.results)
        print(f"{args.doc}: results block {'rewritten' if changed else 'already current'}")
        return 0
    try:  # before hours of fits: a report goes only where it replaces nothing of the user's
        claim_files(args.out, REPORT_FILES, legacy=is_report_folder, what="report folder (--out)", record=False)
    except FileExistsError as err:
        raise SystemExit(str(err)) from None
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.command == "synthetic":
        data = args.data
        if data is None:
            n_tr, n_va = int(0.6 * args.n), int(0.2 * args.n)
            data = synthetic.write(args.out / "data", mode=args.mode, n=args.n,
                                   split_sizes=(n_tr, n_va, args.n - n_tr - n_va))
        title = f"Synthetic data ({args.mode} mode, n = {args.n:,}): Table 3"
    else:
        data, title = args.data, f"Dataset {args.data.name}"
    try:
        ds = load_dataset(data)
    except (OSError, ValueError) as err:
        raise SystemExit(f"--data {data}: {err}") from None
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    hidden, overrides, search = (args.hidden,), None, None
    if args.search:
        search = random_search(ds, args.search, seed=args.first_seed, max_epochs=args.search_epochs or args.max_epochs,
                               patience=args.patience)
        hidden, overrides = overrides_from(search["best"])
    chosen = (overrides or {}).get("CET-paper", {}).get("estimator", "gumbel")  # the paper's recipe: Gumbel
    if "CET-paper" in models and PRESET_OF_ESTIMATOR[chosen] in models:  # the same fits as the CET-paper row
        models = tuple(m for m in models if m != PRESET_OF_ESTIMATOR[chosen])
        print(f"CET-paper uses the {chosen} estimator: {PRESET_OF_ESTIMATOR[chosen]} is the CET-paper row", flush=True)
    settings = dict(hidden_sizes=hidden, max_epochs=args.max_epochs, patience=args.patience, overrides=overrides,
                    reference=args.reference)
    model_runs = {m: parse_model_runs(args.model_runs, models).get(m, args.runs) for m in models}
    jobs = min(max(1, args.jobs), args.runs)
    if jobs == 1:
        result = run(ds, args.runs, models, first_seed=args.first_seed, model_runs=model_runs, **settings)
    else:
        result = runs_side_by_side(data, args.runs, models, model_runs, args.first_seed, jobs, args.threads or 1,
                                   settings)
    if search is not None:
        result["search"] = search
    result["command"] = "python -m cet_experiments " + " ".join(argv)
    write_report(result, args.out, title)
    print(table_markdown(result, title))
    return 0


def seed_blocks(runs: int, jobs: int) -> list[tuple[int, int]]:
    """``runs`` seed offsets cut into ``jobs`` blocks of consecutive seeds, (start, end) each.

    >>> seed_blocks(10, 2), seed_blocks(5, 2), seed_blocks(3, 3)
    ([(0, 5), (5, 10)], [(0, 3), (3, 5)], [(0, 1), (1, 2), (2, 3)])
    """
    bounds = [round(i * runs / jobs + 1e-9) for i in range(jobs + 1)]
    return [(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True) if b > a]


def run_block(data, models, model_runs: dict, first_seed: int, start: int, end: int, threads: int,
              settings: dict) -> dict:
    """The runs of seeds ``first_seed + start`` to ``first_seed + end - 1``, in this process with
    ``threads`` torch threads; a model with fewer runs (``model_runs``) runs its first seeds only. The
    Cox reference, which has no seed, is fitted in the first block."""
    quiet_library()
    torch.set_num_threads(threads)
    block = {m: min(model_runs[m], end) - start for m in models if model_runs[m] > start}
    changes = {} if start == 0 else {"reference": "none"}
    return run(load_dataset(data), end - start, tuple(block), first_seed=first_seed + start, model_runs=block,
               progress=True, **(settings | changes))


def runs_side_by_side(data, runs: int, models, model_runs: dict, first_seed: int, jobs: int, threads: int,
                      settings: dict) -> dict:
    """``run``'s result, its seeds run in ``jobs`` processes in blocks (``seed_blocks``), merged in
    seed order (``cet_experiments.merge.merge_results``): the figures one process gives."""
    from flows.lib.infra.workers import stop

    from .merge import merge_results
    from .processes import completed, pool

    blocks = seed_blocks(runs, jobs)
    print(f"{runs} runs in {len(blocks)} processes of {threads} thread(s) each: seeds "
          + ", ".join(f"{first_seed + a}-{first_seed + b - 1}" for a, b in blocks), flush=True)
    workers = pool(len(blocks))
    try:
        futures = [workers.submit(run_block, data, models, model_runs, first_seed, a, b, threads, settings)
                   for a, b in blocks]
        for done in completed(futures):
            done.result()  # a block that failed: the others stop now
        parts = [f.result() for f in futures]
    except BaseException:  # Ctrl-C or an error: no block goes on running
        stop(workers)
        raise
    workers.shutdown(wait=True)
    merged = merge_results(parts, [f"seeds {first_seed + a}-{first_seed + b - 1}" for a, b in blocks])
    merged.pop("parts")  # one command: its blocks are no parts of the record
    first = parts[0]
    merged["figures"]["maps"] = (first.get("figures") or {}).get("maps")
    merged["skipped"] = first.get("skipped", {})
    return merged


if __name__ == "__main__":
    raise SystemExit(main())
