"""Third-party architectures from Hugging Face transformers, each built from a tiny config.

Random weights from a fixed seed, nothing downloaded. Each family names the model class, a config
small enough to build and run in well under a second, and a batch of inputs (with labels, so the
model computes its own loss). The same family, built twice with the same seed, gives the same
weights: the CPU model is the reference, its deep copy moved to neuron is the model under test.
"""
from __future__ import annotations

import copy
import dataclasses
from typing import Any, Callable

import torch

VOCAB = 97  # prime, so no power-of-two size hides a layout bug


@dataclasses.dataclass(frozen=True)
class Size:
    """How big each family is built: the tests use TINY, bench/models.py larger sizes."""
    hidden: int = 32
    layers: int = 2
    seq: int = 8
    batch: int = 2
    image: int = 32
    vocab: int = VOCAB


TINY = Size()


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    build: Callable[[Size], torch.nn.Module]
    inputs: Callable[[torch.Generator, Size], dict[str, torch.Tensor]]
    generative: bool = False
    # What the family brings that the others do not, so a failure reads as a pointer.
    exercises: str = ""
    # Exceptions the CPU reference may raise for a reason outside this project (a transformers version
    # without a feature the family uses), which skip its tests; any other CPU failure fails them. Every
    # family runs on CPU with the transformers this project tests, so none lists any today.
    cpu_failures: tuple[type[BaseException], ...] = ()

    def model(self, size: Size = TINY) -> torch.nn.Module:
        torch.manual_seed(0)
        return self.build(size).eval()

    def batch(self, device: str | torch.device, size: Size = TINY) -> dict[str, torch.Tensor]:
        g = torch.Generator().manual_seed(1)
        return {k: v.to(device) for k, v in self.inputs(g, size).items()}


def _decoder(s: Size, **extra: Any) -> dict[str, Any]:
    return dict(num_hidden_layers=s.layers, num_attention_heads=4, num_key_value_heads=2, hidden_size=s.hidden,
                intermediate_size=2 * s.hidden, vocab_size=s.vocab, max_position_embeddings=4 * s.seq + 64,
                pad_token_id=0, bos_token_id=1, eos_token_id=2, **extra)


def _tokens(g: torch.Generator, s: Size, length: int | None = None) -> torch.Tensor:
    return torch.randint(3, s.vocab, (s.batch, length or s.seq), generator=g)


def _causal_lm_inputs(g: torch.Generator, s: Size) -> dict[str, torch.Tensor]:
    ids = _tokens(g, s)
    mask = torch.ones_like(ids)
    mask[-1, :2] = 0  # left padding on the last row: the attention mask matters
    return dict(input_ids=ids, attention_mask=mask, labels=ids)


def _gpt2(s: Size) -> torch.nn.Module:
    from transformers import GPT2Config, GPT2LMHeadModel

    return GPT2LMHeadModel(GPT2Config(n_layer=s.layers, n_head=4, n_embd=s.hidden, vocab_size=s.vocab,
                                      n_positions=4 * s.seq + 64, bos_token_id=1, eos_token_id=2, pad_token_id=0))


def _llama(s: Size) -> torch.nn.Module:
    from transformers import LlamaConfig, LlamaForCausalLM

    return LlamaForCausalLM(LlamaConfig(**_decoder(s)))


