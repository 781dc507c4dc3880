"""google-research/bert `run_squad.py`'s window loops, transcribed: the reference the project's
vectorised windows (`pipelines.windowing`) and SQuAD features are checked against."""


def reference_spans(num_tokens, window, stride):
    """run_squad.py: `while start_offset < len(all_doc_tokens)` ... `start_offset += min(length, doc_stride)`."""
    spans, start = [], 0
    while start < num_tokens:
        length = min(num_tokens - start, window)
        spans.append((start, length))
        if start + length == num_tokens:
            break
        start += min(length, stride)
    return spans or [(0, 0)]  # this project: an empty text still gets one (empty) window


def reference_is_max_context(spans, span_index, position):
    """run_squad.py's `_check_is_max_context`, as written."""
    best_score, best_index = None, None
    for index, (start, length) in enumerate(spans):
        end = start + length - 1
        if position < start or position > end:
            continue
        score = min(position - start, end - position) + 0.01 * length
        if best_score is None or score > best_score:
            best_score, best_index = score, index
    return span_index == best_index
