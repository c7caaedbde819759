"""The report of ``reproduce pande``: Tables 1–4 beside the paper's numbers,
Figs. 1–3 of the NMT baseline and of BERT-base fine-tuned on each task, and a
verdict per finding (:data:`~.numbers_pande.PANDE_FINDINGS`).

On stand-in data the values cannot equal the paper's; what can repeat is
each comparison, decided on a 95 % interval (:mod:`.verdicts`): Welch's t
over seeds where both rows have three or more, else a paired bootstrap over
test sentences or dev examples (:mod:`.pande_findings`), or over sentences and
heads for the analyses (:mod:`.pande_analysis`).  Claims of equality are
equivalence tests against the paper's own margins.
"""

from pathlib import Path
from typing import Dict, List, Sequence

from .numbers_pande import PANDE_NMT, PANDE_TABLE4
from .pande import (BERT_HEADS, BERT_LAYERS, BERT_ROWS, BERT_WIDTH, LETTERS, NMT_DECODER_LAYERS, SCALES, TASKS, TITLE,
                    analysed, analysis_dir, bert_analysis, bert_run, ft_dir, nmt_run, predictions_dir, seeds_of, table4_layout)
from .pande_analysis import analysis_findings  # noqa: F401  (P1-P6)
from .pande_findings import Arm, bert_findings, nmt_findings, read_bleu_units  # noqa: F401  (P7-P17)
from .plan import Plan
from .report import Values, collect, glue_metric, paper_value, read_json, table

ROW_NAMES = dict(zip(("roberta_local_base", "roberta_band2", "roberta_band6", "roberta_band6_all_tied",
                      "roberta_band6_132_tied", "roberta_band6_120_tied"), PANDE_TABLE4["rows"]))


def mask_sparsity(arch: str, n: int = 128) -> float:
    """Mean over the arch's heads of 1 − |M|/n² at length n (global heads: 0)."""
    from fairseq_local.attention.layout import parse_layout
    from fairseq_local.attention.masks.measure import sparsity
    from fairseq_local.models.archs import get_config

    layout = get_config(arch).layout
    if not layout:  # BERT-base: every head global
        return 0.0
    heads = [h for layer in parse_layout(layout) for h in layer.heads]
    return sum(sparsity(h.mask, n) for h in heads) / len(heads)


def _seeds(seeds: Sequence[int]) -> str:
    return ", ".join(map(str, seeds)) if seeds else "-"


def nmt_table(bleu: Dict[str, Values], weights: Dict[str, int], seeds: Dict[str, Sequence[int]]) -> str:
    """Tables 1–3 in one: every configuration, its seeds, weights and BLEU beside the paper's."""
    a = bleu.get("a", Values(()))
    rows = []
    for letter, cfg in PANDE_NMT["configs"].items():
        v = bleu.get(letter, Values(()))
        delta = f"{v.mean - a.mean:+.2f}" if v.values and a.values else "-"
        pa = PANDE_NMT["configs"]["a"]
        tab = next(t for t, xs in PANDE_NMT["tables"].items() if letter in xs and (letter != "a" or t == "table1"))
        rows.append([f"({letter}) {cfg['name']}", tab.replace("table", ""), _seeds(seeds.get(letter, ())),
                     f"{weights[letter]:,}" if weights.get(letter) else "-", f"{cfg['attn_weights']:,}", v.cell(),
                     delta, paper_value(cfg["en_de"]), f"{cfg['en_de'] - pa['en_de']:+.2f}", paper_value(cfg["en_ru"]),
                     f"{cfg['en_ru'] - pa['en_ru']:+.2f}"])
    return table(["config", "table", "seeds (here)", "attn weights (here)", "attn weights (paper)", "BLEU (here)",
                  "Δ (a) here", "En-De paper", "Δ (a) En-De", "En-Ru paper", "Δ (a) En-Ru"], rows)


