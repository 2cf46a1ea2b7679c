"""Tokenizers trained with the `tokenizers` library on local text, and the text corpus Ferry's
tokenizer is compared on (tests/prep/test_text.py). Needs the project venv (tokenizers pinned in
scripts/requirements-peers.txt)."""
import glob
import os
import random

# One example per entry: ASCII, accents (precomposed and combining), CJK, emoji (ZWJ sequences,
# skin tones, flags), Arabic, Hebrew, mixed white space (tabs, NBSP, zero-width), control
# characters, contractions, numbers, special tokens written in the text, and the empty string.
BASE = [
    "",
    "Hello, world!",
    "The quick brown fox jumps over the lazy dog.",
    "  leading and trailing spaces  ",
    "multiple   spaces\tand\ttabs\nand newlines\r\nCRLF",
    "I don't think they'll've done it; we're sure it's 'quoted' and he'd say \"no\".",
    "Numbers: 3.14159, 1,000,000, 42nd, ¼ ½ ², Ⅻ, ٣٤٥, ১২৩",
    "Café, naïve, résumé, Ångström, São Paulo, niño, España, Zürich, Øresund, Łódź",
    "Combining: Cafe\u0301 nai\u0308ve A\u030angstro\u0308m n\u0303 e\u0301\u0302\u0323",
    "ÉCOLE ÉLÉMENTAIRE — ÀÇÈÌÑÒÙ",
    "İstanbul, DİYARBAKIR, ǅemal, ΟΔΟΣ, Straße, ﬁnancial ﬂow",
    "中文分词测试：我爱北京天安门。",
    "日本語のテキスト、カタカナとひらがな。",
    "한국어 텍스트입니다",
    "Mixed 中文 and English 混合 text",
    "Emoji: 😀 😂 👍🏽 👨‍👩‍👧‍👦 🇫🇷 ❤️ 🥰 🫠",
    "العربية: مرحبا بالعالم",
    "עברית: שלום עולם",
    "Русский текст с ёлкой",
    "Ελληνικά κείμενα",
    "हिन्दी पाठ",
    "ภาษาไทย",
    "NBSP:\u00a0here, thin\u2009space, ideographic\u3000space, en\u2002space",
    "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u2060wj",
    "soft\u00adhyphen and \u200eLRM\u200f marks",
    "control\x00chars\x01\x07\x1b[0m\x7f\x85end",
    "replacement \ufffd char",
    "private use \ue000\U000F0000",
    "[CLS] [SEP] [MASK] literal specials [UNK] [PAD]",
    "mask[MASK]inside and <s>roberta</s> tags <pad> <unk>",
    "FULLWIDTH ＡＢＣ１２３！",
    "Math: 𝐀𝐁𝐂 ∑∫√ x²+y²=z², α→β",
    "url https://example.com/path?q=1&r=2#frag and email a.b@c.org",
    "code: def f(x): return x**2 # comment",
    "punctuation!!! ??? ... --- ___ ''' \"\"\" ``` ~~~ @@@",
    "snake_case camelCase kebab-case SCREAMING_CASE",
    "tab\tseparated\tvalues\t",
    "\n\n\n",
    "   ",
    "a",
    "supercalifragilisticexpialidocious antidisestablishmentarianism",
    "x" * 150,
    "ab" * 300,
    "Unseen: Ꙃ ꙮ 𓀀 𐍈 ᚠ ⵣ",
    "Variation selectors ☺\ufe0f ✌\ufe0e and keycap 1\ufe0f\u20e3",
    "Hangul jamo \u1100\u1161\u11a8 and compat ㄱㅏ",
]


def long_texts():
    words = "lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod".split()
    r = random.Random(7)
    out = [" ".join(r.choice(words) for _ in range(n)) for n in (200, 1000, 5000)]
    out.append("Ünïcödé " * 400)
    out.append("漢字" * 700)
    return out


def random_texts(n=300, seed=1):
    """Random strings drawn from a mix of scripts and character classes."""
    pools = [
        "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789",
        " \t\n\u00a0\u2009\u3000\u200b",
        "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~",
        "àáâãäåæçèéêëìíîïðñòóôõöøùúûüýþÿĀāĂăĄąĆćŒœŠšŸŽžƒ",
        "\u0300\u0301\u0302\u0303\u0308\u030a\u0327\u0323",
        "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生",
        "あいうえおかきくけこアイウエオカキクケコ",
        "가나다라마바사아자차카타파하",
        "ابتثجحخدذرزسشصضطظعغفقكلمنهوي",
        "אבגדהוזחטיכלמנסעפצקרשת",
        "😀😁😂🤣😃😄😅😆😉😊👍👎👏🙏🔥✨🎉",
        "αβγδεζηθικλμνξοπρστυφχψω",
        "абвгдеёжзийклмнопрстуфхцчшщъыьэюя",
        "\x00\x01\x1f\x7f\u0085\ufeff\u00ad",
    ]
    r = random.Random(seed)
    out = []
    for _ in range(n):
        k = r.randint(0, 60)
        out.append("".join(r.choice(r.choice(pools)) for _ in range(k)))
    return out


def corpus():
    return BASE + long_texts() + random_texts()


def training_text():
    """Local text: the licenses Debian ships, plus the corpus itself (so the vocabularies hold
    accented, CJK and other scripts' pieces)."""
    lines = []
    for path in sorted(glob.glob("/usr/share/common-licenses/*"))[:12]:
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as f:
                lines += [l.strip() for l in f if l.strip()]
    lines += BASE * 3 + random_texts(200, seed=2)
    return lines


