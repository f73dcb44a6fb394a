"""Free text that loops: a greedy small model, once it repeats itself, rarely stops ("The order was
last last last last ...", "I am sorry for the inconvenience. I am sorry for ..."); the string then
runs to its maxLength or the token budget, and the record is valid but its summary is noise.

`RepeatGuard` is a token veto (kvx.engine.api.TokenVeto) for one record, in the manner of
`no_repeat_ngram_size` (the setting BART's summariser ships with, n = 3): inside one JSON string
it refuses a token that would write an n-gram of tokens the same string already holds (tokens
compared as words, case and surrounding spaces aside: `I am sorry` at the start of a summary and
` I am sorry` later are one n-gram); the engine then takes the next best token. Right values stay
writable: an n-gram without letters counts only at 3n tokens (dates, phone numbers and ids such
as `2022-01-01` or `555-555-5555` pass, `1_1_1_1_1_1_...` does not); a repeat whose last 3n
tokens the record's own text holds is a copy (`XXXX XXXX XXXX` where the text has it, not forty
XXXX in a row); a token with a quote or backslash (the string's end, an escape) is never
refused. Only the inside of strings is looked at (keys the grammar leaves open too): numbers,
literals and punctuation between strings are never touched.
"""
from __future__ import annotations

import re

from kvx.spelling import Spelling

NO_REPEAT_NGRAM = 3  # tokens; the --no-repeat-ngram default (0 = off)
UNLETTERED = 3  # an n-gram without letters counts at this many times n tokens (`_1_1_1_1`, `12/20. 12/20.`)
QUOTE, BACKSLASH = ord('"'), ord("\\")
WHITESPACE = re.compile(r"\s+")


def _squeezed(text: str) -> str:
    """Lower case, each run of whitespace one space (kept at the ends: " am" is not in "came")."""
    return WHITESPACE.sub(" ", text.lower())


class RepeatGuard:
    def __init__(self, text: str, n: int, spelling: Spelling):
        self.text = _squeezed(text)
        self.n = n
        self.spelling = spelling
        self._sizes = ((n, True), (UNLETTERED * n, False))  # (n-gram length, counts only with a letter)
        # the output scanned so far, and after each of its tokens: (inside a string, after a
        # backslash, index of the token that opened the string); kept across calls, a step at a time
        self._ids: list[int] = []
        self._states: list[tuple[bool, bool, int]] = [(False, False, 0)]
        # the (string, length, n-gram of words) each scanned token ends, and how often each is held:
        # a check looks its n-gram up instead of reading the whole string again
        self._ended: list[tuple[tuple, ...]] = []
        self._seen: dict[tuple, int] = {}
        self._words: dict[int, bytes] = {}

    def vetoes(self, output_ids: list[int], token: int) -> bool:
        inside, escaped, opened = self._scan(output_ids)
        if not inside or escaped or self.n <= 0:
            return False
        spelt = self.spelling.of(token)
        if QUOTE in spelt or BACKSLASH in spelt:
            return False
        end = len(output_ids)
        for size, letters in self._sizes:
            if end - size < opened:  # the string holds fewer than size - 1 tokens
                continue
            gram = tuple(self._word(t) for t in output_ids[end - size + 1:]) + (self._word(token),)
            if self._seen.get((opened, size, gram)) and self._invented(output_ids[opened + 1:], token, size, letters):
                return True
        return False

    def allowed(self, output_ids: list[int]) -> list[int] | None:
        return None  # refuses a few tokens; names none

    def _word(self, token: int) -> bytes:
        """A token as a word: `The`, ` the` and ` THE` are the same one."""
        word = self._words.get(token)
        if word is None:
            word = self._words[token] = self.spelling.of(token).strip().lower()
        return word

    def _invented(self, value: list[int], token: int, size: int, letters: bool) -> bool:
        """Whether the repeat that value + token ends with counts: it has a letter (where asked) and
        the text does not hold it."""
        spelt = self.spelling(value[len(value) - size + 1:] + [token]).decode("utf-8", errors="ignore")
        if letters and not any(c.isalpha() for c in spelt):
            return False
        # a copy: the text holds the last 3n tokens (or the whole value), not only the n-gram, so a
        # copied `XXXX XXXX XXXX` passes but forty more XXXX do not
        window = value[max(0, len(value) - UNLETTERED * self.n + 1):] + [token]
        return _squeezed(self.spelling(window).decode("utf-8", errors="ignore")) not in self.text

    def _scan(self, output_ids: list[int]) -> tuple[bool, bool, int]:
        """Where output_ids leave the JSON text: inside a string or not (a dropped draft may have
        changed the tail since the last call, so the common prefix is kept and the rest rescanned)."""
        keep = min(len(self._ids), len(output_ids))
        if output_ids[:keep] != self._ids[:keep]:
            keep = next(i for i, (a, b) in enumerate(zip(output_ids, self._ids)) if a != b)
        for ended in self._ended[keep:]:
            for key in ended:
                self._seen[key] -= 1
        del self._ids[keep:], self._ended[keep:], self._states[keep + 1:]
        inside, escaped, opened = self._states[-1]
        for i in range(keep, len(output_ids)):
            for byte in self.spelling.of(output_ids[i]):
                if escaped:
                    escaped = False
                elif inside and byte == BACKSLASH:
                    escaped = True
                elif byte == QUOTE:
                    inside, opened = not inside, i
            self._ids.append(output_ids[i])
            self._states.append((inside, escaped, opened))
            ended: tuple[tuple, ...] = ()
            if inside and opened < i:  # a token of the string opened at `opened`
                ended = tuple((opened, size, tuple(self._word(t) for t in self._ids[i - size + 1:]))
                              for size, _ in self._sizes if i - size >= opened)
                for key in ended:
                    self._seen[key] = self._seen.get(key, 0) + 1
            self._ended.append(ended)
        return inside, escaped, opened
