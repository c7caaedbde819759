"""The report of ``reproduce hta``: per analysis the correlation of attention
with the previous-layer and the input contribution per layer (Pascual et
al. Figs. 1, 6), the centres of mass (Figs. 4-5), the figures of ``analyze
hta`` (Figs. 1-7), and a verdict per finding
(:data:`~.numbers_hta.HTA_FINDINGS`).

The findings are decided on the paper's setting, the pretrained RoBERTa on
MNLI pairs (``bert-pairs``); the other analyses are shown beside it.  One
model and one pass over the data: there is no spread over seeds, so each
finding is decided by a stated threshold on per-head values.  Layer groups
follow the paper's "first four" and "last four" of 12 layers: the first and
the last third of the layers (:func:`thirds`).
"""

import statistics
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from .hta import MAX_LEN, MODELS, PAIR_MODELS, SCALES, TITLE, analysis_dir, centres_png, examples_dir
from .numbers_hta import HTA_FIG1, HTA_FINDINGS, HTA_SETUP
from .plan import Plan
from .report import NOT_COMPARABLE, NOT_REPRODUCED, REPRODUCED, Finding, read_json, table

TEXT = {f["id"]: f["text"] for f in HTA_FINDINGS}
MAIN = "bert-pairs"  # the paper's setting: the findings are decided on it
SHARE = 0.9          # H1: the share of heads above the paper's thresholds (the paper: 142 and 140 of 144)
DROP = 0.2           # H4, H5: a fall (or rise) of at least this much between the first and the last third
LOCAL = 1            # H6: "around the diagonal": |offset| <= LOCAL
VERTICAL = 0.5       # H7: a head putting at least this share of its attention on <s>/</s> is vertical
BLOCK = 0.1          # H8: same-sentence contribution at least this far above its share of the tokens


def _finding(fid: str, ok: Optional[bool], evidence: str) -> Finding:
    verdict = NOT_COMPARABLE if ok is None else REPRODUCED if ok else NOT_REPRODUCED
    return Finding(fid, TEXT[fid], verdict, evidence)


def _grid(result: Optional[dict], key: str) -> Optional[List[List[Optional[float]]]]:
    """``result[key]`` as [[value per head] per layer] (None where missing or malformed)."""
    v = (result or {}).get(key)
    if not isinstance(v, list) or not v or not all(isinstance(row, list) for row in v):
        return None
    return [[float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None for x in row] for row in v]


def _values(rows: Sequence[Sequence[Optional[float]]]) -> List[float]:
    return [x for row in rows for x in row if x is not None]


def _median(rows: Sequence[Sequence[Optional[float]]]) -> Optional[float]:
    xs = _values(rows)
    return statistics.median(xs) if xs else None


def _mean(xs: Sequence[Optional[float]]) -> Optional[float]:
    ys = [x for x in xs if x is not None]
    return sum(ys) / len(ys) if ys else None


def _centres(result: Optional[dict], name: str) -> Optional[List[Optional[float]]]:
    """``attention_centre`` or ``contribution_centre``: the mean over heads per layer."""
    v = (result or {}).get(f"{name}_centre")
    if not isinstance(v, list) or not v:
        return None
    return [float(x) if isinstance(x, (int, float)) and not isinstance(x, bool) else None for x in v]


def thirds(layers: int) -> Tuple[List[int], List[int]]:
    """The first and the last third of ``layers`` (at least one layer each;
    4 of 12 as the paper's "after four layers" and "the last four layers")."""
    k = max(1, round(layers / 3))
    return list(range(k)), list(range(layers - k, layers))


def _f(v: Optional[float], digits: int = 2, sign: bool = False) -> str:
    return "-" if v is None else f"{v:+.{digits}f}" if sign else f"{v:.{digits}f}"


def _share(rows, above: float) -> Optional[float]:
    xs = _values(rows or [])
    return sum(x > above for x in xs) / len(xs) if xs else None


