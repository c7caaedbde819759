"""``reproduce voita``: the plan at every scale and on either device, and
the report's findings, tables and figures on hand-made roles, importances,
pruning rows and translations whose verdicts are known."""

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from fairseq_local_reproduce import pande, voita
from fairseq_local_reproduce import voita_figures as figs
from fairseq_local_reproduce import voita_findings as vf
from fairseq_local_reproduce import voita_report as rep
from fairseq_local_reproduce.plan import BUDGETS, dependencies, estimate
from fairseq_local_reproduce.report import read_findings
from fairseq_local_reproduce.verdicts import CONTRADICTED, INCONCLUSIVE, NOT_COMPARABLE, REPRODUCED


def _flag(cmd, name):
    return cmd[cmd.index(name) + 1]


@pytest.mark.parametrize("scale", ["tiny", "small", "paper"])
def test_every_experiment_is_planned(tmp_path, scale):
    plan = voita.build(scale, tmp_path)
    ids = [s.id for s in plan.steps]
    assert len(ids) == len(set(ids))
    for step in ("heads/dump", "heads/roles", "heads/importance", "prune"):
        assert f"voita/{step}" in ids
    prune = next(s for s in plan.steps if s.id == "voita/prune")
    s = voita.SCALES[scale]
    assert _flag(prune.cmd, "--lambdas") == ",".join(f"{x:g}" for x in s.lambdas)
    assert ("--gates-only" in prune.cmd) == (scale != "paper")  # the paper fine-tunes every weight
    imp = next(x for x in plan.steps if x.id == "voita/heads/importance")
    assert _flag(imp.cmd, "--method") == "lrp" and _flag(imp.cmd, "--out") == str(voita.heads_dir(plan))
    # the importance is added to the roles' roles.json: it waits for them
    assert "voita/heads/roles" in dependencies(plan.steps)["voita/heads/importance"]


def test_tiny_plan_shares_pandes_data_and_fits_its_budget(tmp_path):
    plan = voita.build("tiny", tmp_path)
    assert [s.id for s in plan.steps[:1]] == ["data-tiny/nmt-hard"]
    assert plan.steps[0] == pande.build("tiny", tmp_path).steps[0]  # the same step: a second paper skips it
    assert not any("bert" in s.id for s in plan.steps)
    train = next(s for s in plan.steps if s.id == "models-tiny/nmt/a-s1/train")
    assert train.cmd.count("--decoder-layers") == 1 and _flag(train.cmd, "--decoder-layers") == "2"
    assert _flag(train.cmd, "--arch") == "a"
    assert round(estimate(plan, 2)) <= BUDGETS["tiny"]["voita"] and round(estimate(voita.build("small", tmp_path), 2)) <= BUDGETS["small"]["voita"]


def test_device_places_training_and_analyses(tmp_path):
    """``cpu``: every fairseq-train run gets --cpu (the model's and, after
    "--", the pruning curve's); ``cuda``: none does, and the dump and the
    LRP importance run on the GPU.  Paper scale: the scripts choose."""
    def step(plan, sid):
        return next(s for s in plan.steps if s.id == sid).cmd

    cpu, cuda = voita.build("tiny", tmp_path), voita.build("tiny", tmp_path, device="cuda")
    assert cpu.device == "cpu" and cuda.device == "cuda"
    for sid in ("models-tiny/nmt/a-s1/train", "voita/prune"):
        assert step(cpu, sid)[-1] == "--cpu" and "--cpu" not in step(cuda, sid)
    prune = step(cpu, "voita/prune")
    assert prune.index("--cpu") > prune.index("--")  # a fairseq-train option
    for sid in ("voita/heads/dump", "voita/heads/importance"):
        assert "--cuda" in step(cuda, sid) and "--cuda" not in step(cpu, sid)
    assert not any("--cpu" in s.cmd for s in cuda.steps)
    paper = voita.build("paper", tmp_path, device="cpu")
    assert not any("--cpu" in s.cmd for s in paper.steps)


