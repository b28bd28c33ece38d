"""Build small real models for tests: random weights from a config, a BPE tokenizer trained on the data."""

from __future__ import annotations

import json
from pathlib import Path

import torch

REPO = Path(__file__).resolve().parents[1]
EOS = "<|endoftext|>"


def dataset_texts() -> list[str]:
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    return [text for body in raw.values() for pair in body["pairs"] for text in pair]


def small_dataset(pairs_per_category: int = 3) -> dict:
    """The first pairs of three categories of the real dataset."""
    raw = json.loads((REPO / "data" / "dataset.json").read_text(encoding="utf-8"))
    out = {}
    for name in list(raw)[:3]:
        out[name] = {"description": raw[name]["description"], "pairs": raw[name]["pairs"][:pairs_per_category]}
    return out


def build_tokenizer(directory: Path, *, bos: bool):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=512, special_tokens=[EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(dataset_texts(), trainer)
    if bos:
        tok.post_processor = processors.TemplateProcessing(single=f"{EOS} $A", special_tokens=[(EOS, 0)])
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token=EOS, bos_token=EOS)
    fast.save_pretrained(directory)
    return fast


def build_tiny_neox(directory: Path, *, bos: bool, layers: int = 3) -> Path:
    """A GPT-NeoX with random weights (seed 0), saved with save_pretrained(); Pythia has no pad token."""
    from transformers import GPTNeoXConfig, GPTNeoXForCausalLM

    tokenizer = build_tokenizer(directory, bos=bos)
    config = GPTNeoXConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=layers,
                           num_attention_heads=4, intermediate_size=64, max_position_embeddings=128,
                           bos_token_id=0, eos_token_id=0)
    torch.manual_seed(0)
    model = GPTNeoXForCausalLM(config)
    model.save_pretrained(directory)
    return directory


def load_tiny(directory: Path):
    """A saved tiny model and its tokenizer, loaded on the CPU as the extract stage loads them."""
    from uaprobe.config import ModelSpec
    from uaprobe.extraction.models import load_model
    from uaprobe.extraction.tokens import prepare_tokenizer

    spec = ModelSpec(display="tiny", source="local", location=str(directory))
    model, tokenizer, _source, _dtype = load_model(spec, "tiny", device=torch.device("cpu"))
    return model, prepare_tokenizer(tokenizer)
