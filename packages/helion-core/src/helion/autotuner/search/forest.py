"""A small random-forest regressor in numpy, the surrogate model of :mod:`.surrogate`.

Trees suit config encodings: they need no feature scaling (block sizes as log2, enums one-hot,
booleans 0/1 all mix freely), they model interactions (``block_size * num_warps`` sweet spots) and
thresholds (too big a tile fails), and the spread of the trees' predictions is a usable measure of
uncertainty.  Training sets are small (tens to a few hundred configs), so a plain exhaustive split
search per node is fast; prediction is vectorised over thousands of candidates.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class _Tree:
    feature: np.ndarray  # int, -1 marks a leaf
    threshold: np.ndarray
    left: np.ndarray
    right: np.ndarray
    value: np.ndarray
    depth: int

    def predict(self, X: np.ndarray) -> np.ndarray:
        node = np.zeros(X.shape[0], dtype=np.int64)
        rows = np.arange(X.shape[0])
        for _ in range(self.depth + 1):
            feature = self.feature[node]
            leaf = feature < 0
            if leaf.all():
                break
            safe_feature = np.where(leaf, 0, feature)
            go_left = X[rows, safe_feature] <= self.threshold[node]
            node = np.where(leaf, node, np.where(go_left, self.left[node], self.right[node]))
        return self.value[node]


def _grow_tree(
    X: np.ndarray,
    y: np.ndarray,
    rng: np.random.Generator,
    *,
    max_depth: int,
    min_samples_leaf: int,
    features_per_split: int,
) -> _Tree:
    feature: list[int] = []
    threshold: list[float] = []
    left: list[int] = []
    right: list[int] = []
    value: list[float] = []

    def new_node(mean: float) -> int:
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        value.append(mean)
        return len(value) - 1

    n_features = X.shape[1]
    deepest = 0
    stack = [(new_node(float(y.mean())), np.arange(len(y)), 0)]
    while stack:
        node, rows, depth = stack.pop()
        deepest = max(deepest, depth)
        ys = y[rows]
        n = len(rows)
        if depth >= max_depth or n < 2 * min_samples_leaf or float(ys.max() - ys.min()) <= 1e-12:
            continue
        chosen = rng.choice(n_features, size=min(features_per_split, n_features), replace=False)
        xs = X[np.ix_(rows, chosen)]
        order = np.argsort(xs, axis=0, kind="stable")
        xs_sorted = np.take_along_axis(xs, order, axis=0)
        ys_sorted = ys[order]
        sums = np.cumsum(ys_sorted, axis=0)[:-1]
        squares = np.cumsum(ys_sorted * ys_sorted, axis=0)[:-1]
        total, total_sq = float(ys.sum()), float((ys * ys).sum())
        n_left = np.arange(1, n, dtype=np.float64)[:, None]
        n_right = n - n_left
        # sum of squared errors of both sides for a split after each sorted position
        sse = (squares - sums * sums / n_left) + (
            (total_sq - squares) - (total - sums) ** 2 / n_right
        )
        valid = (
            (xs_sorted[1:] > xs_sorted[:-1])
            & (n_left >= min_samples_leaf)
            & (n_right >= min_samples_leaf)
        )
        if not valid.any():
            continue
        sse = np.where(valid, sse, np.inf)
        position, column = np.unravel_index(int(np.argmin(sse)), sse.shape)
        parent_sse = total_sq - total * total / n
        if not sse[position, column] < parent_sse - 1e-12:
            continue
        split_feature = int(chosen[column])
        cut = float((xs_sorted[position, column] + xs_sorted[position + 1, column]) / 2.0)
        goes_left = X[rows, split_feature] <= cut
        left_rows, right_rows = rows[goes_left], rows[~goes_left]
        feature[node] = split_feature
        threshold[node] = cut
        left[node] = new_node(float(y[left_rows].mean()))
        right[node] = new_node(float(y[right_rows].mean()))
        stack.append((left[node], left_rows, depth + 1))
        stack.append((right[node], right_rows, depth + 1))
    return _Tree(
        np.asarray(feature, dtype=np.int64),
        np.asarray(threshold, dtype=np.float64),
        np.asarray(left, dtype=np.int64),
        np.asarray(right, dtype=np.int64),
        np.asarray(value, dtype=np.float64),
        deepest,
    )


class RandomForestRegressor:
    """Bagged regression trees; ``predict`` returns the mean and the spread across trees."""

    def __init__(
        self,
        n_trees: int = 32,
        *,
        max_depth: int = 12,
        min_samples_leaf: int = 1,
        feature_fraction: float = 0.6,
        seed: int = 0,
    ) -> None:
        self.n_trees = n_trees
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.feature_fraction = feature_fraction
        self.seed = seed
        self.trees: list[_Tree] = []

    def fit(self, X: np.ndarray, y: np.ndarray) -> RandomForestRegressor:
        X = np.asarray(X, dtype=np.float64)
        y = np.asarray(y, dtype=np.float64)
        if X.ndim != 2 or len(X) != len(y) or len(y) == 0:
            raise ValueError(f"bad training data: X {X.shape}, y {y.shape}")
        rng = np.random.default_rng(self.seed)
        n = len(y)
        per_split = max(1, round(self.feature_fraction * X.shape[1]))
        self.trees = []
        for _ in range(self.n_trees):
            rows = rng.integers(0, n, size=n) if n > 2 else np.arange(n)
            self.trees.append(
                _grow_tree(
                    X[rows],
                    y[rows],
                    rng,
                    max_depth=self.max_depth,
                    min_samples_leaf=self.min_samples_leaf,
                    features_per_split=per_split,
                )
            )
        return self

    def predict(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not self.trees:
            raise RuntimeError("RandomForestRegressor.predict called before fit")
        X = np.asarray(X, dtype=np.float64)
        all_predictions = np.stack([tree.predict(X) for tree in self.trees])
        return all_predictions.mean(axis=0), all_predictions.std(axis=0)