def bert_table(scores: Dict[str, Dict[str, Values]], weights: Dict[str, int], tasks: Sequence[str], n: int,
               seeds: Dict[str, Sequence[int]]) -> str:
    """Table 4 with a sparsity column: each task here (mean ± sd over seeds) and in the paper."""
    rows = []
    for arch, name in ROW_NAMES.items():
        paper = dict(zip(PANDE_TABLE4["columns"], PANDE_TABLE4["rows"][name]["scores"]))
        row = [name, _seeds(seeds.get(arch, ())), f"{weights[arch]:,}" if weights.get(arch) else "-",
               f"{100 * mask_sparsity(arch, n):.1f}"]
        for t in tasks:
            row += [scores.get(arch, {}).get(t, Values(())).cell(1), paper_value(paper.get(t), 2)]
        rows.append(row)
    cols = ["configuration", "seeds (here)", "attn weights (here)", f"sparsity % (n={n})"]
    for t in tasks:
        cols += [f"{t} here", f"{t} paper"]
    return table(cols, rows)


def layouts_note() -> str:
    """How the reduced scales scale Table 4's 12 x 12 layouts down."""
    shown = "; ".join(f"{ROW_NAMES[a]} `{table4_layout(a)}`" for a in BERT_ROWS)
    return (f" Here every row is a {BERT_LAYERS}-layer model with {BERT_HEADS} heads per layer and BERT's "
            f"segment embedding (`--segment-embeddings`; pretrained and fine-tuned as the plan shows): 132Tied "
            f"keeps the paper's last layer untied and 120Tied its last two (132 and 120 of BERT-base's 144 heads "
            f"tied). The layouts: {shown}.")


def glue_scores(run_dirs: Dict[str, List[Path]], tasks: Sequence[str]) -> Dict[str, Dict[str, Values]]:
    """Accuracy (Table 4's metric) per row and task over the seeds' eval folders."""
    return {arch: {t: collect([d / f"{t}.json" for d in dirs], lambda p, t=t: glue_metric(p, t, "accuracy"))
                   for t in tasks} for arch, dirs in run_dirs.items()}


def nmt_arms(runs: Dict[str, Dict[int, Path]]) -> Dict[str, Arm]:
    """Each configuration's BLEU per seed (``test.bleu.json``) and its
    per-sentence statistics (``test.hyp`` against ``test.ref``)."""
    from .report import bleu

    out = {}
    for letter, by_seed in runs.items():
        arm = Arm()
        for seed, run in by_seed.items():
            v = bleu(run / "test.bleu.json")
            if v is not None:
                arm.scores[seed] = v
                units = read_bleu_units(run)
                if units is not None:
                    arm.units[seed] = units
        out[letter] = arm
    return out


def glue_arms(plan: Plan, seeds: Dict[str, Sequence[int]], tasks: Sequence[str]) -> Dict[str, Dict[str, Arm]]:
    """Each row's dev accuracy per task and seed (``eval/TASK.json``) and its
    per-example correctness (``eval/predictions/TASK.json``, :mod:`.pande_predict`)."""
    import numpy as np

    from .pande_predict import correct

    out: Dict[str, Dict[str, Arm]] = {}
    for arch in BERT_ROWS:
        out[arch] = {}
        for t in tasks:
            arm = Arm()
            for seed in seeds[arch]:
                v = glue_metric(ft_dir(plan, arch, seed) / "eval" / f"{t}.json", t, "accuracy")
                if v is None:
                    continue
                arm.scores[seed] = v
                right = correct(read_json(predictions_dir(plan, arch, seed) / f"{t}.json"))
                if right is not None:
                    arm.units[seed] = np.asarray(right)
            out[arch][t] = arm
    return out


def weight_counts(runs: Dict[str, Path]) -> Dict[str, int]:
    """Encoder attention weights of each run's checkpoint (fairseq-local results' count)."""
    from fairseq_local.checkpoint_compat import checkpoint_info

    out = {}
    for key, run in runs.items():
        info = checkpoint_info(run) if run.is_dir() else {}
        if info.get("attn weights"):
            out[key] = int(info["attn weights"].replace(",", ""))
    return out


