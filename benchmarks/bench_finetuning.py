"""Fine-tuning training-step throughput: bert_keras `BertClassifier.fit` vs keras-hub
`BertTextClassifier.fit` vs a Hugging Face torch training step, same config and batch.

All three train a sentence classifier (2 classes) from a randomly initialised
encoder of the same shape on the same precomputed synthetic batches (token_ids,
segment_ids, padding_mask; lengths in [seq/2, seq]; padded to `--seq`):

* ours: `BertClassifier` compiled with `compile_for_finetuning` (the BERT AdamW:
  warmup/linear decay, decoupled weight decay, global-norm clipping; padded
  tokens skipped in the per-token layers, as without XLA it does by default),
  `model.fit`.
* keras-hub: `keras_hub.models.BertTextClassifier(BertBackbone(...), num_classes=2,
  preprocessor=None)` with the same optimizer (`create_optimizer`), its default
  loss/metrics, `model.fit`, fed the same dicts.
* HF torch: `transformers.BertForSequenceClassification`, `torch.optim.AdamW`
  + linear schedule + `clip_grad_norm_(1.0)`, a plain loop (forward, backward,
  clip, step, zero_grad); on CUDA when torch sees a GPU.

    python benchmarks/bench_finetuning.py --configs mini 6x384 --batch 32 --seq 128 --steps 10 --rounds 3

Reports steps/s (median of `--rounds` alternating rounds, after `--warmup`
steps that include tracing) and the ratios ours / keras-hub and ours / HF.
"""

import argparse
import os
import time

import numpy as np

from step_timer import StepTimer  # benchmarks/ is on sys.path when run as a script

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

# name -> (layers, hidden, heads, intermediate)
CONFIGS = {
    "mini": (4, 256, 4, 1024),
    "6x384": (6, 384, 12, 1536),
    "base": (12, 768, 12, 3072),
}
VOCAB = 30522
MAX_POSITIONS = 512


