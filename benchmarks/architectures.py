"""Architectures outside the corpus: onnxkit-cpu vs onnxruntime on 68 transformers models.

Every model is one of transformers' model classes built from a small but realistic configuration
(random weights, ``torch.manual_seed(0)``; nothing downloaded): image classification, text
encoders, audio encoders, detection, segmentation / depth, decoder-only language models and
encoder-decoders, float32 (float16 and int8 variants are ``half.py`` and ``int8.py``).  Each is
exported once by torch's TorchScript exporter at opset 17 (torch's dynamo exporter where the
TorchScript one fails) into ``--out`` (default ``.cache/architectures``: ``NAME.onnx`` and
``NAME.inputs.npz``, kept between runs); ``--export-only`` does just that (run it niced, in the
background: minutes per model on a busy machine).  A model whose export fails is reported and
left out.

**The held-back third.**  :data:`HELD_BACK` is fixed: the names whose SHA-256 is 0 modulo 3
(:func:`held_back_by_hash`; tests/structure/test_held_back.py asserts the list matches the hash,
its size, and that no file under benchmarks/, onnxkit/ or plugins/ other than this one names a
held-back model).  Nobody tunes on these: the script reports them apart from the rest, so a
speed-up tuned on the visible two thirds shows whether it carries over.

Timing: for each model, onnxkit (``ONNXKIT_FIRST_RUN=warm``, via ``timing``) and onnxruntime
(CPU provider), once with one thread each (onnxkit ``intra_op_num_threads=1``, BLAS one thread;
onnxruntime ``intra_op_num_threads=1``, ``inter_op_num_threads=1``) and once with default threads
for both, each interleaved (``timing.interleaved_samples``: two warm-up calls, then ``--repeat``
rounds, the order alternating; default threads: each timing starts after the pools settle),
median; the models in the order of their names' SHA-1 (a run cut short still spans the
families).  The correctness column is the largest absolute difference of the first output against
onnxruntime's (and that over onnxruntime's largest magnitude).  The conditions (date, CPUs, load
average, OpenBLAS and its kernels via threadpoolctl, versions) are printed first.
``--corpus`` adds the corpus models benchmarks/models.py times (reported as a third group).
Run: ``python benchmarks/architectures.py [--repeat N] [-k NAME] [--export-only] [--corpus]``.
Needs torch, transformers, onnxruntime, threadpoolctl.
"""

from __future__ import annotations

import argparse
import hashlib
import math
import os
import statistics
import sys
import time
import traceback
import warnings
from pathlib import Path

import numpy as np
import timing  # noqa: F401  (ONNXKIT_FIRST_RUN=warm: steady-state runs)

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / ".cache" / "architectures"
#: text and decoder inputs: batch 1, this many tokens
SEQ = 128
VOCAB = 8000
#: a text encoder of 4 layers, hidden 256, 4 heads (BERT-mini sized)
TEXT = dict(vocab_size=VOCAB, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
            max_position_embeddings=512)
#: a decoder of 4 layers, hidden 256, 4 heads (2 key-value heads where the class has them)
DEC = dict(vocab_size=VOCAB, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=688,
           max_position_embeddings=512)
#: a ViT-tiny sized vision transformer
VIT = dict(hidden_size=192, num_hidden_layers=4, num_attention_heads=3, intermediate_size=768)


def _ids(n=SEQ):
    import torch

    g = torch.Generator().manual_seed(1)
    return torch.randint(3, VOCAB, (1, n), generator=g)


def _image(size=224, channels=3):
    import torch

    return torch.randn(1, channels, size, size, generator=torch.Generator().manual_seed(2))


def _audio(samples=16000):
    import torch

    return torch.randn(1, samples, generator=torch.Generator().manual_seed(3))


def _text(cfg, cls, **extra):
    return lambda t: (getattr(t, cls)(getattr(t, cfg)(**{**TEXT, **extra})),
                      {"input_ids": _ids(), "attention_mask": _ids().new_ones((1, SEQ))})


