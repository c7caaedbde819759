"""Head roles of Voita et al. 2019, "Analyzing Multi-Head Self-Attention:
Specialized Heads Do the Heavy Lifting, the Rest Can Be Pruned" (§4 confidence,
§5 "Characterizing heads": §5.1 positional, §5.2 syntactic, §5.3 rare words).

Every statistic reads a head's *maximum attention weight* per query row.
Special tokens (``word_ids == -1``: ``</s>``, and ``<s>`` of RoBERTa) are left
out both as query rows and as key columns, since Voita et al. exclude EOS
"on the grounds that it is not a real token" (§4) and take the
maximum "excluding EOS" (§5.2.1).  A row whose weights outside the special
columns are all zero (a ``post``-mode head with no allowed real key) has no
maximum and is left out too (a miss for syntactic accuracy).  Ties go to the first (leftmost) key.

* confidence (§4): the mean over the counted rows of the maximum weight;
* positional (§5.1): the share of rows whose argmax lies at each relative
  offset (key - query, in tokens); positional when one offset holds >= 90 %;
* syntactic (§5.2.1), per relation and direction: the share of relation
  instances where the argmax of the query word's row falls on the partner
  word.  Words are the query's *first token* row; the argmax counts when it is
  on *any* token of the partner word.  Keys ``REL:head->dep`` (query = the
  syntactic head, e.g. Voita's "v→s" for nsubj) and ``REL:dep->head`` ("s→v").
  A query row without a maximum counts as a miss here, so that accuracy and
  baseline share one denominator (every instance).  The baseline is "the most
  frequent relative position for this dependency relation": the accuracy of
  always predicting one offset from the query token, for the offset that
  scores best (with a token per word, exactly the most frequent word offset).
  Syntactic when accuracy >= baseline + 10 points;
* rare words (§5.3): per sentence the head *points at* the token that receives
  the argmax of the most query rows (a strict plurality; a tie points at no
  single token), as in the attention maps of Voita Fig. 5.  The share of
  sentences where that token is the sentence's least frequent (any of them
  on a tie), frequency being the count in the model's training data, among
  sentences whose least frequent token is not one of the ``rare_top`` (500,
  §5.3) most frequent symbols.  Rare-word head when the share is >= 0.5 (the
  paper gives no threshold; its rare head scores 66 %, §5.3).

Plain torch; no fairseq import.
"""

import bisect
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import torch
from torch import Tensor
from tqdm import tqdm

from .relations import RecordError, record_length

__all__ = ["ROLES", "ROLE_COLOURS", "RELATIONS", "THRESHOLDS", "RARE_TOP", "KEPT_KEYS", "syntactic_keys",
           "head_roles", "classify", "best_relation", "read_counts", "rank_of"]

ROLES = ("positional", "syntactic", "rare", "other")  # Voita Fig. 8's categories, in order of precedence
ROLE_COLOURS = {"positional": "tab:purple", "syntactic": "tab:green", "rare": "tab:orange", "other": "#dddddd"}
# Voita §5.2: nsubj, dobj, amod, advmod; UD v2 calls dobj "obj".
RELATIONS = ("nsubj", "obj", "amod", "advmod")
ALIASES = {"dobj": "obj"}
DIRECTIONS = ("head->dep", "dep->head")
POSITIONAL_SHARE = 0.9  # Voita §5.1: "at least 90% of the time"
SYNTACTIC_MARGIN = 0.1  # Voita §5.2.1: "at least 10% higher than the baseline"
RARE_SHARE = 0.5  # ours: the paper reports 66 % for its rare-word head (§5.3), no threshold
RARE_TOP = 500  # Voita §5.3: the least frequent token "is not in the top-500 most frequent tokens"
THRESHOLDS = {"positional_share": POSITIONAL_SHARE, "syntactic_margin": SYNTACTIC_MARGIN, "rare_share": RARE_SHARE}
KEPT_KEYS = ("importance",)  # written by another command into the same file; a re-run keeps it
_EPS = 1e-9


def syntactic_keys() -> List[str]:
    """``REL:head->dep`` and ``REL:dep->head`` for each of :data:`RELATIONS`."""
    return [f"{r}:{d}" for r in RELATIONS for d in DIRECTIONS]


