"""Worked-example fixtures for the lookup tests (the embedding reference document's traces).

The worked example fixes only parts of its [V=8, d=3] table: E[1] and E[4] (the
gathered rows), the PAD row, and two bag sums, which pin E[6]+E[2] = [-1, 3, 1.5] and
E[5]+E[2] = [0.5, 0.5, 2]. We choose E[2] = [0, 0.5, 1] and derive E[5], E[6];
E[3], E[7] are free. The bridge P [3, 5] is pinned by E[1] @ P and E[4] @ P up to
its middle row, which we set to e_1.
"""

from __future__ import annotations

import numpy as np

SPEC_IDS = [[1, 4, 6, 2], [1, 5, 2, 0]]  # [B=2, L=4], pad_id = 0

SPEC_TABLE = np.array(
    [
        [0.0, 0.0, 0.0],  # 0 PAD
        [1.0, 0.0, 1.0],  # 1 (given)
        [0.0, 0.5, 1.0],  # 2 (chosen)
        [3.0, 1.0, -2.0],  # 3 (free)
        [2.0, 0.0, -1.0],  # 4 (given)
        [0.5, 0.0, 1.0],  # 5 = [0.5, 0.5, 2] - E[2]
        [-1.0, 2.5, 0.5],  # 6 = [-1, 3, 1.5] - E[2]
        [1.0, 1.0, 1.0],  # 7 (free)
    ]
)

SPEC_BRIDGE = np.array(  # P: [d_embed=3, d_model=5]
    [
        [1.0, 0.0, 0.5, 0.0, -1.0],
        [0.0, 1.0, 0.0, 0.0, 0.0],
        [0.5, 0.0, 1.0, -0.5, 0.0],
    ]
)

# Duplicate-id trace: two origin ranks, V=8, d=3, padding_idx=0
RANK_IDS = [[1, 4, 1, 0], [4, 6, 1, 4]]
RANK_GRADS = [
    [[1, 0, 1], [0, 2, 0], [3, 1, 0], [9, 9, 9]],
    [[2, 0, 1], [0, 1, 3], [1, 2, 1], [4, 1, 0]],
]

# max_norm trace: a [5, 4] table, max_norm=2 on ids [1, 2, 1, 0]; PAD row 0 nonzero on purpose.
NORM_TABLE = np.array(
    [
        [0.5, 0.5, 0.5, 0.5],  # norm 1: selected, unchanged
        [3.0, 4.0, 0.0, 0.0],  # norm 5: selected, -> [1.2, 1.6, 0, 0]
        [0.0, 0.0, 0.6, 0.8],  # norm 1: selected, unchanged
        [6.0, 8.0, 0.0, 0.0],  # norm 10: not selected, unchanged
        [0.0, 5.0, 0.0, 0.0],  # norm 5: not selected, unchanged
    ]
)
NORM_IDS = [1, 2, 1, 0]

# Tied-head trace: V=4, H=3
TIED_IDS = [1, 3, 1]
TIED_GRAD_X = [[1, 0, 1], [0, 2, 1], [2, 1, 0]]
TIED_CONTEXTS = [[1, 2, -1], [0, 1, 2]]
TIED_RESIDUAL = [[0.1, -0.4, 0.2, 0.1], [-0.2, 0.1, -0.3, 0.4]]
TIED_TOTAL = [[0.1, 0.0, -0.5], [2.6, 0.3, 1.6], [0.2, 0.1, -0.8], [0.1, 2.6, 1.7]]

# Three-row learning step: lookup, tied and untied scores, one SGD step
LECTURE_TABLE = np.array([[1.0, 0.0], [2.0, 0.0], [0.0, 1.0]])
LECTURE_IDS = [0, 2, 0]
