"""Pretraining training-step throughput: bert_keras `BertPretrainer.fit` vs keras-hub `BertMaskedLM.fit`.

Both models train with `model.fit` on the same precomputed synthetic batches
(random ids, about 15% masked positions, padded to `--predictions`), with the
same optimizer (`bert_keras.training.create_optimizer`: AdamW, warmup/linear
decay, global-norm clipping) and the same compile settings (`jit_compile="auto"`,
steps_per_execution 1). keras-hub gets the batches in its own format:
x = {token_ids, segment_ids, padding_mask, mask_positions}, y = masked ids,
sample_weight = mask weights, and its default loss (sparse CE on logits) and
weighted accuracy.

Not the same work: ours also trains the next-sentence head and loss (one
[H, 2] Dense on [CLS], negligible) and tracks MLM/NSP losses and accuracies;
keras-hub's `BertMaskedLM` has no NSP. Both project only the masked positions
onto the vocabulary.

    python benchmarks/bench_pretraining.py --configs mini 6x384 --batch 32 --seq 128 --steps 10 --rounds 3

Reports steps/s (median of `--rounds` alternating rounds, after `--warmup`
steps that include tracing) and ours / keras-hub.
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


def synthetic_batches(count, batch, seq, predictions, seed=0):
    """`count` batches of pretraining data as numpy arrays: lengths in [seq/2, seq], 15% masked."""
    rng = np.random.default_rng(seed)
    n = count * batch
    lengths = rng.integers(seq // 2, seq + 1, n)
    mask = (np.arange(seq)[None, :] < lengths[:, None]).astype("int32")
    token_ids = rng.integers(1000, VOCAB, (n, seq)).astype("int32") * mask
    segment_ids = ((np.arange(seq)[None, :] >= (lengths // 2)[:, None]) * mask).astype("int32")
    positions = np.zeros((n, predictions), "int32")
    weights = np.zeros((n, predictions), "float32")
    for row, length in enumerate(lengths):
        k = min(predictions, max(1, int(round(0.15 * length))))
        positions[row, :k] = np.sort(rng.choice(np.arange(1, length - 1), k, replace=False))
        weights[row, :k] = 1.0
    ids = rng.integers(1000, VOCAB, (n, predictions)).astype("int32")
    nsp = rng.integers(0, 2, n).astype("int32")
    return dict(token_ids=token_ids, segment_ids=segment_ids, padding_mask=mask,
                positions=positions, ids=ids, weights=weights, nsp=nsp)


def ours_dataset(data, batch):
    import tensorflow as tf

    x = {"token_ids": data["token_ids"], "segment_ids": data["segment_ids"],
         "padding_mask": data["padding_mask"], "masked_lm_positions": data["positions"]}
    y = {"masked_lm_ids": data["ids"], "masked_lm_weights": data["weights"], "next_sentence_labels": data["nsp"]}
    return tf.data.Dataset.from_tensor_slices((x, y)).batch(batch, drop_remainder=True).cache().repeat().prefetch(2)


def keras_hub_dataset(data, batch):
    import tensorflow as tf

    x = {"token_ids": data["token_ids"], "segment_ids": data["segment_ids"],
         "padding_mask": data["padding_mask"], "mask_positions": data["positions"]}
    return (tf.data.Dataset.from_tensor_slices((x, data["ids"], data["weights"]))
            .batch(batch, drop_remainder=True).cache().repeat().prefetch(2))


def build_ours(layers, hidden, heads, intermediate, seq):
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder
    from bert_keras.models import BertPretrainer

    config = BertConfig(vocab_size=VOCAB, hidden_size=hidden, num_layers=layers, num_heads=heads,
                        intermediate_size=intermediate, max_position_embeddings=max(512, seq))
    return BertPretrainer(BertEncoder(config))


def build_keras_hub(layers, hidden, heads, intermediate, seq):
    import keras_hub

    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB, num_layers=layers, num_heads=heads, hidden_dim=hidden,
        intermediate_dim=intermediate, max_sequence_length=max(512, seq))
    return keras_hub.models.BertMaskedLM(backbone, preprocessor=None)


def compile_and_warm_up(model, dataset, warmup, compile_kwargs):
    """Compile with the BERT optimizer and run `warmup` steps (tracing happens here)."""
    from bert_keras.training import create_optimizer

    optimizer = create_optimizer(learning_rate=1e-4, num_train_steps=10_000, num_warmup_steps=100)
    model.compile(optimizer=optimizer, jit_compile="auto", **compile_kwargs)
    started = time.perf_counter()
    model.fit(dataset, steps_per_epoch=warmup, epochs=1, shuffle=False, verbose=0)
    return time.perf_counter() - started


def timed_steps_per_sec(model, dataset, steps):
    """steps/s of `steps` more training steps (already traced: `fit` reuses its train function)."""
    timer = StepTimer()
    model.fit(dataset, steps_per_epoch=steps + 1, epochs=1, callbacks=[timer.callback], shuffle=False, verbose=0)
    return timer.rate(1)  # from the end of the first step: excludes the iterator start


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", nargs="+", default=["mini", "6x384"], choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--predictions", type=int, default=20)
    parser.add_argument("--steps", type=int, default=10, help="timed steps per model and round")
    parser.add_argument("--rounds", type=int, default=3, help="alternating timed rounds (median reported)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed first steps (tracing)")
    args = parser.parse_args()

    import keras
    import tensorflow as tf

    devices = [d.device_type for d in tf.config.list_physical_devices()]
    print(f"TensorFlow {tf.__version__}, Keras {keras.__version__}, devices {devices}, "
          f"batch {args.batch}, seq {args.seq}, {args.predictions} predictions, float32")
    data = synthetic_batches(8, args.batch, args.seq, args.predictions)
    rows = []
    for name in args.configs:
        shape = CONFIGS[name]
        contenders = [
            ("ours", build_ours(*shape, args.seq), ours_dataset(data, args.batch), {}),
            ("keras-hub", build_keras_hub(*shape, args.seq), keras_hub_dataset(data, args.batch),
             {"loss": "auto", "weighted_metrics": "auto"}),
        ]
        for label, model, dataset, compile_kwargs in contenders:
            seconds = compile_and_warm_up(model, dataset, args.warmup, compile_kwargs)
            print(f"{name} {label}: compiled and warmed up in {seconds:.0f}s", flush=True)
        # Alternate the two in rounds and keep the median: a shared machine's load
        # drifts, and back-to-back rounds see about the same.
        rates = {label: [] for label, *_ in contenders}
        for _ in range(args.rounds):
            for label, model, dataset, _ in contenders:
                rates[label].append(timed_steps_per_sec(model, dataset, args.steps))
        ours, hub = (float(np.median(rates[label])) for label in ("ours", "keras-hub"))
        rows.append((name, shape, ours, hub))
        print(f"{name}: ours {ours:.3f} steps/s {np.round(rates['ours'], 3).tolist()}, "
              f"keras-hub {hub:.3f} steps/s {np.round(rates['keras-hub'], 3).tolist()}", flush=True)

    print("\n| config | L/H/heads/I | ours steps/s (MLM+NSP) | keras-hub BertMaskedLM steps/s (MLM) | ours / keras-hub |")
    print("|---|---|---|---|---|")
    for name, (layers, hidden, heads, intermediate), ours, hub in rows:
        print(f"| {name} | {layers}/{hidden}/{heads}/{intermediate} | {ours:.3f} | {hub:.3f} | {ours / hub:.2f}x |")


if __name__ == "__main__":
    main()
