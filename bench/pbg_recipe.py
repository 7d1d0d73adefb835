#!/usr/bin/python3
"""PyTorch-BigGraph's side of bench/pbg_parity.sh: trains PBG's FB15k recipe
(torchbiggraph/examples/configs/fb15k_config_cpu.py, the recipe of
config/wn18rr.toml and config/fb15k237.toml) on one graph's TSV splits, keeps a
snapshot of every epoch, and prints the filtered test MRR after the epochs
asked for, one line each:

    epoch K: filtered test MRR X, Hits@1 Y, Hits@10 Z

    pbg_recipe.py DATA WORK --epochs 1,2,3,5,10 [--seed S] [--workers N]

DATA holds train.tsv, valid.tsv and test.tsv (head<TAB>relation<TAB>tail);
WORK is emptied and receives PBG's import, checkpoints and log. PBG has no
seed of its own: the main process's torch seed (initial embeddings) is S, and
PBG seeds each HOGWILD worker from its process id, so runs differ as PBG's do.
Needs Debian's python3-torch and PBG installed over it (bench/pbg_parity.sh
says how).
"""
import argparse
import shutil
import sys
import time
from pathlib import Path

import attr
import torch
from torchbiggraph.config import parse_config
from torchbiggraph.converters.importers import TSVEdgelistReader, convert_input_data
from torchbiggraph.eval import do_eval_and_report_stats
from torchbiggraph.filtered_eval import FilteredRankingEvaluator
from torchbiggraph.train import train
from torchbiggraph.util import SubprocessInitializer, set_logging_verbosity, setup_logging


def recipe(work: Path, epochs: int, workers: int) -> dict:
    # PBG's fb15k_config_cpu.py, with this run's paths and epoch count
    return dict(
        entity_path=str(work / "data"),
        edge_paths=[str(work / "data" / s) for s in ("train", "valid", "test")],
        checkpoint_path=str(work / "model"),
        entities={"all": {"num_partitions": 1}},
        relations=[{"name": "all_edges", "lhs": "all", "rhs": "all", "operator": "complex_diagonal"}],
        dynamic_relations=True,
        dimension=400,
        global_emb=False,
        comparator="dot",
        num_epochs=epochs,
        num_uniform_negs=1000,
        loss_fn="softmax",
        lr=0.1,
        regularization_coef=1e-3,
        eval_fraction=0,
        workers=workers,
        checkpoint_preservation_interval=1,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data", type=Path)
    parser.add_argument("work", type=Path)
    parser.add_argument("--epochs", default="1,2,3,5,10", help="epochs after which to evaluate")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    report = sorted({int(e) for e in args.epochs.split(",")})
    if not report or report[0] < 1:
        print(f"pbg_recipe: --epochs takes positive epoch numbers, not '{args.epochs}'", file=sys.stderr)
        return 2
    splits = [args.data / f"{s}.tsv" for s in ("train", "valid", "test")]
    for path in splits:
        if not path.is_file():
            print(f"pbg_recipe: {path} not found (DATA must hold train.tsv, valid.tsv, test.tsv)", file=sys.stderr)
            return 2

    setup_logging()
    torch.manual_seed(args.seed)
    shutil.rmtree(args.work, ignore_errors=True)
    args.work.mkdir(parents=True)
    config = parse_config(recipe(args.work.resolve(), report[-1], args.workers))
    set_logging_verbosity(config.verbose)
    subprocess_init = SubprocessInitializer()
    subprocess_init.register(setup_logging, config.verbose)
    train_path, valid_path, test_path = config.edge_paths
    convert_input_data(config.entities, config.relations, config.entity_path, config.edge_paths,
                       splits, TSVEdgelistReader(lhs_col=0, rhs_col=2, rel_col=1),
                       dynamic_relations=config.dynamic_relations)

    tic = time.perf_counter()
    train(attr.evolve(config, edge_paths=[train_path]), subprocess_init=subprocess_init)
    print(f"trained {report[-1]} epochs in {time.perf_counter() - tic:.1f} s", flush=True)

    # as PBG's examples/fb15k.py evaluates: every entity a candidate, filtered by all splits
    relations = [attr.evolve(r, all_negs=True) for r in config.relations]
    for epoch in report:
        snapshot = args.work / "model" / f"epoch_{epoch}"
        if not snapshot.is_dir():
            print(f"pbg_recipe: no snapshot {snapshot} (PBG's checkpoint_preservation_interval)", file=sys.stderr)
            return 1
        eval_config = attr.evolve(config, edge_paths=[test_path], relations=relations, num_uniform_negs=0,
                                  checkpoint_path=str(snapshot))
        evaluator = FilteredRankingEvaluator(eval_config, [test_path, valid_path, train_path])
        stats = None
        for _, _, stats in do_eval_and_report_stats(eval_config, evaluator=evaluator,
                                                    subprocess_init=subprocess_init):
            pass
        m = stats.metrics
        print(f"epoch {epoch}: filtered test MRR {m['mrr']:.4f}, Hits@1 {m['r1']:.4f}, Hits@10 {m['r10']:.4f}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
