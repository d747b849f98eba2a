"""One server's queue in numpy: ops that take it in turn, as a max-plus scan."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt


def one_after_another(
    group: npt.NDArray[np.int64],
    begin: npt.NDArray[np.int64],
    end: npt.NDArray[np.int64],
    grain: npt.NDArray[np.int64],
) -> npt.NDArray[np.int64]:
    """Ends of ops that one server takes in turn (adds into an accumulator, transfers on a
    link): within each ``group``, in order of ``begin`` (ties by index), each ends no
    earlier than ``grain`` after the one before it ended (a max-plus scan per group)."""
    order = np.lexsort((np.arange(len(group)), begin, group))
    g, e, w = group[order], end[order], grain[order]
    new = np.r_[True, g[1:] != g[:-1]]
    csum = np.cumsum(w)
    lead = np.flatnonzero(new)
    seg = np.cumsum(new) - 1
    acc = csum - (csum[lead] - w[lead])[seg]  # grains so far in the group, this one included
    v = e - acc
    shift = (int(v.max()) - int(v.min()) + 1) * seg
    out = np.empty_like(end)
    out[order] = np.maximum.accumulate(v + shift) - shift + acc
    return out


def distinct(values: npt.NDArray[np.int64]) -> npt.NDArray[np.int64]:
    """The sorted distinct values of an integer array, ``np.unique(values)``, by one sort:
    numpy 2.4's ``np.unique`` hashes integer arrays first, which took 6.5 s on 5 M random
    int64 where the sort takes 0.33 s (and 1.7 s against 0.02 s on the nearly sorted keys
    of :func:`sim.collectives.compile`)."""
    s = np.sort(values)
    if not len(s):
        return s
    return s[np.r_[True, s[1:] != s[:-1]]]
