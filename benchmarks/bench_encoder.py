"""Encoder forward throughput: bert_keras vs keras-hub BertBackbone vs HF torch BertModel.

Measures sequences/s (CPU, float32) of one forward pass over a fixed
`[batch, seq]` batch of random ids with some padding, for each inference path
`BertEncoder` offers, keras-hub's default `BertBackbone.predict` and Hugging
Face `BertModel` under `torch.inference_mode`, and reports GFLOP/s against a
numpy float32 sgemm ceiling measured on the same machine.

    python benchmarks/bench_encoder.py --configs 6x384 base --batch 32 --seq 128 --iters 3

Weights are random: throughput does not depend on their values. The batch
has random lengths in [seq/2, seq] (about 25% padding), like real traffic;
`--no-padding` times full-length rows instead, where skipping padding gains
nothing.
"""

import argparse
import os
import time

import numpy as np

# name -> (layers, hidden, heads, intermediate)
CONFIGS = {
    "6x384": (6, 384, 12, 1536),  # all-MiniLM-L6-v2 shape
    "tiny": (2, 128, 2, 512),
    "small": (4, 512, 8, 2048),
    "base": (12, 768, 12, 3072),
}
VOCAB = 30522


def encoder_flops(layers, hidden, intermediate, batch, seq):
    """Multiply-add FLOPs of one forward: dense matmuls + attention scores/context."""
    tokens = batch * seq
    matmul_params = layers * (4 * hidden * hidden + 2 * hidden * intermediate)
    dense = 2 * matmul_params * tokens
    attention = 4 * layers * seq * seq * hidden * batch  # QK^T and P.V, 2 FLOPs each
    pooler = 2 * hidden * hidden * batch
    return dense + attention + pooler


SGEMM_N = 2048


def sgemm_path(n=SGEMM_N):
    """A float32 numpy matmul; its GFLOP/s is the ceiling the encoders are held to."""
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    return lambda: np.matmul(a, b)


def _timed(fn):
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_interleaved(paths, iters, warmup=1):
    """Best (minimum) seconds per call of each path, timed round-robin.

    On a shared machine other processes only ever add time, so the minimum
    estimates the uncontended speed; interleaving gives every path the same
    chances of a quiet moment.
    """
    for fn in paths.values():
        for _ in range(warmup):
            fn()
    times = {name: [] for name in paths}
    for _ in range(iters):
        for name, fn in paths.items():
            times[name].append(_timed(fn))
    return {name: min(t) for name, t in times.items()}


def make_batch(batch, seq, seed=0, padding=True):
    rng = np.random.default_rng(seed)
    token_ids = rng.integers(1000, VOCAB, size=(batch, seq)).astype(np.int32)
    lengths = rng.integers(seq // 2, seq + 1, size=batch) if padding else np.full(batch, seq)
    padding_mask = (np.arange(seq)[None, :] < lengths[:, None]).astype(np.int32)
    token_ids *= padding_mask
    segment_ids = np.zeros_like(token_ids)
    return token_ids, segment_ids, padding_mask


def ours_paths(dims, batch, seq, padding):
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    layers, hidden, heads, intermediate = dims
    config = BertConfig(VOCAB, hidden, layers, heads, intermediate)
    encoder = BertEncoder(config, dtype="float32")
    token_ids, segment_ids, padding_mask = make_batch(batch, seq, padding=padding)
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
    graph = encoder.inference_function(jit_compile=False)
    xla = encoder.inference_function(jit_compile=True)
    packed = encoder.inference_function(skip_padding=True)
    # A second encoder compiled with XLA, to time Keras' own predict() loop both ways.
    encoder_xla = BertEncoder(config, dtype="float32")
    encoder_xla.compile(jit_compile=True)
    return {
        "ours inference_function(graph)": lambda: graph(inputs)["sequence_output"].numpy(),
        "ours inference_function(XLA)": lambda: xla(inputs)["sequence_output"].numpy(),
        "ours inference_function(skip_padding)": lambda: packed(inputs)["sequence_output"].numpy(),
        "ours predict()": lambda: encoder.predict(inputs, batch_size=batch, verbose=0),
        "ours predict() compile(jit_compile)": lambda: encoder_xla.predict(inputs, batch_size=batch, verbose=0),
    }


def keras_hub_paths(dims, batch, seq, padding):
    import keras_hub

    layers, hidden, heads, intermediate = dims
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=VOCAB,
        num_layers=layers,
        num_heads=heads,
        hidden_dim=hidden,
        intermediate_dim=intermediate,
        max_sequence_length=512,
        dtype="float32",
    )
    token_ids, segment_ids, padding_mask = make_batch(batch, seq, padding=padding)
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
    return {"keras-hub BertBackbone.predict()": lambda: backbone.predict(inputs, batch_size=batch, verbose=0)}