def _decoder(cfg, cls, kv=True, **extra):
    def build(t):
        args = {**DEC, **({"num_key_value_heads": 2} if kv else {}), **extra}
        return getattr(t, cls)(getattr(t, cfg)(**args, use_cache=False)), {"input_ids": _ids()}
    return build


def _vision(cfg, cls, size=224, **kw):
    return lambda t: (getattr(t, cls)(getattr(t, cfg)(**kw)), {"pixel_values": _image(size)})


def _detr(t, cfg="DetrConfig", cls="DetrForObjectDetection"):
    backbone = t.ResNetConfig(depths=[2, 2, 2, 2], layer_type="basic", hidden_sizes=[64, 128, 256, 512],
                              out_features=["stage4"])
    config = getattr(t, cfg)(use_timm_backbone=False, backbone_config=backbone, use_pretrained_backbone=False,
                             d_model=128, encoder_layers=2, decoder_layers=2, encoder_attention_heads=4,
                             decoder_attention_heads=4, encoder_ffn_dim=512, decoder_ffn_dim=512, num_queries=50)
    return getattr(t, cls)(config), {"pixel_values": _image(384)}


def _audio_encoder(cfg, cls, **extra):
    small = dict(hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024,
                 conv_dim=(256,) * 7, do_stable_layer_norm=False, num_conv_pos_embeddings=64)
    return lambda t: (getattr(t, cls)(getattr(t, cfg)(**{**small, **extra})), {"input_values": _audio()})


def _whisper(t):
    import torch

    cfg = t.WhisperConfig(d_model=256, encoder_layers=4, encoder_attention_heads=4, encoder_ffn_dim=1024,
                          decoder_layers=2, decoder_attention_heads=4, decoder_ffn_dim=1024, vocab_size=VOCAB,
                          pad_token_id=1, bos_token_id=1, eos_token_id=2, decoder_start_token_id=1,
                          suppress_tokens=[], begin_suppress_tokens=[])
    return (t.WhisperModel(cfg).get_encoder(),
            {"input_features": torch.randn(1, 80, 3000, generator=torch.Generator().manual_seed(4))})


def _seq2seq(cfg, cls, **extra):
    def build(t):
        model = getattr(t, cls)(getattr(t, cfg)(vocab_size=VOCAB, use_cache=False, **extra))
        return model, {"input_ids": _ids(), "decoder_input_ids": _ids(32)}
    return build


def _ast(t):
    import torch

    cfg = t.ASTConfig(**VIT, max_length=512, num_mel_bins=128)
    return t.ASTForAudioClassification(cfg), {
        "input_values": torch.randn(1, 512, 128, generator=torch.Generator().manual_seed(5))}


def _upernet(t):
    backbone = t.ConvNextConfig(depths=[2, 2, 2, 2], hidden_sizes=[48, 96, 192, 384],
                                out_features=["stage1", "stage2", "stage3", "stage4"])
    cfg = t.UperNetConfig(backbone_config=backbone, hidden_size=128, auxiliary_in_channels=192, use_auxiliary_head=False)
    return t.UperNetForSemanticSegmentation(cfg), {"pixel_values": _image(256)}


def _dpt(t):
    cfg = t.DPTConfig(**VIT, image_size=224, backbone_out_indices=[0, 1, 2, 3], neck_hidden_sizes=[48, 96, 192, 384],
                      fusion_hidden_size=64)
    return t.DPTForDepthEstimation(cfg), {"pixel_values": _image(224)}


