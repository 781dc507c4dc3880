"""TF-Text's WordPiece learner, taught words that continue a word (`##` words).

`build_vocabulary` runs TF-Text's learner (`wordpiece_tokenizer_learner_lib.learn`) on word
counts. That learner makes `##` candidates only from substrings that start inside a word. A
vocabulary for raw Korean text learned on morphemes (`count_words(..., morpheme_suffixes=True)`)
also has words that are known to continue a word: the later morphemes of an eojeol, counted as
`"##" + morpheme` ("##은", "##입니다"). Every substring of such a word that starts at its first
character must become a `##` candidate too, and when the learner re-splits words with the
current vocabulary (iterations after the first), such a word must be matched with `##` pieces
from its first character on.

The learner's public function cannot say that. Prefixing those words with a private-use
sentinel and dropping the sentinel's tokens afterwards does not work either: the sentinel
forms ("<S>입니다") enter the vocabulary in the first iteration with the same counts as the
`##` forms, and from the second iteration on the learner's greedy re-split matches them
whole, so "##입니다" loses its counts and only single-character `##` pieces survive.

So this module runs the learner's own algorithm -- its thresholds, filters, candidate counts,
prefix discounting and binary search, in the same order and with the same ties -- with that
one difference: a continuation word's pieces all carry the joiner. With no continuation words
it returns exactly what `wordpiece_tokenizer_learner_lib.learn` returns (a test checks this).
The learner's helpers that need no change are called from its module.
"""

from typing import List, Mapping, Optional, Sequence, Tuple

from tensorflow_text.tools.wordpiece_vocab import wordpiece_tokenizer_learner_lib as tf_text_learner

_Word = Tuple[str, int, bool]  # (characters without the joiner, count, continues a word)


def split_continuation_words(word_counts, joiner: str = "##") -> List[_Word]:
    """`(word, count)` pairs -> `(characters, count, is_continuation)`: a word written
    `joiner + characters` (with at least one character) continues a word."""
    words = []
    for word, count in word_counts:
        if word.startswith(joiner) and len(word) > len(joiner):
            words.append((word[len(joiner) :], count, True))
        else:
            words.append((word, count, False))
    return words


def has_continuation_words(words: Mapping[str, int], joiner: str = "##") -> bool:
    return any(word.startswith(joiner) and len(word) > len(joiner) for word in words)


def learn(
    word_counts: Mapping[str, int],
    vocab_size: int,
    reserved_tokens: Sequence[str],
    upper_thresh: Optional[int] = int(1e7),
    lower_thresh: Optional[int] = 10,
    num_iterations: int = 4,
    max_input_tokens: Optional[int] = int(5e6),
    max_token_length: int = 50,
    max_unique_chars: int = 1000,
    slack_ratio: float = 0.05,
    joiner: str = "##",
) -> List[str]:
    """`wordpiece_tokenizer_learner_lib.learn(..., include_joiner_token=True)` where a word
    written `joiner + characters` is a continuation word (see the module docstring).

    Lengths (`max_token_length`) and the alphabet count a continuation word's characters
    without the joiner. Arguments as the TF-Text function's.
    """
    params = tf_text_learner.Params(
        upper_thresh, lower_thresh, num_iterations, max_input_tokens, max_token_length, max_unique_chars,
        vocab_size, slack_ratio, True, joiner, list(reserved_tokens),
    )
    pairs = list(word_counts.items())
    upper_search, lower_search = tf_text_learner.get_search_threshs(pairs, upper_thresh, lower_thresh)
    words = [
        (chars, count, continues)
        for (word, _), (chars, count, continues) in zip(pairs, split_continuation_words(pairs, joiner))
        if len(chars) <= max_token_length and word not in params.reserved_tokens
    ]
    allowed_chars = tf_text_learner.get_allowed_chars([(chars, count) for chars, count, _ in words], max_unique_chars)
    words = _filter_input_words(words, allowed_chars, max_input_tokens)
    return _learn_binary_search(words, lower_search, upper_search, params)


