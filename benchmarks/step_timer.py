"""`StepTimer`: steps/s of `model.fit`, measured from batch-end callbacks.

Shared by the training benchmarks so they time steps the same way.
"""

import time


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