def fig1_finding(r: Optional[dict]) -> Finding:
    """H1: at least SHARE of the heads with r > 0.7 and ρ > 0.9 (previous-layer contribution)."""
    p, s = _grid(r, "pearson_previous"), _grid(r, "spearman_previous")
    if p is None or s is None or not _values(p):
        return _finding("H1", None, "no correlation with the previous-layer contribution yet")
    a, b = _share(p, 0.7), _share(s, 0.9)
    heads = HTA_SETUP["heads"]
    return _finding("H1", bool(a >= SHARE and b >= SHARE),
                    f"{100 * a:.0f} % of {len(_values(p))} heads have r > 0.7 and {100 * b:.0f} % ρ > 0.9 "
                    f"(median r {_f(_median(p))}, ρ {_f(_median(s))}; the paper: "
                    f"{100 * HTA_FIG1['pearson_above_0.7_heads'] / heads:.0f} % and "
                    f"{100 * (heads - HTA_FIG1['spearman_below_0.9_heads']) / heads:.0f} % of {heads}); "
                    f"reproduced when both are at least {100 * SHARE:.0f} %")


def centre_findings(r: Optional[dict]) -> List[Finding]:
    """H2 (attention centre below 0 in the first third, above 0 in the last)
    and H3 (after the first third, the contribution centre nearer 0 than
    the attention's on average)."""
    att, con = _centres(r, "attention"), _centres(r, "contribution")
    if att is None or len(att) < 2:
        return [_finding("H2", None, "no attention centres of mass yet"),
                _finding("H3", None, "no centres of mass yet")]
    first, last = thirds(len(att))
    a0, a1 = _mean([att[k] for k in first]), _mean([att[k] for k in last])
    h2 = _finding("H2", None if a0 is None or a1 is None else bool(a0 < 0 < a1),
                  f"attention centre {_f(a0, sign=True)} over {_layers(first)}, {_f(a1, sign=True)} over "
                  f"{_layers(last)} (per layer: {', '.join(_f(x, sign=True) for x in att)}); reproduced "
                  f"when the first is negative (past) and the last positive (future)")
    later = list(range(len(first), len(att)))
    if con is None or len(con) != len(att):
        return [h2, _finding("H3", None, "no input contribution centres of mass yet")]
    ma = _mean([abs(att[k]) if att[k] is not None else None for k in later])
    mc = _mean([abs(con[k]) if con[k] is not None else None for k in later])
    h3 = _finding("H3", None if ma is None or mc is None else bool(mc < ma),
                  f"mean |centre of mass| over {_layers(later)}: input contribution {_f(mc)}, attention "
                  f"{_f(ma)} (contribution per layer: {', '.join(_f(x, sign=True) for x in con)}); reproduced "
                  f"when the contribution's is the smaller")
    return [h2, h3]


def _layers(ks: Sequence[int]) -> str:
    """Layers from 1, as the paper numbers them."""
    return f"layer {ks[0] + 1}" if len(ks) == 1 else f"layers {ks[0] + 1}-{ks[-1] + 1}"


def depth_findings(r: Optional[dict]) -> List[Finding]:
    """H4 (median r and ρ with the input contribution fall by DROP from the
    first third to the last) and H5 (the gap between the previous-layer and
    the input correlation grows by DROP)."""
    pi, si, pp = _grid(r, "pearson_input"), _grid(r, "spearman_input"), _grid(r, "pearson_previous")
    if pi is None or si is None or len(pi) < 2:
        return [_finding("H4", None, "no correlation with the input contribution yet"),
                _finding("H5", None, "no correlation with the input contribution yet")]
    first, last = thirds(len(pi))
    group = {name: (_median([g[k] for k in first]), _median([g[k] for k in last]))
             for name, g in (("r", pi), ("ρ", si), ("prev", pp or [[] for _ in pi]))}
    (r0, r1), (s0, s1), (q0, q1) = group["r"], group["ρ"], group["prev"]
    ok4 = None if None in (r0, r1, s0, s1) else bool(r0 - r1 >= DROP and s0 - s1 >= DROP)
    h4 = _finding("H4", ok4, f"median over the heads of {_layers(first)} / {_layers(last)}: r {_f(r0)} / "
                  f"{_f(r1)}, ρ {_f(s0)} / {_f(s1)} (the paper: median r below 0.25 in the last four of 12 layers, "
                  f"ρ below 0.25 at the last); reproduced when both fall by at least {DROP:g}")
    if None in (r0, r1, q0, q1):
        return [h4, _finding("H5", None, "no correlation with the previous-layer contribution yet")]
    g0, g1 = q0 - r0, q1 - r1  # type: ignore[operator]
    h5 = _finding("H5", bool(g1 - g0 >= DROP),
                  f"median r with the previous-layer minus with the input contribution: {_f(g0, sign=True)} over "
                  f"{_layers(first)}, {_f(g1, sign=True)} over {_layers(last)}; reproduced when it "
                  f"grows by at least {DROP:g}")
    return [h4, h5]


