"""Corpus source: small torch models written here, each exported by both torch.onnx exporters.

``export(...)`` is the one place a torch module becomes ONNX: the TorchScript exporter
(``dynamo=False``, with ``dynamic_axes``) and the dynamo exporter (``dynamo=True``, onnxscript,
with ``dynamic_shapes``), both with the leading (batch) axis dynamic as real exports usually
are.  The models are exported with a batch of 2 and fed a batch of 3 (``FEED_BATCH``), so a
declared extent the exporter baked in shows up.  ``corpus_hf`` reuses :func:`export`.
"""

from __future__ import annotations

import contextlib
import io
import warnings
from pathlib import Path

from corpus_common import Entry, integers, normal, rng_for, seed_torch

EXPORT_BATCH, FEED_BATCH = 2, 3
EXPORTERS = {"ts": "torch.onnx TorchScript exporter", "dynamo": "torch.onnx dynamo exporter"}


def export(module, example: dict, path: Path, exporter: str, dynamic: dict[str, dict[int, str]]) -> None:
    """Export ``module`` (called with ``example``'s values, in order) to ``path``.

    ``dynamic`` maps an input name to ``{axis: dimension name}`` for the axes left dynamic.
    ``exporter`` is ``"ts"`` or ``"dynamo"``.  The exporters' progress chatter is silenced.
    """
    import torch

    module.eval()
    args = tuple(example.values())
    names = list(example)
    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        if exporter == "ts":
            torch.onnx.export(module, args, str(path), dynamo=False, input_names=names,
                              dynamic_axes={k: v for k, v in dynamic.items()}, opset_version=17)
        else:
            shapes = tuple({axis: torch.export.Dim.DYNAMIC for axis in dynamic.get(k, {})} or None
                           for k in names)
            torch.onnx.export(module, args, str(path), dynamo=True, input_names=names,
                              dynamic_shapes=shapes, verbose=False)