def torch_paths(dims, batch, seq, padding):
    import torch
    import transformers

    torch.set_num_threads(os.cpu_count())
    layers, hidden, heads, intermediate = dims
    config = transformers.BertConfig(
        vocab_size=VOCAB,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        intermediate_size=intermediate,
        hidden_act="gelu",
    )
    model = transformers.BertModel(config).eval()
    token_ids, segment_ids, padding_mask = make_batch(batch, seq, padding=padding)
    tensors = dict(
        input_ids=torch.from_numpy(token_ids.astype(np.int64)),
        token_type_ids=torch.from_numpy(segment_ids.astype(np.int64)),
        attention_mask=torch.from_numpy(padding_mask.astype(np.int64)),
    )

    def run():
        with torch.inference_mode():
            model(**tensors).last_hidden_state.numpy()

    return {"HF torch BertModel": run}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["6x384", "base"], choices=sorted(CONFIGS))
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--iters", type=int, default=3, help="timed forward passes per path (best is kept)")
    parser.add_argument("--no-padding", dest="padding", action="store_false",
                        help="full-length rows instead of ~25%% padding")
    args = parser.parse_args(argv)

    print(f"CPU cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.1f}")
    for name in args.configs:
        dims = CONFIGS[name]
        flops = encoder_flops(dims[0], dims[1], dims[3], args.batch, args.seq)
        paths = {}
        paths.update(ours_paths(dims, args.batch, args.seq, args.padding))
        paths.update(keras_hub_paths(dims, args.batch, args.seq, args.padding))
        paths.update(torch_paths(dims, args.batch, args.seq, args.padding))
        # Timed in the same rounds as the encoders, so it sees the same load.
        paths["numpy sgemm"] = sgemm_path()
        results = measure_interleaved(paths, args.iters)
        ceiling = 2 * SGEMM_N**3 / results.pop("numpy sgemm") / 1e9
        hub = results["keras-hub BertBackbone.predict()"]
        torch_s = results["HF torch BertModel"]
        print(f"\n== {name}: L={dims[0]} H={dims[1]} heads={dims[2]} I={dims[3]}, "
              f"batch={args.batch} seq={args.seq} padding={args.padding}, {flops / 1e9:.1f} GFLOP/forward, "
              f"numpy sgemm ceiling {ceiling:.1f} GFLOP/s")
        print("(GFLOP/s counts the dense work of every position, padded or not: a path that "
              "skips padding shows its effective rate)")
        print(f"{'path':40s} {'seq/s':>9s} {'GFLOP/s':>8s} {'%ceil':>6s} {'/keras-hub':>10s} {'/torch':>7s}")
        for path, seconds in results.items():
            print(
                f"{path:40s} {args.batch / seconds:9.1f} {flops / seconds / 1e9:8.1f} "
                f"{100 * flops / seconds / 1e9 / ceiling:5.0f}% {hub / seconds:10.2f} {torch_s / seconds:7.2f}"
            )


if __name__ == "__main__":
    main()
