"""Whole models: AWS's inference tables (single-core encoder and vision latencies, CNN throughput) and its
Trn1 training table (a data-parallel micro-step), beside the cost model.

Source: AWS's performance pages in the Neuron SDK documentation, github:aws-neuron/aws-neuron-sdk at commit
81ce03ae (2026-08-21, the newest in the mirror; the pages say "Last update: Feb 26th, 2026" for Inf2 and
"February 19th, 2026" for Trn1 training): ``about-neuron/benchmarks/{inf2,trn1}/*.csv``, explained by
``inf2-performance.rst``, ``trn1-inference-performance.rst`` and ``trn1-training-performance.rst``.

What the numbers include:
- Latency rows (``latency_data_*.csv``, "Real Time", batch 1): neuronperf's P50 latency of one call of the
  ``torch_neuronx.trace``'d model from Python with host tensors (archive/src/benchmark/pytorch/
  inf2_benchmark.py, resnet_benchmark.py, hf-google-vit_benchmark.py; archive/neuronperf/): the inputs copied
  to the device, one NEFF execution of the whole model on ONE NeuronCore (neuronperf's minimum-latency
  configuration: one model on one core, one worker; the Inf2.xlarge and trn1.2xlarge rows are "Data
  Parallel", one model copy per core), the outputs copied back, and the framework's call path: HOST.
  The models are FP32 compiled with ``--auto-cast matmult`` to BF16 ("Matmult-BF16"): projected in BF16.
- CNN throughput rows (``throughput_data_vision_cnn.csv``, "Batch"): two workers per model keep a core
  busy, so one execution's device time is cores x batch / throughput (Inf2.xlarge: 2 cores); derived (M).
- Training rows (``training_data_*.csv``): throughput per instance of 32 NeuronCores in data parallel;
  one core's micro-step is 32 x microbatch / throughput, and it carries the step's gradient all-reduce and
  optimizer update once per (global batch / (32 x microbatch)) micro-steps: SDK (PyTorch/XLA's loop).

How they are projected: the models are built from their configurations with random weights
(transformers' ``BertConfig()``, ``ViTConfig()``..., no downloads; the ResNets and VGG in plain torch below,
torchvision's layer shapes) in BF16 on the neuron device and **dry-run** (``costmodel.dry_run``: exact shapes,
fake tensors). A traced model is one NEFF compiled by neuronx-cc: the projection is the dry run's program as one
compiled NEFF (``costmodel.compiled_program``: one launch, the kernels back to back, the values the compiler's
fusion keeps in SBUF out of their memory traffic), plus the host<->device copies of the benchmark's FP32/int32
inputs and outputs (``costmodel.copy``). A training micro-step is one graph too. Inf2 has Trn1's
NeuronCore-v2: the inf2 rows are projected on ``trn1``.
"""
from __future__ import annotations

import functools
import math

import torch
from torch import nn

from torchneuron_ext import costmodel

from . import DEVICE, HOST, SDK, Row

SDK_DOCS = "aws-neuron-sdk@81ce03ae about-neuron/benchmarks/"


# --------------------------------------------------------------------------------------------------------
# Plain-torch CNNs (torchvision's layer shapes, no torchvision).
# --------------------------------------------------------------------------------------------------------

class _Bottleneck(nn.Module):
    def __init__(self, cin: int, width: int, stride: int, expansion: int = 4) -> None:
        super().__init__()
        cout = width * expansion
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv3, self.bn3 = nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.down = (nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
                     if stride != 1 or cin != cout else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.down is None else self.down(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.relu(self.bn2(self.conv2(y)))
        return self.relu(self.bn3(self.conv3(y)) + identity)


class _Basic(nn.Module):
    def __init__(self, cin: int, width: int, stride: int, expansion: int = 1) -> None:
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width)
        self.conv2, self.bn2 = nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.down = (nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False), nn.BatchNorm2d(width))
                     if stride != 1 or cin != width else None)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = x if self.down is None else self.down(x)
        y = self.relu(self.bn1(self.conv1(x)))
        return self.relu(self.bn2(self.conv2(y)) + identity)