def synthetic_batches(count, batch, seq, seed=0):
    """`count * batch` classification examples as numpy arrays."""
    rng = np.random.default_rng(seed)
    n = count * batch
    lengths = rng.integers(seq // 2, seq + 1, n)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(1000, VOCAB, (n, seq)).astype("int32") * mask
    segment_ids = ((np.arange(seq)[None, :] >= (lengths // 2)[:, None]) * mask).astype("int32")
    labels = rng.integers(0, 2, n).astype("int32")
    return dict(token_ids=token_ids, segment_ids=segment_ids, padding_mask=mask), labels


def keras_dataset(x, y, batch):
    import tensorflow as tf

    return (tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True)
            .cache().repeat().prefetch(2))


def bert_optimizer():
    from bert_keras.training import create_optimizer

    return create_optimizer(learning_rate=2e-5, num_train_steps=10_000, num_warmup_steps=1_000)


class KerasContender:
    def __init__(self, label, model, dataset, compile_model):
        self.label, self.model, self.dataset = label, model, dataset
        self.compile_model = compile_model

    def warm_up(self, steps):
        self.compile_model(self.model)
        started = time.perf_counter()
        self.model.fit(self.dataset, steps_per_epoch=steps, epochs=1, verbose=0)
        return time.perf_counter() - started

    def steps_per_sec(self, steps):
        timer = StepTimer()
        self.model.fit(self.dataset, steps_per_epoch=steps + 1, epochs=1,
                       callbacks=[timer.callback], verbose=0)
        return timer.rate(1)  # from the end of the first step: excludes the iterator start


def ours(shape, x, y, batch):
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.models import BertClassifier, compile_for_finetuning

    layers, hidden, heads, intermediate = shape
    config = BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_layers=layers, num_heads=heads,
                        intermediate_size=intermediate, max_position_embeddings=MAX_POSITIONS)
    model = BertClassifier(BertEncoder(config), num_classes=2)

    def compile_model(model):  # what `bert-keras finetune` does
        compile_for_finetuning(model, num_train_steps=10_000, learning_rate=2e-5, jit_compile="auto")

    return KerasContender("ours", model, keras_dataset(x, y, batch), compile_model)


def keras_hub(shape, x, y, batch):
    import keras_hub

    layers, hidden, heads, intermediate = shape
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=layers, num_heads=heads, hidden_dim=hidden,
        intermediate_dim=intermediate, max_sequence_length=MAX_POSITIONS)
    model = keras_hub.models.BertTextClassifier(backbone, num_classes=2, preprocessor=None)

    def compile_model(model):  # its defaults, with the same optimizer as ours
        model.compile(optimizer=bert_optimizer(), jit_compile="auto", loss="auto", metrics="auto")

    return KerasContender("keras-hub", model, keras_dataset(x, y, batch), compile_model)


class TorchContender:
    label = "hf-torch"

    def __init__(self, shape, x, y, batch):
        import torch
        import transformers

        layers, hidden, heads, intermediate = shape
        config = transformers.BertConfig(
            vocab_size=VOCAB, hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
            intermediate_size=intermediate, max_position_embeddings=MAX_POSITIONS, num_labels=2)
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.torch = torch
        self.model = transformers.BertForSequenceClassification(config).to(self.device).train()
        decay = [p for n, p in self.model.named_parameters() if "LayerNorm" not in n and "bias" not in n]
        no_decay = [p for n, p in self.model.named_parameters() if "LayerNorm" in n or "bias" in n]
        self.optimizer = torch.optim.AdamW(
            [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}],
            lr=2e-5, eps=1e-6)
        self.scheduler = transformers.get_linear_schedule_with_warmup(self.optimizer, 1_000, 10_000)
        self.batches = [
            {"input_ids": torch.as_tensor(x["token_ids"][i:i + batch], dtype=torch.long),
             "token_type_ids": torch.as_tensor(x["segment_ids"][i:i + batch], dtype=torch.long),
             "attention_mask": torch.as_tensor(x["padding_mask"][i:i + batch], dtype=torch.long),
             "labels": torch.as_tensor(y[i:i + batch], dtype=torch.long)}
            for i in range(0, len(y) - batch + 1, batch)]
        self.batches = [{k: v.to(self.device) for k, v in b.items()} for b in self.batches]

    def _step(self, batch):
        loss = self.model(**batch).loss
        loss.backward()
        self.torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.optimizer.step()
        self.scheduler.step()
        self.optimizer.zero_grad(set_to_none=True)
        return loss

    def _run(self, steps):
        for i in range(steps):
            loss = self._step(self.batches[i % len(self.batches)])
        loss.detach().item()  # wait for the device

    def warm_up(self, steps):
        started = time.perf_counter()
        self._run(steps)
        return time.perf_counter() - started

    def steps_per_sec(self, steps):
        self._run(1)
        started = time.perf_counter()
        self._run(steps)
        return steps / (time.perf_counter() - started)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["mini", "6x384"], choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per model and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timed rounds (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed first steps (tracing)")
    parser.add_argument("--skip-torch", action="store_true", help="leave out the HF torch step")
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    devices = [d.device_type for d in tf.config.list_physical_devices()]
    torch_note = ""
    if not args.skip_torch:
        import torch

        torch_note = f", torch {torch.__version__} on {'cuda' if torch.cuda.is_available() else 'cpu'}"
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, devices {devices}{torch_note}, "
          f"batch {args.batch}, seq {args.seq}, float32")
    x, y = synthetic_batches(8, args.batch, args.seq)
    rows = []
    for name in args.configs:
        shape = CONFIGS[name]
        contenders = [ours(shape, x, y, args.batch), keras_hub(shape, x, y, args.batch)]
        if not args.skip_torch:
            contenders.append(TorchContender(shape, x, y, args.batch))
        for contender in contenders:
            seconds = contender.warm_up(args.warmup)
            print(f"{name} {contender.label}: compiled and warmed up in {seconds:.0f}s", flush=True)
        # Alternate in rounds and keep the median: a shared machine's load drifts.
        rates = {c.label: [] for c in contenders}
        for _ in range(args.rounds):
            for contender in contenders:
                rates[contender.label].append(contender.steps_per_sec(args.steps))
        median = {label: float(np.median(values)) for label, values in rates.items()}
        rows.append((name, shape, median))
        print(f"{name}: " + ", ".join(f"{label} {median[label]:.3f} steps/s "
                                       f"{np.round(rates[label], 3).tolist()}" for label in rates),
              flush=True)

    print("\n| config | L/H/heads/I | ours steps/s | keras-hub steps/s | HF torch steps/s "
          "| ours / keras-hub | ours / HF |")
    print("|---|---|---|---|---|---|---|")
    for name, (layers, hidden, heads, intermediate), median in rows:
        hub, hf = median["keras-hub"], median.get("hf-torch")
        print(f"| {name} | {layers}/{hidden}/{heads}/{intermediate} | {median['ours']:.3f} | {hub:.3f} | "
              + (f"{hf:.3f}" if hf else "-") + f" | {median['ours'] / hub:.2f}x | "
              + (f"{median['ours'] / hf:.2f}x" if hf else "-") + " |")


if __name__ == "__main__":
    main()