def _gemma(s: Size) -> torch.nn.Module:
    from transformers import GemmaConfig, GemmaForCausalLM

    return GemmaForCausalLM(GemmaConfig(**_decoder(s, head_dim=s.hidden // 4)))


def _mixtral(s: Size) -> torch.nn.Module:
    from transformers import MixtralConfig, MixtralForCausalLM

    return MixtralForCausalLM(MixtralConfig(**_decoder(s, num_local_experts=4, num_experts_per_tok=2,
                                                       sliding_window=max(4, s.seq // 2))))


def _bert(s: Size) -> torch.nn.Module:
    from transformers import BertConfig, BertForMaskedLM

    return BertForMaskedLM(BertConfig(num_hidden_layers=s.layers, num_attention_heads=4, hidden_size=s.hidden,
                                      intermediate_size=2 * s.hidden, vocab_size=s.vocab,
                                      max_position_embeddings=s.seq + 64))


def _bert_inputs(g: torch.Generator, s: Size) -> dict[str, torch.Tensor]:
    ids = _tokens(g, s)
    labels = torch.full_like(ids, -100)
    labels[:, 2:5] = ids[:, 2:5]  # masked-LM loss on some positions only (ignore_index)
    mask = torch.ones_like(ids)
    mask[0, -3:] = 0
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels)


def _t5(s: Size) -> torch.nn.Module:
    from transformers import T5Config, T5ForConditionalGeneration

    return T5ForConditionalGeneration(T5Config(num_layers=s.layers, num_heads=4, d_model=s.hidden,
                                               d_kv=s.hidden // 4, d_ff=2 * s.hidden, vocab_size=s.vocab,
                                               decoder_start_token_id=0, pad_token_id=0, eos_token_id=1))


def _seq2seq_inputs(g: torch.Generator, s: Size) -> dict[str, torch.Tensor]:
    return dict(input_ids=_tokens(g, s), labels=_tokens(g, s, length=max(5, s.seq // 2)))


def _vit(s: Size) -> torch.nn.Module:
    from transformers import ViTConfig, ViTForImageClassification

    return ViTForImageClassification(ViTConfig(image_size=s.image, patch_size=8, num_hidden_layers=s.layers,
                                               num_attention_heads=4, hidden_size=s.hidden,
                                               intermediate_size=2 * s.hidden, num_labels=5))


def _resnet(s: Size) -> torch.nn.Module:
    from transformers import ResNetConfig, ResNetForImageClassification

    return ResNetForImageClassification(ResNetConfig(embedding_size=s.hidden // 2,
                                                     hidden_sizes=[s.hidden // 2, s.hidden],
                                                     depths=[1, 1] if s.layers <= 2 else [2, 2], num_labels=5))


def _convnext(s: Size) -> torch.nn.Module:
    from transformers import ConvNextConfig, ConvNextForImageClassification

    return ConvNextForImageClassification(ConvNextConfig(num_stages=2, hidden_sizes=[s.hidden // 2, s.hidden],
                                                         depths=[1, 1] if s.layers <= 2 else [2, 2], num_labels=5))


def _image_inputs(g: torch.Generator, s: Size) -> dict[str, torch.Tensor]:
    return dict(pixel_values=torch.randn(s.batch, 3, s.image, s.image, generator=g),
                labels=torch.arange(s.batch) % 5)


def _whisper(s: Size) -> torch.nn.Module:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    return WhisperForConditionalGeneration(WhisperConfig(
        d_model=s.hidden, encoder_layers=s.layers, decoder_layers=s.layers, encoder_attention_heads=4,
        decoder_attention_heads=4, encoder_ffn_dim=2 * s.hidden, decoder_ffn_dim=2 * s.hidden, vocab_size=s.vocab,
        num_mel_bins=16, max_source_positions=4 * s.seq, max_target_positions=4 * s.seq + 32,
        decoder_start_token_id=1, pad_token_id=0, eos_token_id=2, bos_token_id=1,
        begin_suppress_tokens=None, suppress_tokens=None))


def _whisper_inputs(g: torch.Generator, s: Size) -> dict[str, torch.Tensor]:
    # The encoder's two convolutions halve the frames once: 8 * seq frames fill its positions.
    return dict(input_features=torch.randn(s.batch, 16, 8 * s.seq, generator=g),
                labels=_tokens(g, s, length=max(5, s.seq // 2)))


def _wav2vec2(s: Size) -> torch.nn.Module:
    from transformers import Wav2Vec2Config, Wav2Vec2ForCTC

    return Wav2Vec2ForCTC(Wav2Vec2Config(
        hidden_size=s.hidden, num_hidden_layers=s.layers, num_attention_heads=4, intermediate_size=2 * s.hidden,
        conv_dim=(16, 16), conv_stride=(5, 4), conv_kernel=(10, 8), num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4, vocab_size=12, pad_token_id=0, ctc_loss_reduction="mean", layerdrop=0.0,
        mask_time_prob=0.0))


def _wav2vec2_inputs(g: torch.Generator, s: Size) -> dict[str, torch.Tensor]:
    labels = torch.randint(1, 12, (s.batch, 4), generator=g)
    labels[-1, -1] = -100  # a shorter target: CTC with per-sample lengths
    return dict(input_values=torch.randn(s.batch, 200 * s.seq, generator=g), labels=labels)


FAMILIES: dict[str, Family] = {f.name: f for f in [
    Family("gpt2", _gpt2, _causal_lm_inputs, generative=True, exercises="tied LM head, Conv1D, learned positions"),
    Family("llama", _llama, _causal_lm_inputs, generative=True, exercises="rotary, GQA, RMSNorm, SwiGLU"),
    Family("gemma", _gemma, _causal_lm_inputs, generative=True, exercises="tied embeddings, scaled embeddings"),
    Family("mixtral", _mixtral, _causal_lm_inputs, generative=True,
           exercises="MoE routing (topk, histc, index_add), sliding window"),
    Family("bert", _bert, _bert_inputs, exercises="encoder, token types, padding mask, ignore_index"),
    Family("t5", _t5, _seq2seq_inputs, generative=True,
           exercises="encoder-decoder, relative position buckets, cross-attention"),
    Family("vit", _vit, _image_inputs, exercises="patch conv2d, CLS token"),
    Family("resnet", _resnet, _image_inputs, exercises="conv2d, batch norm, max pool"),
    Family("convnext", _convnext, _image_inputs, exercises="depthwise conv, channels-last layer norm"),
    Family("whisper", _whisper, _whisper_inputs, generative=True, exercises="conv1d, encoder-decoder speech"),
    Family("wav2vec2", _wav2vec2, _wav2vec2_inputs, exercises="conv1d feature extractor, group norm, CTC loss"),
]}

GENERATIVE = [name for name, f in FAMILIES.items() if f.generative]


def on_neuron(model: torch.nn.Module) -> torch.nn.Module:
    """A deep copy of `model` on neuron (the CPU model stays the reference)."""
    return copy.deepcopy(model).to("neuron")