class ResNet(nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        block, layers, expansion = {18: (_Basic, [2, 2, 2, 2], 1), 34: (_Basic, [3, 4, 6, 3], 1),
                                    50: (_Bottleneck, [3, 4, 6, 3], 4), 101: (_Bottleneck, [3, 4, 23, 3], 4),
                                    152: (_Bottleneck, [3, 8, 36, 3], 4)}[depth]
        self.conv1, self.bn1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64)
        self.relu, self.pool = nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)
        blocks, cin = [], 64
        for i, n in enumerate(layers):
            for j in range(n):
                blocks.append(block(cin, 64 * 2 ** i, 2 if j == 0 and i > 0 else 1, expansion))
                cin = 64 * 2 ** i * expansion
        self.blocks = nn.Sequential(*blocks)
        self.fc = nn.Linear(cin, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.blocks(self.pool(self.relu(self.bn1(self.conv1(x)))))
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(x, 1), 1))


class VGG(nn.Module):
    def __init__(self, depth: int) -> None:
        super().__init__()
        cfg = {11: [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"],
               16: [64, 64, "M", 128, 128, "M", 256, 256, 256, "M", 512, 512, 512, "M", 512, 512, 512, "M"]}[depth]
        layers: list[nn.Module] = []
        cin = 3
        for v in cfg:
            if v == "M":
                layers.append(nn.MaxPool2d(2, 2))
            else:
                layers += [nn.Conv2d(cin, v, 3, padding=1), nn.ReLU(inplace=True)]
                cin = v
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Sequential(nn.Linear(512 * 7 * 7, 4096), nn.ReLU(True), nn.Linear(4096, 4096),
                                        nn.ReLU(True), nn.Linear(4096, 1000))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = nn.functional.adaptive_avg_pool2d(self.features(x), 7)
        return self.classifier(torch.flatten(x, 1))


# --------------------------------------------------------------------------------------------------------
# Projections.
# --------------------------------------------------------------------------------------------------------

def _one_neff_s(build, call, target: str, host_in: tuple = (), host_out: tuple = ()) -> float:
    """One NEFF execution of a traced model: the dry run's program as one compiled NEFF (one launch, its
    kernels back to back with the compiler's fusion: costmodel.compiled_program), and the host<->device copies
    of the benchmark's inputs and outputs (bytes)."""
    r = costmodel.dry_run(call, setup=build, target=target)
    t = costmodel.get_target(target)
    work = costmodel.compiled_program(r, t).work_s
    copies = sum(costmodel.copy("HtoD", n, n, t).duration_s for n in host_in)
    copies += sum(costmodel.copy("DtoH", n, n, t).duration_s for n in host_out)
    return t.launch_s + work + copies


def _on_device(make, no_init: bool = False):
    """Build on the device; `no_init`: without transformers' initialisation (ViT's truncated normal reads
    values, which fake tensors do not have; the weights' values do not matter to the projection)."""
    def build():
        if no_init:  # transformers' own switch for "weights will be loaded": no initialisation
            from transformers.initialization import no_init_weights

            with torch.device("neuron"), no_init_weights():
                return make().to(torch.bfloat16).eval()
        with torch.device("neuron"):
            return make().to(torch.bfloat16).eval()
    return build


def _hf(name: str, **overrides):
    import transformers

    config = getattr(transformers, name + "Config")(**overrides)
    return getattr(transformers, name + "Model")(config)


@functools.lru_cache(maxsize=None)
def encoder_latency_s(family: str, target: str = "trn1", seq: int = 128, **overrides) -> float:
    """AutoModel(torchscript=True) at batch 1: int32 input_ids and attention_mask in, the FP32
    last_hidden_state and pooler output (where the model has one) back."""
    kw = dict(overrides)
    build = _on_device(lambda: _hf(family, **kw))

    def call(model):
        ids = torch.zeros(1, seq, dtype=torch.long, device="neuron")
        with torch.no_grad():
            return model(input_ids=ids, attention_mask=torch.ones_like(ids))

    hidden = kw.get("hidden_size", kw.get("dim", 768))
    pooled = 0 if family in ("DistilBert", "Electra") else hidden  # no pooler
    return _one_neff_s(build, call, target, host_in=(seq * 4, seq * 4), host_out=(seq * hidden * 4, pooled * 4))


@functools.lru_cache(maxsize=None)
def vision_latency_s(model: str, batch: int = 1, target: str = "trn1", host: bool = True) -> float:
    """An image classifier at 224x224: the FP32 images in, 1000 FP32 logits per image back."""
    if model.startswith("resnet"):
        make = functools.partial(ResNet, int(model[6:]))
    elif model.startswith("vgg"):
        make = functools.partial(VGG, int(model[3:]))
    else:  # vit: ViTForImageClassification, google/vit-base-patch16-224's configuration
        import transformers

        make = lambda: transformers.ViTForImageClassification(transformers.ViTConfig(num_labels=1000))  # noqa: E731

    def call(m):
        x = torch.zeros(batch, 3, 224, 224, dtype=torch.bfloat16, device="neuron")
        with torch.no_grad():
            return m(x) if not model.startswith("vit") else m(pixel_values=x)

    io = ((batch * 3 * 224 * 224 * 4,), (batch * 1000 * 4,)) if host else ((), ())
    return _one_neff_s(_on_device(make, model.startswith("vit")), call, target, *io)


@functools.lru_cache(maxsize=None)
def training_micro_step_s(model: str, micro: int, accumulation: int, ranks: int = 32, target: str = "trn1") -> float:
    """One core's data-parallel micro-step: forward and backward of `micro` samples (one NEFF, compiled with
    fusion; its gradients added into the accumulated ones when `accumulation` > 1), plus 1/`accumulation` of
    the step's gradient all-reduce over `ranks` (FP32 gradients) and AdamW update (one NEFF)."""
    import transformers

    if model == "bert-large":  # BertForPreTraining (MLM + NSP heads), sequence 128
        cfg = transformers.BertConfig(hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                      intermediate_size=4096)
        make = lambda: transformers.BertForPreTraining(cfg)  # noqa: E731

        def batch(m):
            ids = torch.zeros(micro, 128, dtype=torch.long, device="neuron")
            out = m(input_ids=ids, attention_mask=torch.ones_like(ids), token_type_ids=torch.zeros_like(ids))
            return out.prediction_logits.float().mean() + out.seq_relationship_logits.float().mean()
    else:  # ViTForImageClassification, ViT-Base at 224x224
        make = lambda: transformers.ViTForImageClassification(transformers.ViTConfig(num_labels=1000))  # noqa: E731

        def batch(m):
            x = torch.zeros(micro, 3, 224, 224, dtype=torch.bfloat16, device="neuron")
            return m(pixel_values=x).logits.float().mean()

    def build():
        return _on_device(make, model != "bert-large")().train()

    def build_accumulating():
        # With gradient accumulation, all but the first micro-step of a step add their gradients into the
        # ones already there (autograd's accumulation: an add per parameter); the first is not charged apart.
        m = build()
        if accumulation > 1:
            for p in m.parameters():
                p.grad = torch.zeros_like(p)
        return m

    def fwd_bwd(m):
        (batch(m) / accumulation).backward()

    t = costmodel.get_target(target)
    # The micro-step is one graph, one NEFF, compiled with the compiler's fusion.
    r = costmodel.dry_run(fwd_bwd, setup=build_accumulating, target=target)
    work = costmodel.compiled_program(r, t).work_s

    def build_opt():
        m = build()
        for p in m.parameters():
            p.grad = torch.zeros_like(p)
        return m, torch.optim.AdamW(m.parameters())

    def step(mo):
        mo[1].step()

    o = costmodel.dry_run(step, setup=build_opt, target=target)
    opt = costmodel.compiled_program(o, t).work_s
    n_params = sum(p.numel() for p in make().parameters())
    allreduce = costmodel.collective("all_reduce", n_params * 4, n_params * 4, ranks, t).duration_s
    return t.launch_s + work + (t.launch_s + opt + allreduce) / accumulation


# --------------------------------------------------------------------------------------------------------
# Rows.
# --------------------------------------------------------------------------------------------------------

_ENC = SDK_DOCS + "trn1/latency_data_encoder.csv, trn1.2xlarge, Neuron {v}, P50 (H)"
_VIS = SDK_DOCS + "inf2/latency_data_vision_{f}.csv, Inf2.xlarge, Neuron 2.21.0, P50 (H)"
_CNN = SDK_DOCS + "inf2/throughput_data_vision_cnn.csv, Inf2.xlarge, Neuron 2.21.0: 2 cores x {b} / {thr}/s (M)"

_CNN_REASON = ("convolutions run at 14-36% of the Tensor Engine peak on hardware (the table's FLOPs over its time "
               "at batch 8); the PE-array lowering with its PSUM evictions charges more: layout transforms, each "
               "tap's window loads and the compiler's schedule are not modelled; at batch 1 the image rows (ViT's "
               "too) are 0.14-0.39 ms under where the encoders, with 1 KB inputs, agree: the host path of a 602 KB "
               "FP32 image beyond 16 GB/s is not modelled")
_MFU = ("a training micro-step runs at 24-34% of the Tensor Engine's peak on hardware; the projected matmuls run "
        "near the peak (BERT-Large: 45 ms of the 87 ms projected), with fusion, gradient accumulation and the "
        "optimizer's share charged: the compiler's schedule of a training graph (spills, the backward's operand "
        "transposes, engine overlap) is not modelled")

ROWS = [
    Row("models", "bert-base-uncased inference, traced, P50 latency", "batch 1, seq 128", "bf16 matmuls",
        "trn1", 0.94294548e-3, HOST, _ENC.format(v="2.26.0"), lambda: encoder_latency_s("Bert")),
    Row("models", "roberta-base inference, traced, P50 latency", "batch 1, seq 128", "bf16 matmuls", "trn1",
        0.95796585e-3, HOST, _ENC.format(v="2.27.0"),
        lambda: encoder_latency_s("Roberta", vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                                  pad_token_id=1)),
    Row("models", "distilbert-base-uncased inference, traced, P50 latency", "batch 1, seq 128", "bf16 matmuls",
        "trn1", 0.54264069e-3, HOST, _ENC.format(v="2.27.0"), lambda: encoder_latency_s("DistilBert")),
    Row("models", "bert-large-uncased inference, traced, P50 latency", "batch 1, seq 128", "bf16 matmuls",
        "trn1", 2.66885757e-3, HOST, _ENC.format(v="2.27.0"),
        lambda: encoder_latency_s("Bert", hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                  intermediate_size=4096)),
    Row("models", "albert-base-v2 inference, traced, P50 latency", "batch 1, seq 128", "bf16 matmuls", "trn1",
        0.85997581e-3, HOST, _ENC.format(v="2.27.0"),
        lambda: encoder_latency_s("Albert", hidden_size=768, embedding_size=128, num_attention_heads=12,
                                  intermediate_size=3072)),
    Row("models", "google/electra-base-discriminator inference, traced, P50 latency", "batch 1, seq 128",
        "bf16 matmuls", "trn1", 0.93317032e-3, HOST, _ENC.format(v="2.27.0"),
        lambda: encoder_latency_s("Electra", embedding_size=768, hidden_size=768, num_hidden_layers=12,
                                  num_attention_heads=12, intermediate_size=3072)),
    Row("models", "roberta-large inference, traced, P50 latency", "batch 1, seq 128", "bf16 matmuls", "trn1",
        2.66981125e-3, HOST, _ENC.format(v="2.27.0"),
        lambda: encoder_latency_s("Roberta", vocab_size=50265, max_position_embeddings=514, type_vocab_size=1,
                                  pad_token_id=1, hidden_size=1024, num_hidden_layers=24, num_attention_heads=16,
                                  intermediate_size=4096)),
    Row("models", "google/vit-base-patch16-224 inference, traced, P50 latency", "batch 1, 224x224",
        "bf16 matmuls", "inf2 (trn1 table)", 1.322e-3, HOST, _VIS.format(f="transformers"),
        lambda: vision_latency_s("vit")),
    Row("models", "resnet18 inference, traced, P50 latency", "batch 1, 224x224", "bf16 matmuls",
        "inf2 (trn1 table)", 0.596e-3, HOST, _VIS.format(f="cnn"), lambda: vision_latency_s("resnet18"),
        reason=_CNN_REASON),
    Row("models", "resnet50 inference, traced, P50 latency", "batch 1, 224x224", "bf16 matmuls",
        "inf2 (trn1 table)", 0.83e-3, HOST, _VIS.format(f="cnn"), lambda: vision_latency_s("resnet50"),
        reason=_CNN_REASON),
    Row("models", "vgg16 inference, traced, P50 latency", "batch 1, 224x224", "bf16 matmuls",
        "inf2 (trn1 table)", 1.956e-3, HOST, _VIS.format(f="cnn"), lambda: vision_latency_s("vgg16"), reason=_CNN_REASON),
    Row("models", "resnet18 inference, one execution at throughput", "batch 8, 224x224", "bf16 matmuls",
        "inf2 (trn1 table)", 2 * 8 / 6949.174, DEVICE, _CNN.format(b=8, thr=6949.174),
        lambda: vision_latency_s("resnet18", 8, host=False), reason=_CNN_REASON),
    Row("models", "resnet50 inference, one execution at throughput", "batch 8, 224x224", "bf16 matmuls",
        "inf2 (trn1 table)", 2 * 8 / 4393.304, DEVICE, _CNN.format(b=8, thr=4393.304),
        lambda: vision_latency_s("resnet50", 8, host=False), reason=_CNN_REASON),
    Row("models", "vgg16 inference, one execution at throughput", "batch 8, 224x224", "bf16 matmuls",
        "inf2 (trn1 table)", 2 * 8 / 2161.392, DEVICE, _CNN.format(b=8, thr=2161.392),
        lambda: vision_latency_s("vgg16", 8, host=False), reason=_CNN_REASON),
    Row("models", "BERT-Large Ph1 pre-training, DP micro-step per core (AdamW, BF16+SR)",
        "microbatch 16, seq 128, 32 ranks, 32 micro-steps per step", "bf16", "trn1",
        32 * 16 / 3826.6103, SDK,
        SDK_DOCS + "trn1/training_data_encoder.csv, 1 node [32xNC(DP)], Neuron 2.28.0: 32 x 16 / 3826.61 seq/s (H)",
        lambda: training_micro_step_s("bert-large", 16, 32), reason=_MFU),
    Row("models", "ViT-Base fine-tuning, DP step per core (AdamW)", "microbatch 64, 224x224, 32 ranks",
        "bf16", "trn1", 32 * 64 / 6587.25, SDK,
        SDK_DOCS + "trn1/training_data_vision_transformers.csv, 1 node [32xNC(DP)], Neuron 2.25.0: "
                   "32 x 64 / 6587.25 img/s (H)",
        lambda: training_micro_step_s("vit-base", 64, 1), reason=_MFU),
]


def compiled_against_dry_run(model: str = "resnet18", target: str = "trn1") -> tuple[float, float]:
    """The cross-check of the two ways to project a row: `model` (resnet18 at batch 1, or distilbert at
    batch 1 x 128 tokens) run for real on the emulator, compiled (``torch.compile(backend="neuron")``),
    profiled and projected (``project_trace``: the graph's launch and its kernels), against the dry run's
    one-NEFF projection without the host copies. Returns both, in seconds. Each compile takes minutes
    here: ``cd bench && python -m costmodel_rows.models``."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile

    torch.manual_seed(0)
    if model == "distilbert":
        m = _hf("DistilBert").to(torch.bfloat16).eval().to("neuron")
        ids = torch.zeros(1, 128, dtype=torch.long, device="neuron")
        args, kwargs = (), dict(input_ids=ids, attention_mask=torch.ones_like(ids))

        def call(mod):
            i = torch.zeros(1, 128, dtype=torch.long, device="neuron")
            with torch.no_grad():
                return mod(input_ids=i, attention_mask=torch.ones_like(i))

        dry = _one_neff_s(_on_device(lambda: _hf("DistilBert")), call, target)
    else:
        m = ResNet(int(model[6:])).to(torch.bfloat16).eval().to("neuron")
        args, kwargs = (torch.zeros(1, 3, 224, 224, dtype=torch.bfloat16, device="neuron"),), {}
        dry = vision_latency_s(model, 1, target, host=False)
    f = torch.compile(m, backend="neuron")
    with torch.no_grad():
        f(*args, **kwargs)
        torch.neuron.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.PrivateUse1]) as prof:
            f(*args, **kwargs)
            torch.neuron.synchronize()
    with tempfile.TemporaryDirectory() as d:
        prof.export_chrome_trace(d + "/trace.json")
        with open(d + "/trace.json") as fh:
            trace = json.load(fh)
    if model == "distilbert":  # the dry run's figure without the host copies, as the compiled run's
        t = costmodel.get_target(target)
        dry -= 2 * costmodel.copy("HtoD", 512, 512, t).duration_s
        dry -= costmodel.copy("DtoH", 128 * 768 * 4, 128 * 768 * 4, t).duration_s
    return costmodel.project_trace(trace, target).busy_us * 1e-6, dry


if __name__ == "__main__":
    for name in ("resnet18", "distilbert"):
        c, d = compiled_against_dry_run(name)
        print(f"{name} batch 1 on trn1: compiled run {c * 1e6:.1f} us, dry run as one NEFF {d * 1e6:.1f} us "
              f"({c / d:.2f}x)")