def read_counts(path: str) -> Dict[str, int]:
    """A fairseq dictionary file (``symbol count`` a line, an optional
    ``#fairseq:overwrite`` flag) as {symbol: count}; RecordError (one line)
    for a missing file or a malformed line."""
    counts: Dict[str, int] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                parts = line.rstrip("\r\n").split(" ")
                if parts and parts[-1].startswith("#fairseq:"):
                    parts = parts[:-1]
                if len(parts) < 2 or not parts[-1].isdigit() or not " ".join(parts[:-1]):
                    raise RecordError(f"{path}: line {n}: expected 'symbol count' (a fairseq dictionary file)")
                counts[" ".join(parts[:-1])] = int(parts[-1])
    except OSError as e:
        raise RecordError(f"cannot read the counts file '{path}': {e.strerror or e}") from None
    if not counts:
        raise RecordError(f"{path}: no counts (a fairseq dictionary file has 'symbol count' lines)")
    return counts


def rank_of(counts: Iterable[int]) -> Callable[[int], int]:
    """A function count -> frequency rank among ``counts``: the number of
    symbols with a strictly larger count (0 for the most frequent)."""
    ascending = sorted(int(c) for c in counts)
    return lambda c: len(ascending) - bisect.bisect_right(ascending, c)


def _int_list(record: dict, key: str, length: int) -> List[int]:
    value = record[key]
    if not isinstance(value, (list, tuple)) or len(value) != length or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        raise RecordError(f"'{key}' must be a list of {length} integers")
    return list(value)


def _instances(record: dict, real: Tensor) -> Dict[str, List[Tuple[int, List[int]]]]:
    """{key: [(query token, partner tokens)]} of a record's relations, in token
    positions: the query word's first token, every token of its partner."""
    out: Dict[str, List[Tuple[int, List[int]]]] = {k: [] for k in syntactic_keys()}
    if "heads" not in record or "relations" not in record:
        return out
    words = len(record["words"])
    rels = record["relations"]
    if not isinstance(rels, (list, tuple)) or len(rels) != words or not all(isinstance(r, str) for r in rels):
        raise RecordError(f"'relations' must be a list of {words} strings")
    tokens: List[List[int]] = [[] for _ in range(words)]
    for t, w in enumerate(record["word_ids"]):
        if w >= 0 and real[t]:
            tokens[w].append(t)
    for d, (h, rel) in enumerate(zip(record["heads"], rels)):
        rel = ALIASES.get(rel, rel)
        if rel not in RELATIONS or h < 0 or not tokens[d] or not tokens[h]:
            continue
        out[f"{rel}:head->dep"].append((tokens[h][0], tokens[d]))
        out[f"{rel}:dep->head"].append((tokens[d][0], tokens[h]))
    return out


def _best_offset(hist: Tensor, radius: int) -> Tuple[Tensor, Tensor]:
    """Per head the offset with the most rows (ties: the smallest |offset|,
    then the negative one) and its count, from ``hist`` (L, H, 2R+1)."""
    offsets = torch.arange(-radius, radius + 1)
    order = sorted(range(len(offsets)), key=lambda k: (abs(int(offsets[k])), int(offsets[k])))
    perm = torch.tensor(order, dtype=torch.long)
    j = hist[..., perm].argmax(-1)
    return offsets[perm][j], hist[..., perm].gather(-1, j[..., None]).squeeze(-1)


def _grid(values: Tensor, defined: Tensor, cast=float) -> List[List]:
    """(L, H) values as nested lists, None where not ``defined``."""
    return [[cast(v) if ok else None for v, ok in zip(vs.tolist(), oks.tolist())]
            for vs, oks in zip(values, defined)]


class _Stats:
    """Running (L, H) sums of every statistic."""

    def __init__(self, layers: int, heads: int) -> None:
        def z(dtype: torch.dtype = torch.long) -> Tensor:
            return torch.zeros(layers, heads, dtype=dtype)

        self.shape = (layers, heads)
        self.conf, self.rows = z(torch.float64), z()
        self.radius, self.hist = 0, torch.zeros(layers, heads, 1, dtype=torch.long)
        self.correct = {k: z() for k in syntactic_keys()}
        self.offsets: Dict[str, Dict[int, int]] = {k: {} for k in syntactic_keys()}
        self.instances = {k: 0 for k in syntactic_keys()}
        self.rare_hits, self.rare_seen = z(), z()
        self.rare_sentences = 0

    def add_offsets(self, offsets: Tensor, valid: Tensor, radius: int) -> None:
        if radius > self.radius:
            pad = radius - self.radius
            self.hist = torch.nn.functional.pad(self.hist, (pad, pad))
            self.radius = radius
        self.hist.scatter_add_(-1, offsets + self.radius, valid.long())