def peak_shares(r: Optional[dict]) -> Dict[str, Optional[float]]:
    """The share of heads whose histogram (attention, input contribution)
    peaks within |offset| <= LOCAL of the attending token."""
    offsets = (r or {}).get("offsets")
    out: Dict[str, Optional[float]] = {}
    for name in ("attention", "contribution"):
        hist = (r or {}).get(f"{name}_histogram")
        peaks = []
        if isinstance(offsets, list) and isinstance(hist, list):
            for layer in hist:
                for head in layer if isinstance(layer, list) else []:
                    seen = [(v, o) for v, o in zip(head, offsets) if isinstance(v, (int, float))]
                    if seen:
                        peaks.append(abs(max(seen)[1]) <= LOCAL)
        out[name] = sum(peaks) / len(peaks) if peaks else None
    return out


def diagonal_finding(r: Optional[dict]) -> Finding:
    """H6: the input contribution peaks around the diagonal for most heads."""
    s = peak_shares(r)
    if s["contribution"] is None:
        return _finding("H6", None, "no input contribution histograms yet")
    return _finding("H6", s["contribution"] > 0.5,
                    f"the input contribution peaks within {LOCAL} token(s) of the attending token for "
                    f"{100 * s['contribution']:.0f} % of the heads (attention: {_pct(s['attention'])}); "
                    f"reproduced above 50 %")


def special_finding(r: Optional[dict]) -> Finding:
    """H7: heads with at least VERTICAL of their attention on <s>/</s>, and
    their input contribution from those tokens below half of it.  Reads
    ``attention_special`` and ``contribution_special`` ([[per head] per
    layer]) of ``analyze hta``'s hta.json."""
    att, con = _grid(r, "attention_special"), _grid(r, "contribution_special")
    if att is None or con is None:
        return _finding("H7", None, "hta.json has no attention and contribution mass on <s> and </s> "
                                    "(attention_special, contribution_special)")
    pairs = [(a, c) for ra, rc in zip(att, con) for a, c in zip(ra, rc) if a is not None and c is not None]
    vertical = [(a, c) for a, c in pairs if a >= VERTICAL]
    if not vertical:
        return _finding("H7", False, f"no head puts {100 * VERTICAL:.0f} % of its attention on <s> and </s> "
                                     f"(at most {_f(max((a for a, _ in pairs), default=None))})")
    ma, mc = _mean([a for a, _ in vertical]), _mean([c for _, c in vertical])
    return _finding("H7", bool(mc < ma / 2),  # type: ignore[operator]
                    f"{len(vertical)} of {len(pairs)} heads put at least {100 * VERTICAL:.0f} % of their "
                    f"attention on <s> and </s> (mean {_f(ma)}); those tokens' input contribution to them: "
                    f"{_f(mc)}; reproduced when it is below half the attention")


def block_finding(r: Optional[dict]) -> Finding:
    """H8 (pairs): the input contribution from the query's own sentence
    exceeds its share of the tokens by BLOCK in the first third of the
    layers, and by less than half that in the last third.  Reads
    ``contribution_same_sentence`` ([[per head] per layer]) and
    ``same_sentence_share`` (the mean own-sentence share of the tokens) of
    ``analyze hta --pairs``' hta.json."""
    same, base = _grid(r, "contribution_same_sentence"), (r or {}).get("same_sentence_share")
    if same is None or not isinstance(base, (int, float)) or len(same) < 2:
        return _finding("H8", None, "hta.json has no same-sentence contribution of the pairs "
                                    "(contribution_same_sentence, same_sentence_share)")
    first, last = thirds(len(same))
    e0, e1 = (None if m is None else m - base for m in (_mean(_values([same[k] for k in ks])) for ks in (first, last)))
    if e0 is None or e1 is None:
        return _finding("H8", None, "no same-sentence contribution values")
    return _finding("H8", bool(e0 >= BLOCK and e1 < e0 / 2),
                    f"input contribution from the own sentence above its share of the tokens ({base:.2f}): "
                    f"{e0:+.2f} over {_layers(first)}, {e1:+.2f} over {_layers(last)}; reproduced "
                    f"when the first is at least {BLOCK:g} and the last below half of it")


