"""Example scripts on the public API (`bert_keras.tasks`, `serving`, `pipelines`), shipped in the package.

`quickstart.py` is the whole workflow, top to bottom; `bert-keras quickstart` runs it, and so does
`python examples/quickstart.py` in a checkout. Examples never import `bert_keras.cli` (a test checks).
"""