def test_paper_plan_is_wmt_en_ru_with_every_weight_fine_tuned(tmp_path):
    plan = voita.build("paper", tmp_path)
    assert plan.steps[0].cmd[:3] == ("bash", "scripts/prepare-wmt14.sh", "en-ru")
    assert plan.steps[1].cmd[:4] == ("bash", "scripts/train-wmt14.sh", "en-ru", "a")
    prune = plan.steps[-1]
    assert prune.cmd[2].endswith("wmt14_en-ru/a/checkpoint_best.pt") and _flag(prune.cmd, "--ref").endswith("tok/test.ru")
    assert plan.minutes() is None


def _points(special_high: bool, n: int = 12, roles=("syntactic", "positional", "rare", "other")):
    """Heads whose importance rises with confidence; the specialised ones
    the most (or the least) important."""
    roles = list(roles) * (n // len(roles))
    pts = []
    for k, role in enumerate(roles):
        conf = k / n
        imp = conf + (1.0 if (role != "other") == special_high else 0.0)
        pts.append({"layer": 1 + k // 4, "head": 1 + k % 4, "confidence": conf, "importance": imp, "role": role})
    return pts


def _verdicts(findings):
    return [f.verdict for f in findings]


def test_spearman_is_scipys_and_nan_when_constant():
    from scipy.stats import spearmanr

    pts = _points(True, 40)
    assert vf.spearman(pts) == pytest.approx(spearmanr([p["confidence"] for p in pts],
                                                       [p["importance"] for p in pts])[0])
    assert math.isnan(vf.spearman([dict(p, importance=1.0) for p in pts]))


def test_head_findings_decide_on_intervals_over_heads():
    v1, v2 = rep.head_findings(_points(True, 40))
    assert v1.verdict == REPRODUCED and v2.verdict == REPRODUCED
    assert "bootstrap over 40 encoder heads" in v1.estimate and v1.estimate.startswith("Spearman's ρ = +")
    # every role is a clause of its own: each tested against the "other" heads
    for role in ("positional", "syntactic", "rare"):
        assert f"{role} heads more important than the other heads" in v2.evidence
    # the specialised heads the least important: the data exclude the claim (was "not reproduced")
    v1, v2 = rep.head_findings(_points(False, 40))
    assert v2.verdict == CONTRADICTED
    flat = [dict(p, importance=1.0 - p["confidence"]) for p in _points(True, 40)]
    assert rep.head_findings(flat)[0].verdict == CONTRADICTED  # importance falls with confidence
    assert _verdicts(rep.head_findings([])) == [NOT_COMPARABLE, NOT_COMPARABLE]
    only = [dict(p, role="other") for p in _points(True, 40)]
    assert rep.head_findings(only)[1].verdict == NOT_COMPARABLE


def test_head_findings_without_a_positional_head_say_so():
    """The tiny model has no positional head: V2's positional clause is not
    comparable and says why, while the syntactic and rare clauses are decided."""
    pts = _points(True, 45, roles=("syntactic", "rare", "other"))
    v2 = rep.head_findings(pts, "tiny")[1]
    assert v2.verdict == NOT_COMPARABLE
    assert "the model at `tiny` scale has 0 positional heads" in v2.evidence
    assert "syntactic heads more important than the other heads (Δ mean LRP importance > 0): Δ importance" \
        in v2.evidence and "→ reproduced" in v2.evidence


def test_head_findings_inconclusive_without_a_trend():
    """Importance unrelated to confidence over 12 heads: neither the claim
    nor its opposite is excluded, and the line states the detectable ρ."""
    rng = np.random.default_rng(3)
    pts = [dict(p, importance=float(rng.normal())) for p in _points(True, 12)]
    v1 = rep.head_findings(pts)[0]
    assert v1.verdict == INCONCLUSIVE and "could decide an effect beyond ±" in v1.evidence


def test_head_points_read_roles_and_importance():
    roles = {"confidence": [[0.5, None], [0.9, 0.1]], "roles": [["syntactic", "other"], ["positional", "other"]],
             "importance": {"lrp": [[0.2, 0.3], [0.4, 0.1]]}}
    pts = rep.head_points(roles)
    assert [(p["layer"], p["head"], p["role"], p["importance"]) for p in pts] == [
        (1, 1, "syntactic", 0.2), (2, 1, "positional", 0.4), (2, 2, "other", 0.1)]
    assert rep.head_points({"confidence": [[0.5]], "roles": [["other"]]}) == []  # no importance yet


def _row(lam, enc, dec_self, cross, bleu, roles):
    return {"lambda": lam, "kept": {"enc-self": enc, "dec-self": dec_self, "dec-cross": cross},
            "heads": {"enc-self": 48, "dec-self": 16, "dec-cross": 16}, "bleu": bleu,
            "roles": dict(zip(("positional", "syntactic", "rare", "other"), roles))}


BASE = _row(None, 48, 16, 16, 30.0, (2, 10, 0, 36))


def test_survival_of_specialised_heads():
    """V3: the share of specialised heads among those kept by the runs that
    keep at most half of them, against their share of every head."""
    rows = [BASE, _row(0.1, 20, 10, 16, 29.5, (2, 10, 0, 8)), _row(0.5, 10, 4, 12, 27.0, (2, 8, 0, 0))]
    v3 = rep.prune_findings(rows)[0]
    assert v3.verdict == REPRODUCED and "12 of 48 with every head; 12 of the 20 kept at λ = 0.1" in v3.evidence
    assert "Δ specialised share = +0.35" in v3.estimate  # one run (the least pruned): no head counted twice
    gone = [BASE, _row(0.5, 20, 16, 16, 29.0, (0, 0, 0, 20))]  # every specialised head pruned first
    assert rep.prune_findings(gone)[0].verdict == CONTRADICTED
    mixed = [BASE, _row(0.5, 20, 16, 16, 29.0, (1, 4, 0, 15))]  # their share: 5/20 against 12/48
    assert rep.prune_findings(mixed)[0].verdict == INCONCLUSIVE
    few = [BASE, _row(0.1, 30, 16, 16, 29.0, (2, 10, 0, 18))]  # no run keeps half or fewer
    v3 = rep.prune_findings(few)[0]
    assert v3.verdict == NOT_COMPARABLE and "no run keeps between one and half" in v3.evidence


def _sentences(n=120, seed=0):
    rng = np.random.default_rng(seed)
    words = [f"w{k}" for k in range(60)]
    return [" ".join(rng.choice(words, int(rng.integers(6, 16)))) for _ in range(n)]


def _corrupt(lines, share, seed=1):
    rng = np.random.default_rng(seed)
    return [" ".join("x" if rng.random() < share else w for w in line.split()) for line in lines]


def _stats(hyps, refs):
    return np.array(__import__("sacrebleu").metrics.BLEU()._extract_corpus_statistics(hyps, [refs]))


def test_bleu_stats_give_sacrebleus_corpus_score(tmp_path):
    import sacrebleu

    refs = _sentences()
    hyps = _corrupt(refs, 0.3)
    (tmp_path / "test.ref").write_text("\n".join(refs) + "\n")
    (tmp_path / "test.hyp").write_text("\n".join(hyps) + "\n")
    st = vf.bleu_stats(tmp_path / "test.hyp", tmp_path / "test.ref")
    assert st.shape == (120, 10)
    assert vf.corpus_bleu(st) == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score, abs=1e-9)
    (tmp_path / "test.ref").write_text("\n".join(refs[:-1]) + "\n")
    assert vf.bleu_stats(tmp_path / "test.hyp", tmp_path / "test.ref") is None  # not parallel
    assert vf.bleu_stats(tmp_path / "none.hyp", tmp_path / "test.ref") is None


def _v4(rows, stats):
    return rep.prune_findings(rows, lambda r: stats.get(r["lambda"]))[1]


def test_v4_bounds_the_bleu_cost_at_the_papers_share():
    """V4: the least pruned run removing at least 38 of 48 encoder heads, its
    BLEU cost (paired bootstrap over sentences) against the paper's 0.15."""
    refs = _sentences()
    same, bad = _stats(refs, refs), _stats(_corrupt(refs, 0.3), refs)
    rows = [BASE, _row(0.1, 20, 16, 16, 30.0, (2, 10, 0, 8)), _row(0.5, 10, 16, 16, 30.0, (2, 8, 0, 0)),
            _row(1.0, 4, 16, 16, 20.0, (0, 4, 0, 0))]
    v4 = _v4(rows, {None: same, 0.1: same, 0.5: same, 1.0: bad})
    # 38 of 48 removed at λ = 0.5 (the paper's share exactly), for no BLEU: reproduced
    assert v4.verdict == REPRODUCED and "38 of 48 gates closed at λ = 0.5" in v4.evidence
    assert "BLEU cost = +0.00 [+0.00, +0.00] (bootstrap over 120 test sentences, paired)" in v4.evidence
    # the run at the paper's share loses: the data exclude the claim
    v4 = _v4(rows, {None: same, 0.1: same, 0.5: bad, 1.0: bad})
    assert v4.verdict == CONTRADICTED and v4.estimate.startswith("BLEU cost = +")
    # only a run beyond the paper's share (44 of 48) loses, the run below it (28 of 48) does not: can't tell
    rows = [BASE, _row(0.1, 20, 16, 16, 30.0, (2, 10, 0, 8)), _row(1.0, 4, 16, 16, 20.0, (0, 4, 0, 0))]
    v4 = _v4(rows, {None: same, 0.1: same, 1.0: bad})
    assert v4.verdict == INCONCLUSIVE and "more than the paper's 79 %" in v4.evidence
    # ... unless the run below it loses too
    v4 = _v4(rows, {None: same, 0.1: bad, 1.0: bad})
    assert v4.verdict == CONTRADICTED and "λ = 0.1, removing only 28 of 48, already costs more" in v4.evidence
    # no run removes 38 of 48: the sweep cannot test the claim
    v4 = _v4([BASE, _row(0.1, 20, 16, 16, 30.0, (2, 10, 0, 8))], {None: same, 0.1: same})
    assert v4.verdict == NOT_COMPARABLE and "most: 28 of 48 at λ = 0.1" in v4.evidence
    # no translations: the share is decided, the cost is not comparable
    v4 = rep.prune_findings([BASE, _row(0.5, 10, 16, 16, 30.0, (2, 8, 0, 0))])[1]
    assert v4.verdict == NOT_COMPARABLE and "→ reproduced" in v4.evidence and "no per-sentence" in v4.evidence
    # the gates alone trained (the reduced scales), not every weight as the paper: the cost is not the paper's
    rows = [BASE, _row(0.5, 10, 16, 16, 30.0, (2, 8, 0, 0))]
    v4 = rep.prune_findings(rows, lambda r: {None: same, 0.5: bad}[r["lambda"]], gates_only=True)[1]
    assert v4.verdict == NOT_COMPARABLE and "the gates alone were trained; Voita et al. fine-tune every weight" in v4.evidence


def test_v5_compares_the_encoder_decoder_attention_with_each_type():
    rows = [BASE, _row(0.1, 20, 10, 16, 29.5, (2, 10, 0, 8)), _row(0.5, 10, 4, 12, 27.0, (2, 8, 0, 0))]
    v5 = rep.prune_findings(rows)[2]
    assert v5.verdict == REPRODUCED
    assert "larger share than encoder self-attention" in v5.evidence and "than decoder self-attention" in v5.evidence
    assert "heads kept over the 2 runs that closed any: encoder self-attention 30/96" in v5.evidence
    swapped = [BASE, _row(0.1, 20, 16, 10, 29.5, (2, 10, 0, 8)), _row(0.5, 10, 12, 4, 27.0, (2, 8, 0, 0))]
    assert rep.prune_findings(swapped)[2].verdict == CONTRADICTED  # the cross attention pruned the most
    # only the encoder is pruned: the decoder types cannot be compared
    enc_only = [BASE, _row(0.1, 20, 16, 16, 29.5, (2, 10, 0, 8))]
    v5 = rep.prune_findings(enc_only)[2]
    assert v5.verdict == NOT_COMPARABLE and "no run closed some but not all of their heads" in v5.evidence
    assert _verdicts(rep.prune_findings([])) == [NOT_COMPARABLE] * 3


def test_figures_name_the_model_and_scale(tmp_path, monkeypatch):
    titles = []
    monkeypatch.setattr(figs, "save", lambda fig, path: titles.append(fig.axes[0].get_title()) or Path(path))
    plan = voita.build("tiny", tmp_path)
    title = rep.model_title(plan)
    assert title == "config (a), d = 64, 6 x 8 encoder heads, synthetic NMT (tiny scale)"
    assert rep.model_title(voita.build("paper", tmp_path)) == "Transformer-base, WMT EN-RU (paper scale)"
    rows = [BASE, _row(0.5, 10, 4, 12, 27.0, (2, 8, 0, 0))]
    figs.plot_heads(_points(True), tmp_path / "a.png", title)
    figs.plot_curve(rows, {"base": (29.0, 31.0)}, tmp_path / "b.png", title)
    figs.plot_roles(rows, tmp_path / "c.png", title)
    assert len(titles) == 3 and all(t.startswith(title + "\n") for t in titles)


def _write_run(folder: Path, hyps, refs):
    folder.mkdir(parents=True)
    (folder / "test.hyp").write_text("\n".join(hyps) + "\n")
    (folder / "test.ref").write_text("\n".join(refs) + "\n")


def test_report_from_finished_steps(tmp_path, monkeypatch):
    import sacrebleu

    from fairseq_local_reproduce import environment

    monkeypatch.setattr(environment, "_git_commit", lambda root: "abc1234")
    plan = voita.build("tiny", tmp_path)
    heads = voita.heads_dir(plan)
    heads.mkdir(parents=True)
    pts = _points(True, 48)
    roles = {"confidence": [[p["confidence"] for p in pts[k:k + 8]] for k in range(0, 48, 8)],
             "roles": [[p["role"] for p in pts[k:k + 8]] for k in range(0, 48, 8)],
             "importance": {"lrp": [[p["importance"] for p in pts[k:k + 8]] for k in range(0, 48, 8)]}}
    (heads / "roles.json").write_text(json.dumps(roles))
    prune = voita.prune_dir(plan)
    refs = _sentences()
    score = round(sacrebleu.corpus_bleu(refs, [refs]).score, 2)
    _write_run(prune / "base", refs, refs)
    _write_run(prune / "lambda-0.5", refs, refs)
    rows = [_row(None, 48, 16, 16, score, (6, 12, 0, 30)), _row(0.5, 10, 4, 12, score, (4, 6, 0, 0))]
    (prune / "prune_curve.json").write_text(json.dumps({"rows": rows}))
    # the tiny scale trains the gates alone, so V4's cost is not the paper's ...
    gates = rep.write_report(plan).read_text()
    assert "5 findings: 4 reproduced, 0 contradicted, 0 inconclusive, 1 not comparable." in gates
    assert "not comparable (the gates alone were trained; Voita et al. fine-tune every weight" in gates
    # ... and with every weight fine-tuned (paper scale's pruning) every finding is decided
    monkeypatch.setitem(voita.SCALES, "tiny", dataclasses.replace(voita.SCALES["tiny"], gates_only=False))
    path = rep.write_report(plan)
    text = path.read_text()
    assert text.startswith(voita.TITLE + " at `tiny` scale")
    assert "5 findings: 5 reproduced, 0 contradicted, 0 inconclusive, 0 not comparable." in text
    assert f"| 0.5 | 10/48 (21 %) | 4/16 (25 %) | 12/16 (75 %) | {score:.2f} [{score:.2f}, {score:.2f}] |" in text
    found = read_findings(text)
    assert [f.id for f in found] == ["V1", "V2", "V3", "V4", "V5"] and all(f.estimate != "-" for f in found)
    for png in ("report_heads.png", "report_curve.png", "report_roles.png"):
        assert (plan.out / png).read_bytes()[:4] == b"\x89PNG" and f"]({png})" in text
    # a translation that does not give the row's BLEU is not used: V4's cost is then not comparable
    rows[1]["bleu"] = score - 1
    (prune / "prune_curve.json").write_text(json.dumps({"rows": rows}))
    assert "no per-sentence translations" in rep.write_report(plan).read_text()
    # before any step finished: every finding "not comparable"
    empty = voita.build("tiny", tmp_path / "none")
    assert "5 findings: 0 reproduced, 0 contradicted, 0 inconclusive, 5 not comparable." in \
        Path(rep.write_report(empty)).read_text()
