"""Task-specific data pipelines built on `pipelines` (datasets in, model-ready arrays out).

- `pipelines.tasks.squad`: SQuAD v1.1 / v2.0 reading, sliding-window features
  and span decoding.
"""