def _sentence(stats: _Stats, record: dict, T: int, counts: Optional[Tuple[Dict[str, int], Callable[[int], int]]],
              rare_top: int) -> None:
    """Add one validated record of T tokens to ``stats``."""
    word_ids = torch.tensor(record["word_ids"], dtype=torch.long)
    real = word_ids >= 0
    pos = real.nonzero().flatten()  # (n,) token positions of the real tokens
    if pos.numel() == 0:
        return
    attn = record["attn"].detach().float()
    a = attn.index_select(2, pos).index_select(3, pos)  # (L, H, n, n), specials out
    idx = a.argmax(-1)  # (L, H, n) first maximum
    top = a.gather(-1, idx[..., None]).squeeze(-1)
    valid = top > 0  # a row with no weight on a real key has no maximum
    stats.conf += torch.where(valid, top.double(), torch.zeros_like(top, dtype=torch.float64)).sum(-1)
    stats.rows += valid.sum(-1)
    stats.add_offsets(pos[idx] - pos[None, None, :], valid, T - 1)
    # syntactic: instances in positions; argmax compared in real-token coordinates
    where = torch.full((T,), -1, dtype=torch.long)
    where[pos] = torch.arange(len(pos))
    for key, found in _instances(record, real).items():
        if not found:
            continue
        q = torch.tensor([where[t] for t, _ in found])
        partner = torch.zeros(len(found), len(pos), dtype=torch.bool)
        for k, (t, partners) in enumerate(found):
            partner[k, where[torch.tensor(partners)]] = True
            for o in {p - t for p in partners}:
                stats.offsets[key][o] = stats.offsets[key].get(o, 0) + 1
        hit = partner[torch.arange(len(found)), idx[..., q]] & valid[..., q]  # (L, H, k); no maximum: a miss
        stats.correct[key] += hit.sum(-1)
        stats.instances[key] += len(found)
    # rare words
    if counts is not None:
        table, rank = counts
        c = torch.tensor([table.get(t, 0) for t in record["tokens"]], dtype=torch.long)[pos]
        ranks = [rank(int(v)) for v in c]
    elif "counts" in record:
        c = torch.tensor(_int_list(record, "counts", T))[pos]
        ranks = _int_list(record, "ranks", T) if "ranks" in record else None
        if ranks is None and rare_top > 0:
            raise RecordError("'counts' without 'ranks': the top-k filter of Voita §5.3 needs ranks (or rare_top=0)")
        ranks = None if ranks is None else [ranks[int(p)] for p in pos]
    else:
        return
    rarest = c == c.min()
    if rare_top > 0 and min(r for r, m in zip(ranks, rarest.tolist()) if m) < rare_top:
        return  # the least frequent token is among the rare_top most frequent
    stats.rare_sentences += 1
    votes = torch.zeros_like(a[..., 0], dtype=torch.long).scatter_add_(-1, idx, valid.long())  # (L, H, n)
    most = votes.max(-1, keepdim=True).values
    single = (votes == most).sum(-1) == 1
    pointed = votes.argmax(-1)
    seen = valid.any(-1)
    stats.rare_hits += (seen & single & rarest[pointed]).long()
    stats.rare_seen += seen.long()