def languages_finding(results: Dict[str, Optional[dict]]) -> Finding:
    """H9: no German or Arabic BERT here: the other analyses' attention
    centres (first and last third) are shown for reference."""
    shown = []
    for what, r in results.items():
        att = _centres(r, "attention")
        if att and len(att) >= 2:
            first, last = thirds(len(att))
            shown.append(f"{what} {_f(_mean([att[k] for k in first]), sign=True)} → "
                         f"{_f(_mean([att[k] for k in last]), sign=True)}")
    return _finding("H9", None, "no German or Arabic model here" +
                    (f"; attention centre, first → last third of the layers: {'; '.join(shown)}" if shown else ""))


def findings(results: Dict[str, Optional[dict]]) -> List[Finding]:
    """Every finding, decided on :data:`MAIN`'s result."""
    r = results.get(MAIN)
    return [fig1_finding(r), *centre_findings(r), *depth_findings(r), diagonal_finding(r), special_finding(r),
            block_finding(r), languages_finding(results)]


def head_table(results: Dict[str, Optional[dict]]) -> str:
    """Fig. 1 as numbers: per analysis, the sentences kept and the share of
    heads above the paper's thresholds, beside the paper's."""
    heads = HTA_SETUP["heads"]
    rows = [["paper (BERT-base, MNLI-m)", str(HTA_SETUP["examples"]), "-", "12 x 12",
             f"{100 * HTA_FIG1['pearson_above_0.7_heads'] / heads:.0f} %",
             f"{100 * HTA_FIG1['pearson_above_0.85_share']:.0f} %",
             f"{100 * (heads - HTA_FIG1['spearman_below_0.9_heads']) / heads:.0f} %",
             f"{100 * HTA_FIG1['spearman_above_0.95_share']:.0f} %"]]
    for what, r in results.items():
        p, s = _grid(r, "pearson_previous"), _grid(r, "spearman_previous")
        cells = [_pct(_share(p, 0.7)), _pct(_share(p, 0.85)), _pct(_share(s, 0.9)), _pct(_share(s, 0.95))]
        rows.append([what, str((r or {}).get("sentences", "-")), str((r or {}).get("skipped", "-")),
                     f"{r['layers']} x {r['heads']}" if r and "layers" in r and "heads" in r else "-", *cells])
    return table(["analysis", "kept", "skipped", "layers x heads", "r > 0.7", "r > 0.85", "ρ > 0.9", "ρ > 0.95"],
                 rows)


def _pct(v: Optional[float]) -> str:
    return "-" if v is None else f"{100 * v:.0f} %"


def layer_table(r: Optional[dict]) -> str:
    """Per layer (from 1): the median over heads of r and ρ with the
    previous-layer and the input contribution (Figs. 1, 6), and the centres
    of mass of attention and input contribution (Figs. 4-5)."""
    grids = [_grid(r, k) for k in ("pearson_previous", "spearman_previous", "pearson_input", "spearman_input")]
    att, con = _centres(r, "attention"), _centres(r, "contribution")
    n = max([len(g) for g in grids if g] + [len(att or []), 0])
    rows = []
    for k in range(n):
        cells = [_f(_median([g[k]]) if g and k < len(g) else None) for g in grids]
        cells += [_f(c[k] if c and k < len(c) else None, sign=True) for c in (att, con)]
        rows.append([str(k + 1), *cells])
    return table(["layer", "r previous", "ρ previous", "r input", "ρ input", "attention centre",
                  "contribution centre"], rows or [["-"] * 7])


