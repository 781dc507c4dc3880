"""`StepTimer`: steps/s of `model.fit`, measured from batch-end callbacks; `alternating_rates`:
rows/s of several inference contestants timed in alternating rounds; `settle`: waits until the
worker threads of the runtime timed last are idle.

Shared by the benchmarks so they time steps and rows the same way.
"""

import statistics
import time


def settle(slice_seconds=0.05, idle_share=0.05, longest=3.0):
    """Returns once this process's threads have been idle for a `slice_seconds` slice (they used
    under `idle_share` of one core in it), or after `longest` seconds.

    Runtimes keep their worker threads spinning for a while after their last op (OpenBLAS,
    OpenMP under torch and ONNX Runtime, TensorFlow's own pool), so a contender timed right after
    another one shares the cores with its spinning threads: measured here, a MiniLM encoder's
    forward of 32 x 128 tokens took 337 ms right after a numpy sgemm, 288 ms alone. Each timed
    call of the alternating benchmarks starts after `settle()`.
    """
    deadline = time.monotonic() + longest
    while time.monotonic() < deadline:
        cpu = time.process_time()
        time.sleep(slice_seconds)
        if time.process_time() - cpu < idle_share * slice_seconds:
            return


def alternating_rates(runs, batches, rounds):
    """{name: median rows/s}: every round runs each contestant once over `batches`, in turn (the
    order reversed every other round, so a warming or cooling machine favours no one)."""
    for run in runs.values():  # warm up: graphs traced, shapes seen
        for batch in batches[:2]:
            run(batch)
    rates = {name: [] for name in runs}
    rows = sum(len(b) for b in batches)
    for round_index in range(rounds):
        order = list(runs) if round_index % 2 == 0 else list(reversed(runs))
        for name in order:
            settle()
            started = time.perf_counter()
            for batch in batches:
                runs[name](batch)
            rates[name].append(rows / (time.perf_counter() - started))
    return {name: statistics.median(values) for name, values in rates.items()}


class StepTimer:
    """Times batch ends; `rate(skip)` = steps/s over the steps after the first `skip`."""

    def __init__(self):
        import keras

        timer = self

        class _Callback(keras.callbacks.Callback):
            def on_train_batch_end(self, batch, logs=None):
                timer.times.append(time.perf_counter())

        self.times = []
        self.callback = _Callback()

    def rate(self, skip):
        timed = self.times[skip - 1:]
        return (len(timed) - 1) / (timed[-1] - timed[0])