SPECIALS_BERT = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def train_all(out_dir):
    """Trains the tokenizers; returns {name: path of its tokenizer.json}."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, processors, trainers
    from tokenizers import decoders
    text = training_text()
    paths = {}

    def save(name, tk):
        p = os.path.join(out_dir, name + ".json")
        tk.save(p)
        paths[name] = p

    # BERT uncased: BertNormalizer (lowercase, accents stripped), BertPreTokenizer, [CLS] A [SEP].
    tk = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tk.normalizer = normalizers.BertNormalizer(lowercase=True)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.train_from_iterator(text, trainers.WordPieceTrainer(vocab_size=1500,
                                                           special_tokens=SPECIALS_BERT))
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", tk.token_to_id("[CLS]")), ("[SEP]", tk.token_to_id("[SEP]"))])
    save("wordpiece_uncased", tk)
    tk.enable_truncation(max_length=32)
    tk.enable_padding(length=32, pad_id=tk.token_to_id("[PAD]"), pad_token="[PAD]")
    save("wordpiece_uncased_trunc_pad", tk)

    # Truncated and padded on the left (the file's own settings).
    tk.enable_truncation(max_length=20, direction="left")
    tk.enable_padding(length=20, direction="left", pad_id=tk.token_to_id("[PAD]"),
                      pad_token="[PAD]")
    save("wordpiece_uncased_left", tk)

    # BERT cased: no lowercasing, accents kept, BertProcessing.
    tk = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=30))
    tk.normalizer = normalizers.BertNormalizer(lowercase=False, strip_accents=False)
    tk.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tk.train_from_iterator(text, trainers.WordPieceTrainer(vocab_size=1200,
                                                           special_tokens=SPECIALS_BERT))
    tk.post_processor = processors.BertProcessing(("[SEP]", tk.token_to_id("[SEP]")),
                                                  ("[CLS]", tk.token_to_id("[CLS]")))
    save("wordpiece_cased", tk)

    # GPT-2 style byte-level BPE.
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tk.decoder = decoders.ByteLevel()
    tk.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=1500, special_tokens=["<|endoftext|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tk.post_processor = processors.ByteLevel(trim_offsets=False)
    save("bytelevel_gpt2", tk)

    # RoBERTa style: byte-level BPE, add_prefix_space, <s> A </s>, a normalized lstrip <mask>.
    from tokenizers import AddedToken
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tk.train_from_iterator(text, trainers.BpeTrainer(
        vocab_size=1400, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tk.add_special_tokens([AddedToken("<mask>", lstrip=True, normalized=False)])
    tk.post_processor = processors.RobertaProcessing(("</s>", tk.token_to_id("</s>")),
                                                     ("<s>", tk.token_to_id("<s>")))
    tk.enable_truncation(max_length=40)
    save("bytelevel_roberta", tk)

    # Plain BPE: NFKC + lowercase, Whitespace pre-tokenizer, unknown token, end-of-word suffix.
    tk = Tokenizer(models.BPE(unk_token="[UNK]", end_of_word_suffix="</w>"))
    tk.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase()])
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.train_from_iterator(text, trainers.BpeTrainer(vocab_size=1000, special_tokens=["[UNK]",
                                                     "[CLS]", "[SEP]"], end_of_word_suffix="</w>",
                                                     limit_alphabet=300))
    tk.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:1 [SEP]:1", special_tokens=[("[CLS]", 1), ("[SEP]", 2)])
    save("bpe_whitespace", tk)

    # BPE with a continuing-subword prefix, fused unknowns, NFD + StripAccents, WhitespaceSplit,
    # Punctuation and individual Digits in a Sequence, an added (non-special) word token.
    tk = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##", fuse_unk=True))
    tk.normalizer = normalizers.Sequence([normalizers.NFD(), normalizers.StripAccents(),
                                          normalizers.Strip()])
    tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                                pre_tokenizers.Punctuation(),
                                                pre_tokenizers.Digits(individual_digits=True)])
    tk.train_from_iterator(text, trainers.BpeTrainer(vocab_size=800, special_tokens=["<unk>"],
                                                     continuing_subword_prefix="##",
                                                     limit_alphabet=120))
    tk.add_tokens([AddedToken("license", single_word=True)])
    save("bpe_prefix_fused", tk)

    # Metaspace (SentencePiece-like) BPE with byte fallback, NFKC, padding to a multiple.
    tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tk.normalizer = normalizers.NFKC()
    tk.pre_tokenizer = pre_tokenizers.Metaspace(prepend_scheme="first")
    specials = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    tk.train_from_iterator(text, trainers.BpeTrainer(vocab_size=900, special_tokens=specials,
                                                     limit_alphabet=100))
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tk.enable_padding(pad_to_multiple_of=8, pad_id=0, pad_token="<unk>")
    save("bpe_metaspace_bytefallback", tk)

    # Llama-2 style: no pre-tokenizer, Prepend + Replace normalizers, byte fallback, fuse_unk.
    tk = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tk.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                          normalizers.Replace(" ", "\u2581")])
    tk.train_from_iterator(text, trainers.BpeTrainer(vocab_size=900, special_tokens=specials,
                                                     limit_alphabet=150))
    tk.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    save("bpe_llama_like", tk)

    # WordLevel over Whitespace, NFC.
    tk = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tk.normalizer = normalizers.NFC()
    tk.pre_tokenizer = pre_tokenizers.Whitespace()
    tk.train_from_iterator(text, trainers.WordLevelTrainer(vocab_size=800,
                                                           special_tokens=["[UNK]"]))
    save("wordlevel", tk)
    return paths