FIGURES = (("hta_previous.png", "Fig. 1: attention against previous-layer contribution"),
           ("hta_attention.png", "Fig. 2: attention by relative position"),
           ("hta_contribution.png", "Fig. 3: input contribution by relative position"),
           ("hta_centres.png", "Figs. 4-5: centres of mass per layer"),
           ("hta_input.png", "Fig. 6: attention against input contribution"))


def _links(plan: Plan, folder: Path, names: Sequence[Tuple[str, str]]) -> List[str]:
    """Markdown images of the files that exist, relative to RUNS/hta."""
    return [f"![{label}]({(folder / name).relative_to(plan.out).as_posix()})"
            for name, label in names if (folder / name).is_file()]


def write_report(plan: Plan) -> Path:
    """``RUNS/hta/report.md`` from the finished steps; what is not there
    yet reads "-" or "not comparable"."""
    from .. import outputs
    from .environment import environment
    from .plan import ROOT, step_timing
    from .report import environment_section, findings_section

    results = {what: read_json(analysis_dir(plan, what) / "hta.json") for what in MODELS}
    reduced = plan.scale != "paper"
    s = SCALES[plan.scale]
    data = (f"Pande et al.'s reduced models (RoBERTa 4 layers x 4 heads of dimension 16, NMT 6 x 8 of dimension "
            f"8) on the stand-in data: the hard stand-in MNLI's dev-matched pairs (the first {s.pairs}), the stand-in "
            f"corpus's gold-tree sentences, the hard synthetic corpus's test sentences. Pairs and sentences of at "
            f"most {MAX_LEN} tokens are kept as in the paper, but the heads are narrower than {MAX_LEN}, so "
            f"attention is not identifiable there (§5)" if reduced else
            f"BERT-base (Pande et al.'s pretraining) on MNLI dev-matched (the first {s.pairs} pairs, those of at "
            f"most {MAX_LEN} tokens kept) and Transformer-base (WMT'14 en-de) on newstest2014")
    parts = [f"{TITLE} at `{plan.scale}` scale", "",
             "Pascual, Brunner and Wattenhofer, \"Telling BERT's Full Story: from Local Attention to Global "
             f"Aggregation\" (EACL 2021). Data and models: {data}. Made by `fairseq-local reproduce hta --scale "
             f"{plan.scale}`.", "",
             environment_section(environment(ROOT), plan.seeds, step_timing(plan.runs, [x.id for x in plan.steps]),
                                 f"Findings are decided on `{MAIN}` ({MODELS[MAIN]}): one model and one pass "
                                 "over the data, so each by the threshold its line states, not on a spread over "
                                 "seeds; the first and last third of the layers stand for the paper's first and "
                                 "last four of 12. Layers are numbered from 1."),
             findings_section(findings(results)),
             "## Fig. 1: heads above the paper's thresholds", "",
             "Per head, the mean over attention rows of Pearson's r and Spearman's ρ of attention with the "
             "previous-layer contribution (`analyze hta`, Eq. 1 per head output).", "", head_table(results)]
    for what, r in results.items():
        parts += [f"## `{what}`: {MODELS[what]}", "", "Correlations: the median over the heads of a layer; "
                  "centres of mass: the mean over its heads (negative: past tokens).", "", layer_table(r),
                  *_links(plan, analysis_dir(plan, what), FIGURES),
                  ""]
    parts += ["## Figs. 4-5: centres of mass of every analysis", "",
              "Attention solid, input contribution dashed (`analyze table --centres`); negative: past tokens.", ""]
    parts += _links(plan, centres_png(plan).parent, [(centres_png(plan).name, "Figs. 4-5: centres of mass")]) or ["-"]
    parts += ["", "## Fig. 7 and Appendix C: attention above input contribution", ""]
    for what in PAIR_MODELS:
        names = [(f"hta_example_{k}.png", f"Fig. 7: {what}, pair {k}") for k in s.examples]
        parts += [f"`{what}`, pairs {', '.join(map(str, s.examples))} (head 0 of every layer):", "",
                  *(_links(plan, examples_dir(plan, what), names) or ["-"]), ""]
    plan.out.mkdir(parents=True, exist_ok=True)
    path = plan.out / "report.md"
    outputs.write_text(path, "\n".join(parts))
    return path
