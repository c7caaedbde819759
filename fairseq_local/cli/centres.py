"""``fairseq-local analyze table DIR... --centres FILE.png``: the centres of
mass per layer of several ``analyze hta`` results in one figure, one colour per
model (Pascual et al. Fig. 4, one line per language), attention solid and input
contribution dashed (Fig. 5).

Each DIR is an analysis folder, as for the table; the ones holding
``hta.json`` are drawn, labelled as their table row.  A folder without
``hta.json`` is left out (its row in the table has "-"); none with one is a
one-line error."""

import os
from pathlib import Path
from typing import Callable, List, Sequence, Tuple

from .. import outputs
from ..outputs import Output


def folder_label(folder: str) -> str:
    """A folder's name, its parent's when it is called ``analysis`` (as the table's rows)."""
    name = os.path.basename(os.path.normpath(folder))
    return os.path.basename(os.path.dirname(os.path.normpath(folder))) if name == "analysis" else name


def read_hta_results(dirs: Sequence[str]) -> List[Tuple[str, dict]]:
    """``[(label, hta result)]`` of the folders holding ``hta.json``; a file
    that is not an hta result is an InputError naming it."""
    from ..errors import InputError
    from .results import read_json_object

    found = []
    for folder in dirs:
        path = Path(folder) / "hta.json"
        if not path.is_file():
            continue
        obj = read_json_object(path, "result of fairseq-local analyze hta")
        centre = obj.get("attention_centre")
        if not isinstance(centre, list) or not all(v is None or isinstance(v, (int, float)) for v in centre):
            raise InputError(f"'{path}' is not a result of fairseq-local analyze hta: no 'attention_centre' "
                             f"list of numbers per layer")
        contrib = obj.get("contribution_centre")
        if contrib is not None and (not isinstance(contrib, list) or len(contrib) != len(centre)
                                    or not all(v is None or isinstance(v, (int, float)) for v in contrib)):
            raise InputError(f"'{path}': 'contribution_centre' is not a list of {len(centre)} numbers (one a layer)")
        found.append((folder_label(folder), obj))
    if not found:
        raise InputError(f"--centres: none of the {len(dirs)} folder(s) holds an hta.json (run analyze hta first)")
    return found


def centres_writer(path: str, dirs: Sequence[str], force: bool) -> Callable[[], str]:
    """Check the figure's path (a PNG, not an input; without ``force`` not a
    file other than a PNG: OutputError) and read the folders' hta results
    (InputError), before anything is written; returns the function drawing
    the figure into ``path`` (and returning it)."""
    from ..analysis.figures import plot_centres_overlay
    from ..errors import InputError

    if not path.lower().endswith(".png"):
        raise InputError(f"--centres '{path}': the figure is a PNG, give a FILE.png")
    outputs.check_outputs([Output(path, "centres figure", outputs.is_png)],
                          inputs=[os.path.join(d, "hta.json") for d in dirs], force=force)
    results = read_hta_results(dirs)
    return lambda: str(plot_centres_overlay(results, path))
