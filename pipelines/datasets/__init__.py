"""Dataset readers and `tf.data` builders on `pipelines`: sources in, model-ready tensors out, and back.

- `squad`: SQuAD v1.1 / v2.0 reading, sliding-window features and span decoding.
- `glue`: the GLUE tasks (and IMDB) from TFDS, with their text fields, labels and metrics.
- `text_files`: generic CSV / TSV / JSONL classification and regression files, label vocabularies.
- `conll`: CoNLL-2003 NER files and TFDS, tag schemes, word/sub-token alignment and aggregation.
- `swag`: SWAG multiple choice from its CSV files.
- `sts`: sentence-similarity pairs (KorSTS, STS-B) from their TSV files.
- `batching`: padding to the longest (multiple of 8), length bucketing, static shapes for TPU.
"""