#: name -> builder(transformers module) -> (torch module, {input name: example tensor})
ARCHITECTURES = {
    # image classification
    "arch_resnet18": _vision("ResNetConfig", "ResNetForImageClassification", depths=[2, 2, 2, 2], layer_type="basic",
                             hidden_sizes=[64, 128, 256, 512]),
    "arch_resnet50": _vision("ResNetConfig", "ResNetForImageClassification"),
    "arch_mobilenet_v2_075": _vision("MobileNetV2Config", "MobileNetV2ForImageClassification", depth_multiplier=0.75),
    "arch_mobilenet_v1_05": _vision("MobileNetV1Config", "MobileNetV1ForImageClassification", depth_multiplier=0.5),
    "arch_efficientnet_small": _vision("EfficientNetConfig", "EfficientNetForImageClassification", size=192,
                                       image_size=192, width_coefficient=0.8, depth_coefficient=0.8, hidden_dim=1024),
    "arch_convnext_atto": _vision("ConvNextConfig", "ConvNextForImageClassification", depths=[2, 2, 6, 2],
                                  hidden_sizes=[40, 80, 160, 320]),
    "arch_convnextv2_atto": _vision("ConvNextV2Config", "ConvNextV2ForImageClassification", depths=[2, 2, 6, 2],
                                    hidden_sizes=[40, 80, 160, 320]),
    "arch_vit_tiny": _vision("ViTConfig", "ViTForImageClassification", **VIT),
    "arch_deit_tiny": _vision("DeiTConfig", "DeiTForImageClassificationWithTeacher", **VIT),
    "arch_beit_tiny": _vision("BeitConfig", "BeitForImageClassification", **VIT, use_relative_position_bias=True),
    "arch_dinov2_tiny": _vision("Dinov2Config", "Dinov2Model", **VIT, image_size=224),
    "arch_swin_micro": _vision("SwinConfig", "SwinForImageClassification", embed_dim=48, depths=[2, 2, 2, 2],
                               num_heads=[2, 4, 8, 16]),
    "arch_regnet_y400": _vision("RegNetConfig", "RegNetForImageClassification", layer_type="y", depths=[1, 3, 6, 6],
                                hidden_sizes=[48, 104, 208, 440], groups_width=8),
    "arch_levit_128s": _vision("LevitConfig", "LevitForImageClassification", hidden_sizes=[128, 256, 384],
                               num_attention_heads=[4, 6, 8], depths=[2, 3, 4], key_dim=[16, 16, 16]),
    "arch_poolformer_s12": _vision("PoolFormerConfig", "PoolFormerForImageClassification"),
    "arch_mobilevitv2_05": _vision("MobileViTV2Config", "MobileViTV2ForImageClassification", size=256, width_multiplier=0.5),
    "arch_mobilevit_xs": _vision("MobileViTConfig", "MobileViTForImageClassification", size=256,
                                 hidden_sizes=[96, 120, 144], neck_hidden_sizes=[16, 32, 48, 64, 80, 96, 384]),
    "arch_bit_small": _vision("BitConfig", "BitForImageClassification", depths=[1, 1, 1, 1],
                              hidden_sizes=[128, 256, 512, 1024]),
    "arch_focalnet_micro": _vision("FocalNetConfig", "FocalNetForImageClassification", embed_dim=48,
                                   depths=[2, 2, 2, 2]),
    # text encoders
    "arch_bert_mini": _text("BertConfig", "BertForSequenceClassification"),
    "arch_roberta_mini": _text("RobertaConfig", "RobertaForSequenceClassification"),
    "arch_distilbert_mini": lambda t: (t.DistilBertForSequenceClassification(t.DistilBertConfig(
        vocab_size=VOCAB, dim=256, n_layers=4, n_heads=4, hidden_dim=1024)),
        {"input_ids": _ids(), "attention_mask": _ids().new_ones((1, SEQ))}),
    "arch_albert_mini": _text("AlbertConfig", "AlbertForSequenceClassification", embedding_size=128),
    "arch_electra_mini": _text("ElectraConfig", "ElectraForSequenceClassification", embedding_size=128),
    "arch_deberta_v2_mini": _text("DebertaV2Config", "DebertaV2ForSequenceClassification"),
    "arch_deberta_mini": _text("DebertaConfig", "DebertaForSequenceClassification"),
    "arch_xlm_roberta_mini": _text("XLMRobertaConfig", "XLMRobertaForTokenClassification"),
    "arch_mpnet_mini": _text("MPNetConfig", "MPNetForSequenceClassification"),
    "arch_mobilebert_mini": _text("MobileBertConfig", "MobileBertForSequenceClassification", embedding_size=128,
                                  intra_bottleneck_size=64, true_hidden_size=64, num_feedforward_networks=2),
    "arch_squeezebert_mini": _text("SqueezeBertConfig", "SqueezeBertForSequenceClassification", embedding_size=256),
    "arch_convbert_mini": _text("ConvBertConfig", "ConvBertForSequenceClassification", embedding_size=128),
    "arch_roformer_mini": _text("RoFormerConfig", "RoFormerForSequenceClassification", embedding_size=256),
    "arch_ernie_mini": _text("ErnieConfig", "ErnieForMaskedLM"),
    "arch_layoutlm_mini": _text("LayoutLMConfig", "LayoutLMForSequenceClassification"),
    # audio
    "arch_wav2vec2_small": _audio_encoder("Wav2Vec2Config", "Wav2Vec2ForSequenceClassification"),
    "arch_hubert_small": _audio_encoder("HubertConfig", "HubertForSequenceClassification"),
    "arch_wavlm_small": _audio_encoder("WavLMConfig", "WavLMForSequenceClassification"),
    "arch_data2vec_audio_small": _audio_encoder("Data2VecAudioConfig", "Data2VecAudioForSequenceClassification"),
    "arch_unispeech_small": _audio_encoder("UniSpeechConfig", "UniSpeechForSequenceClassification"),
    "arch_whisper_encoder_small": _whisper,
    "arch_ast_small": _ast,
    # detection
    "arch_detr_r18": _detr,
    "arch_conditional_detr_r18": lambda t: _detr(t, "ConditionalDetrConfig", "ConditionalDetrForObjectDetection"),
    "arch_yolos_tiny": _vision("YolosConfig", "YolosForObjectDetection", size=384, **VIT, image_size=[384, 384],
                               num_detection_tokens=50),
    # segmentation and depth
    "arch_segformer_b0": _vision("SegformerConfig", "SegformerForSemanticSegmentation", size=256),
    "arch_mobilevit_seg_xs": _vision("MobileViTConfig", "MobileViTForSemanticSegmentation", size=256,
                                     hidden_sizes=[96, 120, 144], neck_hidden_sizes=[16, 32, 48, 64, 80, 96, 384]),
    "arch_upernet_convnext": _upernet,
    "arch_dpt_tiny": _dpt,
    "arch_glpn_small": _vision("GLPNConfig", "GLPNForDepthEstimation", size=256),
    # decoder-only language models
    "arch_gpt2_mini": lambda t: (t.GPT2LMHeadModel(t.GPT2Config(vocab_size=VOCAB, n_embd=256, n_layer=4, n_head=4,
                                                                  use_cache=False)), {"input_ids": _ids()}),
    "arch_gpt_neo_mini": _decoder("GPTNeoConfig", "GPTNeoForCausalLM", kv=False, num_layers=4,
                                  attention_types=[[["global", "local"], 2]], intermediate_size=1024),
    "arch_llama_mini": _decoder("LlamaConfig", "LlamaForCausalLM"),
    "arch_mistral_mini": _decoder("MistralConfig", "MistralForCausalLM"),
    "arch_qwen2_mini": _decoder("Qwen2Config", "Qwen2ForCausalLM"),
    "arch_qwen3_mini": _decoder("Qwen3Config", "Qwen3ForCausalLM", head_dim=64),
    "arch_phi_mini": _decoder("PhiConfig", "PhiForCausalLM", kv=False),
    "arch_phi3_mini": _decoder("Phi3Config", "Phi3ForCausalLM", pad_token_id=0),
    "arch_opt_mini": lambda t: (t.OPTForCausalLM(t.OPTConfig(vocab_size=VOCAB, hidden_size=256, num_hidden_layers=4,
                                                               num_attention_heads=4, ffn_dim=1024, word_embed_proj_dim=256,
                                                               use_cache=False)), {"input_ids": _ids()}),
    "arch_bloom_mini": lambda t: (t.BloomForCausalLM(t.BloomConfig(vocab_size=VOCAB, hidden_size=256, n_layer=4, n_head=4,
                                                                     use_cache=False)), {"input_ids": _ids()}),
    "arch_falcon_mini": _decoder("FalconConfig", "FalconForCausalLM", kv=False, new_decoder_architecture=False,
                                 multi_query=True),
    "arch_gemma_mini": _decoder("GemmaConfig", "GemmaForCausalLM", head_dim=64),
    "arch_stablelm_mini": _decoder("StableLmConfig", "StableLmForCausalLM"),
    "arch_olmo_mini": _decoder("OlmoConfig", "OlmoForCausalLM"),
    "arch_gpt_bigcode_mini": lambda t: (t.GPTBigCodeForCausalLM(t.GPTBigCodeConfig(
        vocab_size=VOCAB, n_embd=256, n_layer=4, n_head=4, use_cache=False)), {"input_ids": _ids()}),
    "arch_codegen_mini": lambda t: (t.CodeGenForCausalLM(t.CodeGenConfig(
        vocab_size=VOCAB, n_embd=256, n_layer=4, n_head=4, rotary_dim=32, use_cache=False)), {"input_ids": _ids()}),
    # encoder-decoders
    "arch_t5_mini": _seq2seq("T5Config", "T5ForConditionalGeneration", d_model=256, d_kv=64, d_ff=1024, num_layers=4,
                             num_heads=4),
    "arch_bart_mini": _seq2seq("BartConfig", "BartForConditionalGeneration", d_model=256, encoder_layers=3,
                               decoder_layers=3, encoder_attention_heads=4, decoder_attention_heads=4,
                               encoder_ffn_dim=1024, decoder_ffn_dim=1024),
    "arch_marian_mini": _seq2seq("MarianConfig", "MarianMTModel", d_model=256, encoder_layers=3, decoder_layers=3,
                                 encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=1024,
                                 decoder_ffn_dim=1024, pad_token_id=0, decoder_start_token_id=0),
}


