"""Context biasing on names and terms the bundled models never heard (docs/biasing.md, "Evaluation").

Stages (each skipped when its output exists; outputs under ``--out``, default exp/biasing):

    python recipes/biasing_corpus.py all --out data/biasing       # the test set (made once)
    python recipes/biasing_eval.py lm                              # order-4 LM of the models' training text
    python recipes/biasing_eval.py dev                             # the weight sweep on the dev split
    python recipes/biasing_eval.py test                            # the chosen weights on the test split
    python recipes/biasing_eval.py table                           # the markdown table of the test runs

Every run boosts its split's phrase list (its key phrases and 600 distractors, ``<split>_phrases.txt``); the
``+own`` rows boost each utterance by its own key phrases only (the manifest's ``boost_phrases``, per-utterance
lists in one batch). Greedy label-looping and ALSD++ beam 4, without and with the LM. The weights of each row are
chosen on dev (:func:`chosen_weights`); nothing is tuned on test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from transdec import load_model
from transdec.biasing import Boost, BoostingTree, read_phrase_file, tokenize_phrases
from transdec.biasing.items import BoostOptions
from transdec.decoding import DecodingConfig, Fusion
from transdec.evaluate import config_label, evaluate_manifest
from transdec.lm import NGramLM
from transdec.metrics import key_phrase_scores, key_phrase_word_errors, word_errors

BOOST_WEIGHTS = (1.0, 2.0, 3.0, 4.0, 6.0)
LM_WEIGHTS = (0.3, 0.6)
STRATEGIES = {"greedy": DecodingConfig("greedy_label"), "beam4": DecodingConfig("beam_alsd_pp", beam_size=4)}


def run(model, manifest: Path, configs: dict[str, DecodingConfig], out: Path, item_boost: BoostOptions | None = None):
    """Evaluate ``configs`` (named) on ``manifest``; predictions and a summary per name under ``out``."""
    names = {config_label(config): name for name, config in configs.items()}
    evaluate_manifest(model, manifest, list(configs.values()), batch_size=16, normalizer_name="none",
                      output_dir=out, item_boost=item_boost)
    for label, name in names.items():
        (out / f"predictions_{label}.jsonl").rename(out / f"{name}.jsonl")


def scores(predictions: Path, phrase_list: list[str]) -> dict[str, float]:
    """WER, key-phrase precision / recall / F (against the whole boosting list) and the WER of the other words."""
    rows = [json.loads(line) for line in predictions.read_text().splitlines()]
    refs, hyps = [r["text"] for r in rows], [r["pred_text"] for r in rows]
    keys = key_phrase_scores(refs, hyps, phrase_list)
    split = key_phrase_word_errors(refs, hyps, [phrase_list] * len(rows))
    return {"wer": 100 * word_errors(refs, hyps).wer, "precision": keys.precision, "recall": keys.recall,
            "fscore": keys.fscore, "other_wer": 100 * split.other_words.wer}


def configs_for(model, tree: BoostingTree, lm: NGramLM, boost_weights, lm_weights) -> dict[str, DecodingConfig]:
    """Every strategy without and with the LM (each weight), without and with boosting (each weight)."""
    configs = {}
    for strategy, base in STRATEGIES.items():
        for lm_weight in (0.0, *lm_weights):
            lm_fusions = (Fusion(lm, lm_weight),) if lm_weight else ()
            lm_name = f"+lm{lm_weight:g}" if lm_weight else ""
            for boost_weight in (0.0, *boost_weights):
                fusions = lm_fusions + ((Boost(tree, boost_weight),) if boost_weight else ())
                name = strategy + lm_name + (f"+boost{boost_weight:g}" if boost_weight else "")
                configs[name] = DecodingConfig(base.strategy, base.options, fusions=fusions)
    return configs


def phrase_tree(model, path: Path) -> tuple[BoostingTree, list[str]]:
    phrases = read_phrase_file(path)
    tree = BoostingTree.build([tokenize_phrases(phrases, model.tokenizer)], model.head.num_tokens)
    return tree, [p.text for p in phrases]


def evaluate_split(args, split: str, choose: dict[str, tuple[float, float]] | None) -> None:
    out = args.out / split
    if (out / "scores.json").exists():
        print(f"{out}/scores.json exists")
        return
    out.mkdir(parents=True, exist_ok=True)
    model = load_model(args.model)
    lm = NGramLM.load(args.out / "lm.pt", model.head.num_tokens)
    tree, phrase_list = phrase_tree(model, args.data / f"{split}_phrases.txt")
    manifest = args.data / f"{split}.jsonl"
    if choose is None:  # dev: the whole grid
        configs = configs_for(model, tree, lm, BOOST_WEIGHTS, LM_WEIGHTS)
    else:  # test: each row at its dev-chosen weights
        configs = {}
        for strategy, base in STRATEGIES.items():
            for with_lm in (False, True):
                lm_weight, boost_weight = choose[f"{strategy}{'+lm' if with_lm else ''}"]
                lm_fusions = (Fusion(lm, lm_weight),) if with_lm else ()
                name = strategy + (f"+lm{lm_weight:g}" if with_lm else "")
                configs[name] = DecodingConfig(base.strategy, base.options, fusions=lm_fusions)
                configs[f"{name}+boost{boost_weight:g}"] = DecodingConfig(
                    base.strategy, base.options, fusions=lm_fusions + (Boost(tree, boost_weight),))
    run(model, manifest, configs, out)
    results = {name: scores(out / f"{name}.jsonl", phrase_list) for name in configs}
    if choose is not None:  # each utterance boosted by its own key phrases only, at the list's weights
        own_dir = out / "own"
        own_dir.mkdir(exist_ok=True)
        for strategy, base in STRATEGIES.items():
            lm_weight, boost_weight = choose[f"{strategy}+lm"]
            name = f"{strategy}+lm{lm_weight:g}+own{boost_weight:g}"
            run(model, manifest, {name: DecodingConfig(base.strategy, base.options, fusions=(Fusion(lm, lm_weight),))},
                own_dir, item_boost=BoostOptions(boost_weight))
            results[name] = scores(own_dir / f"{name}.jsonl", phrase_list)
    (out / "scores.json").write_text(json.dumps(results, indent=1))
    print(format_table(results))


def chosen_weights(dev_scores: dict[str, dict[str, float]]) -> dict[str, tuple[float, float]]:
    """Per strategy, without and with the LM: ``(LM weight, boost weight)`` chosen on dev. The LM weight is the one
    of the best WER without boosting; the boost weight the best key-phrase F-score among those whose WER on the other
    words stays within 5% (relative) of no boosting (the smallest weight if none does)."""
    choice = {}
    for strategy in STRATEGIES:
        for with_lm in (False, True):
            rows = {name: row for name, row in dev_scores.items()
                    if name.split("+")[0] == strategy and ("+lm" in name) == with_lm}
            base = min((row["wer"], name) for name, row in rows.items() if "+boost" not in name)[1]
            lm_weight = float(base.split("+lm")[1]) if with_lm else 0.0
            boosted = {name: row for name, row in rows.items() if name.startswith(base + "+boost")}
            allowed = {name: row for name, row in boosted.items()
                       if row["other_wer"] <= 1.05 * rows[base]["other_wer"]}
            if allowed:
                name = max((row["fscore"], -row["wer"], name) for name, row in allowed.items())[2]
            else:
                name = min(boosted, key=lambda n: float(n.split("+boost")[1]))
            choice[f"{strategy}{'+lm' if with_lm else ''}"] = (lm_weight, float(name.split("+boost")[1]))
    return choice


def format_table(results: dict[str, dict[str, float]]) -> str:
    lines = ["| decoding | WER % | other-word WER % | key-phrase precision | recall | F |", "|---|---|---|---|---|---|"]
    for name, row in results.items():
        lines.append(f"| {name} | {row['wer']:.2f} | {row['other_wer']:.2f} | {row['precision']:.3f} | "
                     f"{row['recall']:.3f} | {row['fscore']:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage", choices=["lm", "dev", "test", "table"])
    parser.add_argument("--model", default="tiny-en-rnnt")
    parser.add_argument("--data", type=Path, default=Path("data/biasing"))
    parser.add_argument("--synth", type=Path, default=Path("data/synth"), help="the training corpus' plans")
    parser.add_argument("--out", type=Path, default=Path("exp/biasing"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.stage == "lm":
        if not (args.out / "lm.pt").exists():
            text = args.out / "train_text.txt"
            here = Path(__file__).parent
            subprocess.run([sys.executable, here / "lm_domain_eval.py", "training-text", "--synth", args.synth,
                            "-o", text], check=True)
            subprocess.run(["transdec", "lm", "build", "--text", text, "--model", args.model, "--order", "4",
                            "-o", args.out / "lm.arpa", "--compile", args.out / "lm.pt"], check=True)
    elif args.stage == "dev":
        evaluate_split(args, "dev", None)
    elif args.stage == "test":
        dev = json.loads((args.out / "dev" / "scores.json").read_text())
        choice = chosen_weights(dev)
        print("chosen on dev (LM weight, boost weight):", choice)
        (args.out / "chosen.json").write_text(json.dumps(choice))
        evaluate_split(args, "test", choice)
    else:
        print(format_table(json.loads((args.out / "test" / "scores.json").read_text())))


if __name__ == "__main__":
    main()
