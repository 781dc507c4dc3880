"""serving: exports (SavedModels with the tokenizer in the graph), the op audit, the embedded
TF Serving-compatible server, clients and the deploy kit. Quiet TensorFlow logs on import, as
`pipelines` and `bert_keras` (`pipelines.tensorflow_logs`)."""

import pipelines  # noqa: F401  (configures TensorFlow's logs before anything here loads it)
