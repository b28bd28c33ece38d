"""Build small extraction files with the exact layout of :mod:`uaprobe.extraction.store`, for tests and the benchmark.

Two kinds of content:

- ``random``: Gaussian states around a shared direction (realistic positive cosines), random NLLs.
- ``planted``: per layer, the uniformities are exact: within a category, the side-S statements are
  ``sqrt(c) e_0 + sqrt(1 - c) e_i`` (orthonormal e_i), so every pairwise cosine is exactly ``c`` and
  U(S) = c. With ``c_A - c_B = slope[layer] * pref_c`` the category-level UA is a known linear
  function of the preference: r = sign(slope[layer]) exactly, and UA is known to rounding.
  Anisotropy tokens get a planted variance concentration peaking at ``bell_layer``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import h5py
import numpy as np
import yaml

STR = h5py.string_dtype("utf-8")
REPO = Path(__file__).resolve().parents[1]

CATEGORIES = ("ground_truth_numeric", "ground_truth_nonnumeric", "tech_philosophy", "lifestyle",
              "business", "scientific_facts")
"""The six categories of the dataset."""
CONTROL_CATEGORIES = ("neutral", "political")
"""The two categories of the control pairs (data/neutral_control.json)."""
PAIRS_PER_CATEGORY = (7, 6, 8, 6, 7, 6)
SYNTHETIC_MODELS: dict[str, dict[str, Any]] = {
    "tiny-a": {"display": "Tiny-A", "n_layers": 6, "params_millions": 1.5, "hidden": 16, "kind": "random",
               "bos_added": False},
    "tiny-b": {"display": "Tiny-B", "n_layers": 4, "params_millions": 3.0, "hidden": 12, "kind": "planted",
               "bos_added": True},
}
"""The synthetic panel of the figure, schema and manuscript tests: one random, one planted model."""
EXTRACTION = {"model_id": "s", "display": "S", "source": "local", "location": "here", "revision": "",
              "dtype": "float32", "pooling_drop": "special", "dataset_sha256": "0", "prompts_sha256": "0",
              "uaprobe_version": "0", "bos_added": True}
"""The provenance attributes of an extraction, for results files built in a test."""


def results_header(*, n_layers: int, params: Any) -> dict[str, Any]:
    """The keys a results file of model ``s`` with ``n_layers`` layers starts with, under ``params``."""
    from uaprobe.analysis.run.documents import header

    return header(model_id="s", display="S", n_layers=n_layers, params=params, attrs=EXTRACTION)


def synthetic_params(models: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """The project's params.yaml with a catalog of synthetic models and small analysis settings."""
    models = SYNTHETIC_MODELS if models is None else models
    params = yaml.safe_load((REPO / "params.yaml").read_text(encoding="utf-8"))
    params["models"] = list(models)
    params["catalog"] = {m: {"display": s["display"], "source": "local", "location": f"/models/{m}",
                             "params_millions": s["params_millions"]} for m, s in models.items()}
    params["analysis"].update(bootstrap_resamples=1000, permutations=1000)
    params["analysis"]["bins"].update(k=[3, 4], partitions=10, ci_k=3)
    params["analysis"]["robustness"].update(lexical_seeds=2, null_partitions=50, anisotropy_bootstrap=20)
    return params


def category_preferences(n_categories: int) -> np.ndarray:
    """Distinct, non-constant category preferences used by the planted files."""
    return np.linspace(-1.0, 1.5, n_categories)


def pair_offsets(n: int) -> np.ndarray:
    """Within-category preference offsets summing to zero."""
    if n == 1:
        return np.zeros(1)
    d = np.linspace(-0.3, 0.3, n)
    return d - d.mean()