def trees_note(plan: Plan) -> str:
    """Where the analysed sentences' trees come from: the generator, or the named parser (paper scale)."""
    if plan.scale != "paper":
        return ("The BERT models are analysed on their own task's test sentences, with the gold trees of the "
                "stand-in tasks' generator (`glue fake --hard --trees`); the NMT baseline on its synthetic test "
                "sentences with theirs.")
    from .pande import PAPER_SENTENCES
    from .pande_paper import parsed_conllu
    from .pande_parse import PARSER, PARSER_VERSION, parser_of

    parsed = plan.runs / "data-paper" / "parsed"
    used = sorted({p for t in (*TASKS, "newstest2014") if (p := parser_of(parsed_conllu(parsed, t)))})
    who = ", ".join(used) if used else f"{PARSER} {PARSER_VERSION} (named by the plan; not run yet)"
    return (f"The test sentences (GLUE tasks and newstest2014's English side; {PAPER_SENTENCES[1]:,} each, the "
            f"sensitivity on the first {PAPER_SENTENCES[0]}) were parsed by {who}, Universal Dependencies, "
            "English default pipeline (`python -m fairseq_local_reproduce.pande_parse`); the paper names no parser.")


def write_report(plan: Plan) -> Path:
    """``RUNS/pande/report.md`` and its figures (``RUNS/pande/figures/``)
    from the finished runs; cells of runs not yet finished are "-"."""
    from fairseq_local import outputs
    from .environment import environment
    from .models import PLATEAU_RULE, stops_line
    from .pande_figures import draw_all
    from .plan import ROOT, step_timing
    from .report import environment_section, findings_section

    s = SCALES.get(plan.scale)
    letters = s.letters if s else LETTERS
    seeds = {x: seeds_of(s, x == "a") if s else (1,) for x in letters}
    nmt_dirs = ({x: {k: nmt_run(plan, x, k) for k in seeds[x]} for x in letters} if s else
                {x: {1: plan.out / "wmt14_en-de" / x} for x in LETTERS})
    arms = nmt_arms(nmt_dirs)
    bleus = {x: arm.values for x, arm in arms.items()}
    weights = weight_counts({x: next(iter(dirs.values())) for x, dirs in nmt_dirs.items()})
    bert_rows = s.bert_rows if s else BERT_ROWS
    bert_seeds = {a: (seeds_of(s, a == BERT_ROWS[0]) if a in bert_rows else ()) if s else (1,) for a in BERT_ROWS}
    garms = glue_arms(plan, bert_seeds, TASKS)
    scores = {a: {t: garms[a][t].values for t in TASKS} for a in BERT_ROWS}
    bert_weights = weight_counts({a: bert_run(plan, a) for a in BERT_ROWS})
    labels = {"nmt": "NMT (a)", **{bert_analysis(t): f"BERT-base/{t}" for t in TASKS}}
    analyses = {labels[w]: analysis_dir(plan, w) for w in analysed(plan.scale)}
    not_run = [x for x in LETTERS if x not in letters]
    findings = analysis_findings(analyses) + nmt_findings(arms, weights, not_run) + bert_findings(garms, TASKS)
    timing = step_timing(plan.runs, [st.id for st in plan.steps])
    data = ("the hard synthetic corpus and the hard stand-in GLUE tasks (labels that need non-local "
            "information), with reduced models" if s else "WMT'14 and GLUE, as the paper")
    nmt_model = (f"Transformer, 6 encoder layers × 8 heads, {NMT_DECODER_LAYERS} decoder layers, width {s.nmt_width}"
                 if s else "Transformer-base")
    stops = stops_line({f"({x}) s{k}": run for x, dirs in nmt_dirs.items() for k, run in dirs.items()}) if s else ""
    bert_model = (f"BERT, {BERT_LAYERS} layers × {BERT_HEADS} heads, width {BERT_WIDTH}" if s else "BERT-base")
    # the pretraining's one phase (--lengths 64,128 with no second phase): its log
    bert_stops = stops_line({ROW_NAMES[a]: bert_run(plan, a) / "len64" for a in bert_rows}) if s else ""
    sens = {analysed(plan.scale)[w]: v for w in analysed(plan.scale) if (v := read_json(analysis_dir(plan, w) / "sensitivity.json"))}
    bias = {analysed(plan.scale)[w]: v for w in analysed(plan.scale) if (v := read_json(analysis_dir(plan, w) / "bias.json"))}
    pngs = draw_all(plan.out / "figures", plan.scale, {x: list(v.values) for x, v in bleus.items()}, nmt_model,
                    {ROW_NAMES[a]: {t: list(v.values) for t, v in scores[a].items()} for a in BERT_ROWS}, TASKS,
                    bert_model, sens, bias)
    figs = [f"![{p.stem}]({p.relative_to(plan.out).as_posix()})" for p in pngs]
    per_row = ("; ".join(f"{x} {_seeds(v)}" for x, v in (("(a) and BERT-base", s.base_seeds),
                                                           ("every other row", s.seeds))) if s else "1 each")
    models = "; ".join(f"{labels[w]}: {m}" for w, m in analysed(plan.scale).items())
    text = "\n".join([
        f"{TITLE} at `{plan.scale}` scale", "",
        "Pande et al., \"On the Importance of Local Information in Transformer Based Models\". "
        f"Data: {data}. Made by `fairseq-local reproduce pande --scale {plan.scale}`.", "",
        "Values on stand-in data cannot equal the paper's: each comparison is decided on a 95 % interval of the "
        "difference, equivalence against the paper's own margins for claims of equality.", "",
        environment_section(environment(ROOT), plan.seeds, timing),
        f"Seeds per row: {per_row}.", "",
        findings_section(findings),
        "## Tables 1–3: NMT configurations (a)–(l)", "",
        f"BLEU here: the synthetic test set (sacreBLEU) of the {nmt_model}, mean ± sd (seeds) where several. "
        "The paper: WMT'14 En-De and En-Ru.", "", nmt_table(bleus, weights, seeds),
        *([f"Configurations run at this scale: {', '.join(f'({x})' for x in letters)}; the others' rows are "
           "empty and their clauses not comparable (`--scale small` runs all twelve).", ""] if not_run else []),
        *([f"Each model was {PLATEAU_RULE}. How each training ended: {stops}.", ""] if stops else []),
        "## Table 4: BERT-base layouts on GLUE", "",
        *([f"The BERT-base row is the Hugging Face model given with `--bert {plan.bert}` (converted exactly with "
           "convert-hf, fine-tuned on GLUE prepared with its own WordPiece), not this recipe's pretraining: the other "
           "rows' differences from it mix the layout with another pretraining (data, length, tokenizer), so "
           "they are not the paper's controlled comparison.", ""] if plan.bert else []),
        f"Dev accuracy (MNLI: matched) of the {bert_model}, mean ± sd over fine-tuning seeds where several; "
        "sparsity is the share of masked query-key pairs at length 128." + (layouts_note() if s else ""), "",
        bert_table(scores, bert_weights, TASKS, 128, bert_seeds),
        *([f"Rows run at this scale: {', '.join(ROW_NAMES[a] for a in bert_rows)}; the others' rows are empty and "
           "their clauses not comparable (`--scale small` runs all six).", ""] if len(bert_rows) < len(BERT_ROWS) else []),
        *([f"The rows are pretrained for the scale's few updates, not to a plateau (a BERT pretrained 20 times "
           f"longer fine-tuned worse on these stand-ins: `reproduce/pande.py`). The plateau check of each "
           f"pretraining (at a plateau when its best dev loss fell by less than 1 % over its last 10 epochs): "
           f"{bert_stops}.", ""] if bert_stops else []),
        "## Figs. 1–3: sensitivity and attention bias", "",
        f"Analysed (§3): {models}. {trees_note(plan)}", "", *figs, "",
    ])
    path = plan.out / "report.md"
    plan.out.mkdir(parents=True, exist_ok=True)
    outputs.write_text(path, text)
    return path