def _models():
    """(name, module factory, example-input factory(batch, rng), dynamic axes) of each model."""
    import torch
    from torch import nn

    class LSTMTagger(nn.Module):
        """Embedding, a bidirectional LSTM, per-token tag scores (log-softmax)."""

        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(100, 16)
            self.lstm = nn.LSTM(16, 24, batch_first=True, bidirectional=True)
            self.out = nn.Linear(48, 5)

        def forward(self, tokens):
            h, _ = self.lstm(self.emb(tokens))
            return torch.log_softmax(self.out(h), dim=-1)

    class GRUClassifier(nn.Module):
        """A two-layer GRU over features, mean-pooled, then a linear classifier."""

        def __init__(self):
            super().__init__()
            self.gru = nn.GRU(12, 20, num_layers=2, batch_first=True)
            self.fc = nn.Linear(20, 3)

        def forward(self, x):
            h, last = self.gru(x)
            return self.fc(h.mean(dim=1)), last

    class Block(nn.Module):
        def __init__(self, c, stride):
            super().__init__()
            self.conv1 = nn.Conv2d(c // stride, c, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(c)
            self.conv2 = nn.Conv2d(c, c, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c)
            self.down = (nn.Sequential(nn.Conv2d(c // stride, c, 1, stride, bias=False), nn.BatchNorm2d(c))
                         if stride > 1 else nn.Identity())

        def forward(self, x):
            y = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(y)) + self.down(x))

    class SmallResNet(nn.Module):
        """A stem, two residual blocks (one downsampling), global pooling, a classifier."""

        def __init__(self):
            super().__init__()
            self.stem = nn.Sequential(nn.Conv2d(3, 8, 3, 1, 1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2))
            self.blocks = nn.Sequential(Block(8, 1), Block(16, 2))
            self.fc = nn.Linear(16, 10)

        def forward(self, x):
            y = self.blocks(self.stem(x))
            return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(y, 1), 1))

    class AttentionEncoder(nn.Module):
        """Two pre-norm transformer encoder layers (multi-head attention, GELU MLP) and a head."""

        def __init__(self):
            super().__init__()
            layer = nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, activation="gelu",
                                               batch_first=True, norm_first=True)
            self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.head = nn.Linear(32, 4)

        def forward(self, x):
            return self.head(self.enc(x))

    class Conv1dAudio(nn.Module):
        """Strided 1-D convolutions with batch norm, GELU and max pooling over a waveform."""

        def __init__(self):
            super().__init__()
            self.net = nn.Sequential(nn.Conv1d(1, 8, 9, 4), nn.BatchNorm1d(8), nn.GELU(), nn.MaxPool1d(2),
                                     nn.Conv1d(8, 16, 5, 2), nn.GELU(), nn.AdaptiveAvgPool1d(1), nn.Flatten(),
                                     nn.Linear(16, 2), nn.Softmax(dim=-1))

        def forward(self, wave):
            return self.net(wave)

    class UNet(nn.Module):
        """A two-level U-Net: conv blocks, max pooling down, Resize up (bilinear, half-pixel
        centers; then nearest, asymmetric) concatenated with the skip connections, a 1x1 head."""

        def __init__(self):
            super().__init__()

            def block(i, o):
                return nn.Sequential(nn.Conv2d(i, o, 3, 1, 1), nn.BatchNorm2d(o), nn.ReLU(),
                                     nn.Conv2d(o, o, 3, 1, 1), nn.ReLU())
            self.enc1, self.enc2, self.mid = block(3, 16), block(16, 32), block(32, 64)
            self.up_linear = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False)
            self.up_nearest = nn.Upsample(scale_factor=2, mode="nearest")
            self.dec2, self.dec1 = block(64 + 32, 32), block(32 + 16, 16)
            self.head = nn.Conv2d(16, 2, 1)

        def forward(self, x):
            e1 = self.enc1(x)
            e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
            m = self.mid(nn.functional.max_pool2d(e2, 2))
            d2 = self.dec2(torch.cat([self.up_linear(m), e2], 1))
            return self.head(self.dec1(torch.cat([self.up_nearest(d2), e1], 1)))

    return [
        ("lstm_tagger", LSTMTagger, lambda b, r: {"tokens": integers(r, 100, (b, 7))}, {"tokens": {0: "batch"}}),
        ("gru_classifier", GRUClassifier, lambda b, r: {"x": normal(r, (b, 6, 12))}, {"x": {0: "batch"}}),
        ("small_resnet", SmallResNet, lambda b, r: {"x": normal(r, (b, 3, 16, 16))}, {"x": {0: "batch"}}),
        ("attention_encoder", AttentionEncoder, lambda b, r: {"x": normal(r, (b, 5, 32))}, {"x": {0: "batch"}}),
        ("conv1d_audio", Conv1dAudio, lambda b, r: {"wave": normal(r, (b, 1, 400))}, {"wave": {0: "batch"}}),
        ("unet_resize", UNet, lambda b, r: {"x": normal(r, (b, 3, 64, 64))}, {"x": {0: "batch"}}),
    ]


def _with_running_stats(module):
    """Give every batch norm non-trivial running statistics (a trained model's are never 0 and 1)."""
    import torch

    with torch.no_grad():
        for m in module.modules():
            if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
    return module


def build(out: Path) -> list[Entry]:
    """Export every model with both exporters; inputs are a fresh seeded batch of ``FEED_BATCH``."""
    import torch

    entries = []
    for base, factory, make_inputs, dynamic in _models():
        for exporter, producer in EXPORTERS.items():
            name = f"{base}_{exporter}"
            seed_torch(base)  # both exports of one model carry the same weights
            module = _with_running_stats(factory())
            rng = rng_for(name)
            example = {k: torch.from_numpy(v) for k, v in make_inputs(EXPORT_BATCH, rng).items()}
            export(module, example, out / f"{name}.onnx", exporter, dynamic)
            entries.append(Entry(name, producer, torch.__version__, make_inputs(FEED_BATCH, rng)))
    return entries