def held_back_by_hash(name: str) -> bool:
    """Whether ``name`` belongs to the held-back third: its SHA-256 (UTF-8) is 0 modulo 3."""
    return int(hashlib.sha256(name.encode()).hexdigest(), 16) % 3 == 0


#: The held-back third (fixed; ``held_back_by_hash`` of the names above).  Never tune on these.
HELD_BACK = (
    "arch_resnet18", "arch_resnet50", "arch_mobilenet_v2_075", "arch_mobilenet_v1_05", "arch_convnextv2_atto",
    "arch_beit_tiny", "arch_regnet_y400", "arch_bert_mini", "arch_roberta_mini", "arch_albert_mini",
    "arch_deberta_mini", "arch_roformer_mini", "arch_ernie_mini", "arch_layoutlm_mini", "arch_wav2vec2_small",
    "arch_ast_small", "arch_detr_r18", "arch_conditional_detr_r18", "arch_dpt_tiny", "arch_gemma_mini",
    "arch_gpt_bigcode_mini", "arch_bart_mini",
)


class _FirstOutput:
    """A torch module's first output from keyword inputs given positionally (for the exporter)."""

    def __new__(cls, model, names):
        import torch

        class Wrapped(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.model = model

            def forward(self, *args):
                out = self.model(**dict(zip(names, args)))
                return out[0] if isinstance(out, (tuple, list)) or hasattr(out, "to_tuple") else out

        return Wrapped().eval()


def export(name: str, out: Path = OUT) -> Path:
    """``out/NAME.onnx`` (and its inputs), exported now unless present; raises when both exporters fail."""
    path = out / f"{name}.onnx"
    if path.exists() and (out / f"{name}.inputs.npz").exists():
        return path
    import torch
    import transformers

    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    model, inputs = ARCHITECTURES[name](transformers)
    model = _FirstOutput(model.eval(), list(inputs))
    args = tuple(inputs.values())
    tmp = out / f"{name}.tmp-onnx"
    with torch.no_grad():
        try:
            torch.onnx.export(model, args, str(tmp), input_names=list(inputs), output_names=["output"],
                              opset_version=17, dynamo=False)
        except Exception as first:  # noqa: BLE001  (fall back on the dynamo exporter)
            try:
                torch.onnx.export(model, args, str(tmp), input_names=list(inputs), output_names=["output"],
                                  opset_version=18, dynamo=True, external_data=False)
            except Exception as second:  # noqa: BLE001
                raise RuntimeError(f"TorchScript: {first!r:.300}; dynamo: {second!r:.300}") from None
    np.savez(out / f"{name}.inputs.npz", **{k: v.numpy() for k, v in inputs.items()})
    tmp.rename(path)
    return path


def conditions(repeat: int) -> str:
    import datetime
    import platform

    import numpy
    import onnxruntime
    import torch
    import transformers
    from threadpoolctl import threadpool_info

    import onnxkit

    blas = ", ".join(f"{i['internal_api']} {i['version']} ({i['num_threads']} threads by default, "
                     f"{i.get('architecture') or '?'} kernels)" for i in threadpool_info() if i.get("user_api") == "blas")
    load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
    return (f"{datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; {platform.machine()}; "
            f"{len(os.sched_getaffinity(0))} CPUs available; load average {load} (a machine shared with other "
            f"work); BLAS {blas}; numpy {numpy.__version__}, onnxruntime {onnxruntime.__version__}, torch "
            f"{torch.__version__}, transformers {transformers.__version__}, Python {platform.python_version()}, "
            f"onnxkit from {Path(onnxkit.__file__).parent.parent}; "
            f"interleaved, median of {repeat}")


def _sessions(path: Path, one: bool):
    import onnxruntime as ort

    import onnxkit

    so = ort.SessionOptions()
    ko = onnxkit.SessionOptions()
    if one:
        so.intra_op_num_threads = so.inter_op_num_threads = 1
        ko.intra_op_num_threads = 1
    return onnxkit.InferenceSession(str(path), ko), ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def measure(path: Path, feed: dict, repeat: int) -> dict:
    """``{"one": (kit s, ort s), "default": (kit s, ort s), "diff": max abs, "rel": max abs / max |ort|}``."""
    from timing import interleaved_samples, medians

    result = {}
    for mode in ("one", "default"):
        kit, peer = _sessions(path, mode == "one")
        if mode == "one":
            want, got = peer.run(None, feed)[0], kit.run(None, feed)[0]
            diff = float(np.abs(want.astype(np.float64) - got).max()) if want.size else 0.0
            result["diff"], result["rel"] = diff, diff / (float(np.abs(want).max()) + 1e-30)
        t = medians(interleaved_samples({"kit": lambda: kit.run(None, feed), "ort": lambda: peer.run(None, feed)},
                                        repeat, quiesce=mode != "one"))
        result[mode] = (t["kit"], t["ort"])
        del kit, peer
    return result


def _gmean(values) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def summary(rows: list, label: str) -> str:
    """Geometric means and highest ratios of ``rows`` (``(name, result)``) against the issue's bounds."""
    if not rows:
        return f"{label}: no models"
    one = [r["one"][0] / r["one"][1] for _, r in rows]
    dflt = [r["default"][0] / r["default"][1] for _, r in rows]
    worst1 = max(rows, key=lambda r: r[1]["one"][0] / r[1]["one"][1])[0]
    worstd = max(rows, key=lambda r: r[1]["default"][0] / r[1]["default"][1])[0]
    return (f"{label} ({len(rows)} models): one thread geometric mean {_gmean(one):.2f} (bound 1.3), highest "
            f"{max(one):.2f} {worst1} (bound 1.8), above 1.8: {sum(v > 1.8 for v in one)}; default threads geometric "
            f"mean {_gmean(dflt):.2f} (bound 1.5), highest {max(dflt):.2f} {worstd} (bound 2.5), above 2.5: "
            f"{sum(v > 2.5 for v in dflt)}")


def corpus_cases():
    sys.path.insert(0, str(ROOT / "tests" / "corpus"))
    from corpus_cache import corpus_dir, load_inputs
    from models import CORPUS

    folder = corpus_dir()
    for name in CORPUS:
        if (folder / f"{name}.onnx").is_file():
            yield "corpus/" + name, folder / f"{name}.onnx", load_inputs(folder, name)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("-k", default="", help="only models whose name contains this (or one of these, comma-separated)")
    parser.add_argument("--out", default=str(OUT))
    parser.add_argument("--export-only", action="store_true", help="export the models missing, time nothing")
    parser.add_argument("--corpus", action="store_true", help="time the corpus models of models.py too")
    args = parser.parse_args(argv)
    out = Path(args.out)
    names = [n for n in ARCHITECTURES if any(k in n for k in args.k.split(","))]
    if args.export_only:
        for name in names:
            t0 = time.perf_counter()
            try:
                export(name, out)
                print(f"{name}: exported ({time.perf_counter() - t0:.0f} s)", flush=True)
            except Exception as exc:  # noqa: BLE001  (report and go on)
                print(f"{name}: export failed: {exc!s:.600}", flush=True)
        return 0
    import onnxruntime

    onnxruntime.set_default_logger_severity(3)
    warnings.simplefilter("ignore")
    print("conditions:", conditions(args.repeat))
    print(f"{'model':30} {'1 thr kit':>10} {'ort':>9} {'ratio':>6}  {'dflt kit':>9} {'ort':>9} {'ratio':>6}  "
          f"{'max|diff|':>9} {'rel':>8}  set")
    groups: dict = {"held-back third": [], "the rest (tuning set)": [], "corpus": []}
    # in the order of the names' SHA-1, so that a run cut short still spans the families and both sets
    order = sorted(names, key=lambda n: hashlib.sha1(n.encode()).hexdigest())
    cases = [(n, out / f"{n}.onnx", None) for n in order if (out / f"{n}.onnx").exists()]
    missing = [n for n in names if not (out / f"{n}.onnx").exists()]
    if args.corpus:
        cases += list(corpus_cases())
    for name, path, feed in cases:
        if feed is None:
            feed = dict(np.load(out / f"{name}.inputs.npz"))
        group = "corpus" if name.startswith("corpus/") else (
            "held-back third" if name in HELD_BACK else "the rest (tuning set)")
        try:
            r = measure(path, feed, args.repeat)
        except Exception as exc:  # noqa: BLE001  (a model onnxkit cannot run is a row, not a crash)
            print(f"{name:30} FAILED: {type(exc).__name__}: {str(exc).splitlines()[0][:200] if str(exc) else ''}",
                  flush=True)
            if os.environ.get("ARCH_TRACEBACK"):
                traceback.print_exc()
            continue
        groups[group].append((name, r))
        (k1, o1), (kd, od) = r["one"], r["default"]
        print(f"{name:30} {k1 * 1e3:8.2f}ms {o1 * 1e3:7.2f}ms {k1 / o1:6.2f}  {kd * 1e3:7.2f}ms {od * 1e3:7.2f}ms "
              f"{kd / od:6.2f}  {r['diff']:9.1e} {r['rel']:8.1e}  {'held back' if group.startswith('held') else group[:6]}",
              flush=True)
    print()
    for label, rows in groups.items():
        if rows or label != "corpus":
            print(summary(rows, label))
    print(summary(groups["held-back third"] + groups["the rest (tuning set)"], "all architectures"))
    if missing:
        print(f"not exported (run --export-only; failures are printed there): {', '.join(missing)}")
    print("load average after:", ", ".join(f"{v:.2f}" for v in os.getloadavg()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