def _filter_input_words(words: List[_Word], allowed_chars, max_input_tokens) -> List[_Word]:
    """`filter_input_words` on `_Word`s (the same stable sort by count and cut)."""
    words = sorted(words, key=lambda word: word[1], reverse=True)
    kept = []
    for chars, count, continues in words:
        if max_input_tokens not in (None, -1) and len(kept) >= max_input_tokens:
            break
        if all(char in allowed_chars for char in chars):
            kept.append((chars, count, continues))
    return kept


def _learn_binary_search(words: List[_Word], lower: int, upper: int, params) -> List[str]:
    """`learn_binary_search`, calling `_learn_with_thresh` (a loop where TF-Text recurses)."""
    slack_count = max(params.slack_ratio * params.vocab_size, 0)
    while True:
        thresh = (upper + lower) // 2
        vocab = _learn_with_thresh(words, thresh, params)
        within_slack = len(vocab) <= params.vocab_size and params.vocab_size - len(vocab) <= slack_count
        if within_slack or lower >= upper or thresh <= 1:
            return vocab
        if len(vocab) > params.vocab_size:
            lower = thresh + 1
        else:
            upper = thresh - 1


def _learn_with_thresh(words: List[_Word], thresh: int, params) -> List[str]:
    """`learn_with_thresh`: a continuation word's substrings from its first character on
    carry the joiner, and re-splits match it with joined pieces from the start."""
    joiner = params.joiner
    char_tokens = tf_text_learner.extract_char_tokens([(chars, count) for chars, count, _ in words])
    curr_tokens = tf_text_learner.ensure_all_tokens_exist(char_tokens, {}, True, joiner)

    for iteration in range(params.num_iterations):
        subtokens = [dict() for _ in range(params.max_token_length + 1)]
        for chars, count, continues in words:
            if iteration == 0:
                split_indices = range(1, len(chars) + 1)
            else:
                split_indices = _split_indices(chars, continues, curr_tokens, joiner)
                if not split_indices:
                    continue
            start = 0
            for index in split_indices:
                for end in range(start + 1, len(chars) + 1):
                    subtoken = chars[start:end]
                    length = len(subtoken)
                    if start > 0 or continues:
                        subtoken = joiner + subtoken
                    counts = subtokens[length]
                    counts[subtoken] = counts.get(subtoken, 0) + count
                start = index

        next_tokens = {}
        for length in range(params.max_token_length, 0, -1):
            for token, count in subtokens[length].items():
                if count >= thresh:
                    next_tokens[token] = count
                # Discount every prefix by the count of the longer token (as TF-Text does).
                if len(token) > length:  # the token carries the joiner
                    for i in range(1 + len(joiner), length + len(joiner)):
                        prefix = token[0:i]
                        if prefix in subtokens[i - len(joiner)]:
                            subtokens[i - len(joiner)][prefix] -= count
                else:
                    for i in range(1, length):
                        prefix = token[0:i]
                        if prefix in subtokens[i]:
                            subtokens[i][prefix] -= count

        curr_tokens = tf_text_learner.ensure_all_tokens_exist(char_tokens, next_tokens, True, joiner)

    return tf_text_learner.generate_final_vocabulary(params.reserved_tokens, char_tokens, curr_tokens)


def _split_indices(chars: str, continues: bool, curr_tokens, joiner: str):
    """`get_split_indices` (greedy longest match), joined from the start for a continuation word."""
    indices = []
    start = 0
    while start < len(chars):
        end = len(chars)
        while end > start:
            subtoken = chars[start:end]
            if start > 0 or continues:
                subtoken = joiner + subtoken
            if subtoken in curr_tokens:
                indices.append(end)
                break
            end -= 1
        if end == start:
            return None
        start = end
    return indices