def head_roles(records: Sequence[dict], counts: Optional[Dict[str, int]] = None, progress: bool = False,
               rare_top: int = RARE_TOP) -> dict:
    """Voita et al.'s statistics of every head, over the records of a dump.

    Args:
        records: sentence records (``tokens``, ``word_ids``, ``words``, ``attn``
            (L, H, T, T); optional ``heads`` and ``relations`` (gold syntax),
            ``counts`` and ``ranks`` (each token's count in the training data
            and its frequency rank)), all with the same L and H.
        counts: {token: count} (e.g. :func:`read_counts`), used instead of the
            records' ``counts``; a token it lacks counts 0.
        progress: a tqdm progress bar.
        rare_top: keep for the rare-word share only sentences whose least
            frequent token is not among the ``rare_top`` most frequent (0: all).

    Returns:
        The ``roles.json`` object: ``confidence``, ``positional_offset``,
        ``positional_share``, ``rare_share`` and ``rows`` (rows counted) as
        lists per layer of one value per head (None where undefined);
        ``syntactic`` {key: {"accuracy", "baseline", "baseline_offset",
        "instances"}}; ``sentences``, ``rare_sentences``, ``thresholds`` and
        ``roles`` (:func:`classify`).

    Raises:
        RecordError: no records, or a malformed one (the message names it).
    """
    stats: Optional[_Stats] = None
    table = None if counts is None else (counts, rank_of(counts.values()))
    total = len(records) if hasattr(records, "__len__") else None
    n = 0
    for k, record in enumerate(tqdm(records, total=total, disable=not progress, desc="roles", unit="sentence")):
        try:
            if isinstance(record, dict) and "attn" not in record:
                raise RecordError("missing key 'attn'")
            T = record_length(record)
            shape = tuple(record["attn"].shape[:2])
            if stats is None:
                stats = _Stats(*shape)
            elif shape != stats.shape:
                raise RecordError(f"'attn' has {shape[0]} layers x {shape[1]} heads, expected "
                                  f"{stats.shape[0]} x {stats.shape[1]} as in the first record")
            _sentence(stats, record, T, table, rare_top)
        except RecordError as e:
            raise RecordError(f"record {k}: {e}") from None
        n += 1
    if stats is None:
        raise RecordError("no records")
    rows = stats.rows
    offset, best = _best_offset(stats.hist, stats.radius)
    result = {
        "confidence": _grid(stats.conf / rows.clamp(min=1), rows > 0),
        "positional_offset": _grid(offset, rows > 0, int),
        "positional_share": _grid(best.double() / rows.clamp(min=1), rows > 0),
        "syntactic": {},
        "rare_share": _grid(stats.rare_hits.double() / stats.rare_seen.clamp(min=1), stats.rare_seen > 0),
        "rows": _grid(rows, torch.ones_like(rows, dtype=torch.bool), int),
        "sentences": n,
        "rare_sentences": stats.rare_sentences,
        "rare_top": rare_top,
        "thresholds": dict(THRESHOLDS),
    }
    for key in syntactic_keys():
        found = stats.instances[key]
        base = max(stats.offsets[key].items(), key=lambda kv: (kv[1], -abs(kv[0]), -kv[0])) if found else None
        result["syntactic"][key] = {
            "accuracy": _grid(stats.correct[key].double() / max(found, 1), torch.full(stats.shape, found > 0)),
            "baseline": None if base is None else base[1] / found,
            "baseline_offset": None if base is None else base[0],
            "instances": found,
        }
    result["roles"] = classify(result)
    return result


def best_relation(roles: dict, layer: int, head: int) -> Optional[Tuple[str, float, float]]:
    """(key, accuracy, baseline) of the relation where the head's accuracy
    exceeds the baseline most, or None without syntactic scores."""
    best = None
    for key, s in roles.get("syntactic", {}).items():
        acc = s["accuracy"][layer][head]
        if acc is None or s["baseline"] is None:
            continue
        if best is None or acc - s["baseline"] > best[1] - best[2]:
            best = (key, acc, s["baseline"])
    return best


def classify(roles: dict) -> List[List[str]]:
    """One role of :data:`ROLES` per layer and head of a :func:`head_roles`
    result, the first that applies: positional (share >= 0.9, Voita §5.1),
    syntactic (accuracy >= baseline + 0.1 on some relation and direction,
    §5.2.1), rare (rare share >= 0.5, §5.3), else other.  The thresholds are
    the result's ``thresholds`` (default :data:`THRESHOLDS`)."""
    t = dict(THRESHOLDS, **roles.get("thresholds", {}))
    out = []
    for layer, shares in enumerate(roles["positional_share"]):
        row = []
        for head, share in enumerate(shares):
            best = best_relation(roles, layer, head)
            rare = roles["rare_share"][layer][head]
            if share is not None and share >= t["positional_share"] - _EPS:
                row.append("positional")
            elif best is not None and best[1] - best[2] >= t["syntactic_margin"] - _EPS:
                row.append("syntactic")
            elif rare is not None and rare >= t["rare_share"] - _EPS:
                row.append("rare")
            else:
                row.append("other")
        out.append(row)
    return out