def hand_tokens(texts: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """A hand-built tokenizer: a BOS (id 0, special) and one id per whitespace-separated word, ids
    assigned in order of the sorted vocabulary (from 1). Returns the extraction file's flat
    ``tokens/ids``, ``tokens/offsets`` and ``tokens/special``."""
    vocab = {w: i + 1 for i, w in enumerate(sorted({w for t in texts for w in t.split()}))}
    rows = [[0] + [vocab[w] for w in t.split()] for t in texts]
    offsets = np.concatenate([[0], np.cumsum([len(r) for r in rows])]).astype(np.int64)
    ids = np.array([i for r in rows for i in r], dtype=np.int32)
    special = np.array([j == 0 for r in rows for j in range(len(r))], dtype=bool)
    return ids, offsets, special


def build_arrays(*, pairs_per_category: Sequence[int], n_layers: int, hidden: int, seed: int, kind: str,
                 slopes: Sequence[float] | None, n_prompts: int, tokens_per_prompt: int,
                 bell_layer: int | None, category_names: Sequence[str] | None = None) -> dict[str, np.ndarray | list[str]]:
    rng = np.random.default_rng(seed)
    n_cat = len(pairs_per_category)
    categories, texts, pair_idx, side = [], [], [], []
    p = 0
    # the dataset's names by default (analysis.primary.left_out names one of them)
    names = (list(category_names) if category_names is not None else list(CATEGORIES[:n_cat]) if n_cat <= len(CATEGORIES)
             else [f"cat{c}" for c in range(n_cat)])
    for c, n in enumerate(pairs_per_category):
        for j in range(n):
            for s in (0, 1):
                categories.append(names[c])
                texts.append(f"category {c} pair {j} side {'AB'[s]}")
                pair_idx.append(p)
                side.append(s)
            p += 1
    n_rows = len(texts)
    cat_code = np.array([names.index(c) for c in categories])
    side = np.array(side)
    pair_arr = np.array(pair_idx)
    L1 = n_layers + 1
    cat_pref = category_preferences(n_cat)
    pref_pair = np.concatenate([cat_pref[c] + pair_offsets(n) for c, n in enumerate(pairs_per_category)])
    if kind == "planted":
        if slopes is None:
            slopes = np.linspace(0.08, -0.08, L1)
        slopes = np.asarray(slopes, dtype=float)
        if hidden < 1 + max(pairs_per_category):
            raise ValueError("planted files need hidden >= 1 + the largest category")
        pooled = np.zeros((n_rows, L1, hidden), dtype=np.float64)
        for layer in range(L1):
            for c, n in enumerate(pairs_per_category):
                # c_A - c_B = slope * pref_c, centred on 0.5
                delta = slopes[layer] * cat_pref[c]
                for s, cos in ((0, 0.5 + delta / 2), (1, 0.5 - delta / 2)):
                    rows = np.flatnonzero((cat_code == c) & (side == s))
                    for i, row in enumerate(rows):
                        v = np.zeros(hidden)
                        v[0] = np.sqrt(cos)
                        v[1 + i] = np.sqrt(1.0 - cos)
                        pooled[row, layer] = v * (1.0 + 0.5 * layer)  # scale is irrelevant to cosines
        pooled = pooled.astype(np.float32)
        pooled_all = {"mean": pooled, "last": pooled.copy(), "first": pooled.copy()}
    else:
        shared = rng.standard_normal(hidden)
        pooled_all = {}
        for name in ("mean", "last", "first"):
            base = rng.standard_normal((n_rows, L1, hidden))
            pooled_all[name] = (base + 1.5 * shared).astype(np.float32)
    prenorm = {k: (v[:, -1, :] * 1.7 + 0.01).astype(np.float32) for k, v in pooled_all.items()}
    nll_a = 2.0 + rng.uniform(0, 0.5, size=len(pref_pair))
    nll_mean = np.empty(n_rows)
    nll_mean[side == 0] = nll_a if kind == "planted" else rng.uniform(1.5, 4.0, size=len(pref_pair))
    nll_mean[side == 1] = (nll_a + pref_pair) if kind == "planted" else rng.uniform(1.5, 4.0, size=len(pref_pair))
    n_tokens = rng.integers(3, 12, size=n_rows).astype(np.int32)
    nll_sum = nll_mean * n_tokens
    # anisotropy prompts
    prompts = [f"prompt number {i}" for i in range(n_prompts)]
    T = n_prompts * tokens_per_prompt
    special = np.zeros(T, dtype=bool)
    special[::tokens_per_prompt] = True  # a BOS per prompt
    prompt_index = np.repeat(np.arange(n_prompts), tokens_per_prompt).astype(np.int32)
    if bell_layer is None:
        bell_layer = n_layers // 2
    amp = 0.5 + 3.0 * np.exp(-0.5 * ((np.arange(L1) - bell_layer) / max(1.0, n_layers / 4)) ** 2)
    z = rng.standard_normal(T)
    noise = rng.standard_normal((T, L1, hidden)) * 0.3
    states = noise + amp[None, :, None] * z[:, None, None] * np.eye(hidden)[0][None, None, :]
    states += 2.0 * np.eye(hidden)[-1][None, None, :]  # a non-zero mean
    # the sink-excluded policy: the planted geometry unchanged (known answers hold for both policies)
    if kind == "planted":
        pooled_sx = {k: v.copy() for k, v in pooled_all.items()}
    else:
        pooled_sx = {k: (v + 0.5 * rng.standard_normal(v.shape)).astype(np.float32) for k, v in pooled_all.items()}
    prenorm_sx = {k: (v[:, -1, :] * 1.3 - 0.02).astype(np.float32) for k, v in pooled_sx.items()}
    sink_norm = rng.uniform(1.0, 3.0, size=(n_rows, L1)) * (1.0 + 100.0 * (np.arange(L1) >= L1 // 2))
    ids, offsets, tok_special = hand_tokens(texts)
    return {
        "text": texts, "category": categories, "pair": pair_arr.astype(np.int32), "side": side.astype(np.int8),
        **{f"pooled/{k}": v for k, v in pooled_all.items()},
        **{f"prenorm/{k}": v for k, v in prenorm.items()},
        **{f"pooled_sink_excluded/{k}": v for k, v in pooled_sx.items()},
        **{f"prenorm_sink_excluded/{k}": v for k, v in prenorm_sx.items()},
        "n_content_sink_excluded": (n_tokens - 1).astype(np.int32),
        "sink/norm": sink_norm, "sink/norm_ratio": sink_norm / 1.5,
        "sink/mean_share": np.clip(sink_norm / 400.0, 0.0, 1.0),
        "sink/top_dim": np.full((n_rows, L1), hidden - 1, dtype=np.int32),
        "sink/top_dim_share": np.clip(sink_norm / 350.0, 0.0, 1.0),
        "tokens/ids": ids, "tokens/offsets": offsets, "tokens/special": tok_special,
        "nll/mean": nll_mean, "nll/sum": nll_sum, "n_tokens": n_tokens, "n_content": n_tokens.copy(),
        "anisotropy/prompt": prompts, "anisotropy/states": states.astype(np.float32),
        "anisotropy/prompt_index": prompt_index, "anisotropy/special": special,
    }


def write_synthetic_h5(path: str | Path, *, pairs_per_category: Sequence[int] = (6, 5, 7, 6), n_layers: int = 6,
                       hidden: int = 16, seed: int = 0, kind: str = "random", slopes: Sequence[float] | None = None,
                       pooling_drop: str = "special", n_prompts: int = 4, tokens_per_prompt: int = 6,
                       bell_layer: int | None = None, model_id: str = "synthetic", display: str | None = None,
                       category_names: Sequence[str] | None = None, bos_added: bool = True) -> Path:
    """Write a complete extraction file at ``path`` (layout of :mod:`uaprobe.extraction.store`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = build_arrays(pairs_per_category=pairs_per_category, n_layers=n_layers, hidden=hidden, seed=seed,
                          kind=kind, slopes=slopes, n_prompts=n_prompts, tokens_per_prompt=tokens_per_prompt,
                          bell_layer=bell_layer, category_names=category_names)
    with h5py.File(path, "w", track_order=False) as fh:
        st = fh.create_group("statements")
        st.create_dataset("text", data=arrays["text"], dtype=STR, track_times=False)
        st.create_dataset("category", data=arrays["category"], dtype=STR, track_times=False)
        st.create_dataset("pair", data=arrays["pair"], track_times=False)
        st.create_dataset("side", data=arrays["side"], track_times=False)
        for name, values in arrays.items():
            if "/" in name and not name.startswith(("anisotropy/", "statements/")):
                fh.create_dataset(name, data=values, track_times=False)
        for name in ("n_tokens", "n_content", "n_content_sink_excluded"):
            fh.create_dataset(name, data=arrays[name], track_times=False)
        fh.create_dataset("anisotropy/prompt", data=arrays["anisotropy/prompt"], dtype=STR, track_times=False)
        fh.create_dataset("anisotropy/states", data=arrays["anisotropy/states"], track_times=False)
        fh.create_dataset("anisotropy/prompt_index", data=arrays["anisotropy/prompt_index"], track_times=False)
        fh.create_dataset("anisotropy/special", data=arrays["anisotropy/special"], track_times=False)
        attrs = {
            "model_id": model_id, "display": display or f"Synthetic-{model_id}", "source": "synthetic",
            "location": "tests",
            "revision": "", "dtype": "float32", "device": "cpu", "pooling_drop": pooling_drop,
            "dataset_sha256": "0" * 64, "prompts_sha256": "0" * 64, "uaprobe_version": "test",
            "torch_version": "", "transformers_version": "", "n_layers": n_layers, "hidden_size": hidden,
            "bos_added": bos_added, "complete": True,
        }
        for key in sorted(attrs):
            fh.attrs[key] = attrs[key]
    return path
