"""Token bytes against the tokenizers' own decode, for byte-level BPE and SentencePiece."""
import random

from grammar_fixtures import smol_tokenizer, tiny_sentencepiece

from kvx.grammar.tokens.vocab import BYTE_LEVEL, SENTENCEPIECE, vocab_for


def test_byte_level_bytes_match_decode():
    tok = smol_tokenizer()
    vocab = vocab_for(tok)
    assert vocab.kind == BYTE_LEVEL and vocab.vocab_size == 49152 and vocab.eos_ids == [2]
    assert all(vocab.token_bytes[i] is None for i in tok.all_special_ids)
    rng = random.Random(0)
    texts = ['{"name": "Zoë", "n": -1.5e3}', "naïve 你好 \n\t tabs", '["a","b"]']
    for text in texts:
        ids = tok.encode(text, add_special_tokens=False)
        assert b"".join(vocab.token_bytes[i] for i in ids) == text.encode()
    for _ in range(200):  # random ids: concatenated bytes decode like the tokenizer decodes
        ids = [rng.randrange(17, len(tok)) for _ in range(3)]
        data = b"".join(vocab.token_bytes[i] for i in ids)
        assert data.decode("utf-8", errors="replace") == tok.decode(ids)


def test_sentencepiece_bytes_match_decode():
    tok = tiny_sentencepiece()
    vocab = vocab_for(tok)
    assert vocab.kind == SENTENCEPIECE
    eos = tok.convert_tokens_to_ids("</s>")
    assert vocab.eos_ids == [eos]
    for special in ("<unk>", "<s>", "</s>"):
        assert vocab.token_bytes[tok.convert_tokens_to_ids(special)] is None
    assert vocab.token_bytes[tok.convert_tokens_to_ids("<0x41>")] == b"A"
    assert vocab.token_bytes[tok.convert_tokens_to_ids("\u2581the")] == b" the"
    for text in ['{"name": "x"}', "the name é ü 你"]:
        ids = tok.encode(text, add_special_tokens=False)
        data = b"".join(vocab.token_bytes[i] for i in ids)
        # the SentencePiece decoder drops the one leading space Metaspace prepended
        assert data.decode() == " " + text if not text.startswith(" ") else text
        assert data.decode()[1:] == tok.decode(ids)
