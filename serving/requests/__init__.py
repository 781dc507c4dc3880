"""Each family's raw-text requests and readable answers, without TensorFlow (what clients run).

One module per family (`bert_keras.families` names it: `Family.requests`), beside its signature
module in `serving/signatures/`, each with:

- `INPUTS`: the signature input names it builds requests for (sets of names);
- `OUTPUTS`: the output names its answers are read by (sets of names);
- `TAKES_TEXTS`: whether its requests are built from plain texts (`--input FILE` lines);
- `FLAGS`: the command-line flags its requests read besides the texts, as `(flag, metavar,
  help)` (`bert-keras query` / `loadtest` add each once, repeatable; the values arrive as
  lists under the flag's name, `--text-b` as `text_b`);
- `request_inputs(texts, *, names, family_known, **flags)`: `{input name: rows}` (`family_known`:
  the signature's outputs told this family apart from others that take the same inputs);
- `example(signature_inputs, settings)`: `(bert-keras query arguments, REST instance)` of a request that
  works as printed (the `next:` / `try:` lines of export, serve and deploy-kit);
- `answer_lines(outputs, i, **context)`: row `i` of an answer as lines for a terminal;
- optionally `answer_context(client, signature_name, signature)`: what its answers need from
  the server besides the outputs, as `answer_lines` keywords (a classifier's `class_names`, the
  label of each probability column);
- optionally `answer_json(answer, **context)`: a row's JSON-ready answer as `bert-keras query
  --json` prints it (a classifier's probabilities named by their class, as `predict --json` does).

`serving.text_requests` picks the module by the signature's names, so a client needs no family
knowledge of its own.
"""
