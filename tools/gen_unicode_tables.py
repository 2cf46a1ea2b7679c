#!/usr/bin/env python3
"""Generates src/prep/unicode_tables.inc: the Unicode data the tokenizers in src/prep need.

Run with the project venv's Python (3.11: unicodedata is Unicode 14.0.0) and the pinned
`tokenizers` (scripts/requirements-peers.txt):
    .venv/bin/python tools/gen_unicode_tables.py > src/prep/unicode_tables.inc

The general categories, combining classes and compositions are Unicode 14.0.0. The library
does not use one Unicode version: BertNormalizer / BertPreTokenizer / Punctuation take their
categories from the `unicode_categories` crate (Unicode 8.0 data), StripAccents and the
normalization forms from `unicode-normalization-alignments`, lowercase and numbers from Rust's
std, the Whitespace and GPT-2 patterns from Oniguruma (newer than 14.0). So the predicates those
steps use, the decompositions and the lowercase mapping are measured here on every code point
through the pinned library's own components (the `LIBRARY_*` tables below); where the library
and Unicode 14.0 agree they are the same sets.

Tables (all sorted by code point, ranges where possible):
  kCategoryRanges     general category of every assigned code point (unlisted: Cn)
  kCombiningRanges    canonical combining class, where not 0 (0 for the marks the library's
                      normalization data does not have)
  kDecompositions     full (recursive) canonical and compatibility decompositions, Hangul
                      syllables excluded (computed algorithmically)
  kCompositions       canonical pairs that compose (primary composites, exclusions removed)
  kLowercase          the per-character full lowercase mapping, where not the character itself
  kWhiteSpace         the White_Space property (PropList.txt; Python has no accessor, the list
                      below is Unicode's, unchanged since 6.3)
  kLibrary*           the library's predicates, measured (see above)
"""
import sys
import unicodedata

CATS = ["Cn", "Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd",
        "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf",
        "Cs", "Co"]
WHITE_SPACE = [(0x9, 0xD), (0x20, 0x20), (0x85, 0x85), (0xA0, 0xA0), (0x1680, 0x1680),
               (0x2000, 0x200A), (0x2028, 0x2029), (0x202F, 0x202F), (0x205F, 0x205F),
               (0x3000, 0x3000)]
MAX = 0x110000
HANGUL = range(0xAC00, 0xD7A4)


def rows(items, width=100):
    """The items joined by commas, wrapped at `width` columns, each line ending in a comma."""
    out, line = [], ""
    for it in items:
        if line and len(line) + len(it) + 1 > width:
            out.append(line)
            line = ""
        line += it + ","
    if line:
        out.append(line)
    return "\n".join(out) + "\n"


def ranges(values):
    """[(start, end, value)] for runs of equal non-None values."""
    out = []
    for cp, v in enumerate(values):
        if v is None:
            continue
        if out and out[-1][1] == cp - 1 and out[-1][2] == v:
            out[-1][1] = cp
        else:
            out.append([cp, cp, v])
    return out


def full_decomp(cp, compat):
    d = unicodedata.decomposition(chr(cp))
    if not d or cp in HANGUL:
        return [cp]
    parts = d.split()
    if parts[0].startswith("<"):
        if not compat:
            return [cp]
        parts = parts[1:]
    out = []
    for p in parts:
        out += full_decomp(int(p, 16), compat)
    return out


def library_tables():
    """What the pinned tokenizers library does with each code point, one component at a time."""
    from tokenizers import normalizers as N, pre_tokenizers as P
    clean = N.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False,
                             lowercase=False)
    bert_strip = N.BertNormalizer(clean_text=False, handle_chinese_chars=False,
                                  strip_accents=True, lowercase=False)
    strip_accents, nfd, nfkd, lower = N.StripAccents(), N.NFD(), N.NFKD(), N.Lowercase()
    bert_pre, whitespace = P.BertPreTokenizer(), P.Whitespace()
    digits = P.Digits(individual_digits=True)
    gpt2 = P.ByteLevel(add_prefix_space=False, use_regex=True)
    t = {k: set() for k in ("other", "punct", "mn", "marks", "word", "letter", "number",
                            "numeric")}
    decomp = {}  # cp -> (NFD, NFKD) where the library's differ from unicodedata's
    unordered = set()  # combining marks the library's normalization does not reorder (class 0)
    lowercase = {}
    for cp in range(MAX):
        if 0xD800 <= cp < 0xE000:
            continue
        c = chr(cp)
        # clean_text drops "other" (Cc Cf Co) but \t \n \r, NUL and U+FFFD are handled apart.
        if cp not in (0, 9, 10, 13, 0xFFFD) and clean.normalize_str("a" + c + "b") == "ab":
            t["other"].add(cp)
        r = bert_pre.pre_tokenize_str("a" + c + "b")
        if len(r) == 3 and r[1][0] == c:
            t["punct"].add(cp)
        d, kd = nfd.normalize_str(c), nfkd.normalize_str(c)
        if d == c:  # marks without a decomposition: removed alone
            if bert_strip.normalize_str(c) == "":
                t["mn"].add(cp)
            if strip_accents.normalize_str(c) == "":
                t["marks"].add(cp)
        if (d, kd) != (unicodedata.normalize("NFD", c), unicodedata.normalize("NFKD", c)):
            decomp[cp] = (d, kd)
        # After U+0345 (class 240) a mark of a lower class moves in front, if the library knows
        # its class.
        k = unicodedata.combining(c)
        if 0 < k < 240 and nfd.normalize_str("a\u0345" + c) != "a" + c + "\u0345":
            unordered.add(cp)
        lo = lower.normalize_str(c)
        if lo != c:
            lowercase[cp] = lo
        r = whitespace.pre_tokenize_str("x" + c + "x")
        if len(r) == 1 and r[0][0] == "x" + c + "x":
            t["word"].add(cp)
        if len(gpt2.pre_tokenize_str("a" + c)) == 1:
            t["letter"].add(cp)
        if len(gpt2.pre_tokenize_str("1" + c)) == 1:
            t["number"].add(cp)
        if len(digits.pre_tokenize_str("a" + c + "b")) == 3:
            t["numeric"].add(cp)
    return t, decomp, lowercase, unordered


def set_ranges(values):
    out = []
    for cp in sorted(values):
        if out and out[-1][1] == cp - 1:
            out[-1][1] = cp
        else:
            out.append([cp, cp])
    return out


def main():
    import tokenizers
    lib, lib_decomp, lib_lower, lib_unordered = library_tables()
    w = sys.stdout.write
    w("// Generated by tools/gen_unicode_tables.py from Python %s's unicodedata (Unicode %s)\n"
      "// and, for the kLibrary* tables, decompositions and lowercase, tokenizers %s.\n"
      % (sys.version.split()[0], unicodedata.unidata_version, tokenizers.__version__))
    w("// Do not edit. Included by prep/unicode.cc only.\n\n")
    w("// clang-format off\n")
    w("inline constexpr char kUnicodeVersion[] = \"%s\";\n\n" % unicodedata.unidata_version)

    cats = []
    for cp in range(MAX):
        c = unicodedata.category(chr(cp))
        cats.append(None if c == "Cn" else CATS.index(c))
    r = ranges(cats)
    w("struct CategoryRange { char32_t first, last; uint8_t category; };\n")
    w("inline constexpr CategoryRange kCategoryRanges[] = {\n")
    w(rows("{0x%X,0x%X,%d}" % (a, b, v) for a, b, v in r))
    w("};\n\n")

    # Combining classes as the library's normalization has them (unknown marks: 0).
    ccc = [None if cp in lib_unordered else unicodedata.combining(chr(cp)) or None
           for cp in range(MAX)]
    w("struct CombiningRange { char32_t first, last; uint8_t ccc; };\n")
    w("inline constexpr CombiningRange kCombiningRanges[] = {\n")
    w(rows("{0x%X,0x%X,%d}" % (a, b, v) for a, b, v in ranges(ccc)))
    w("};\n\n")

    flat = []
    entries = []
    for cp in range(MAX):
        if cp in HANGUL or (not unicodedata.decomposition(chr(cp)) and cp not in lib_decomp):
            continue
        canon = full_decomp(cp, False)
        compat = full_decomp(cp, True)
        if cp in lib_decomp:  # the library's normalization data, where it differs
            canon = [ord(x) for x in lib_decomp[cp][0]]
            compat = [ord(x) for x in lib_decomp[cp][1]]
        co = len(flat); flat += canon
        xo = len(flat); flat += compat
        entries.append((cp, co, len(canon), xo, len(compat)))
    w("inline constexpr char32_t kDecompositionData[] = {\n")
    w(rows("0x%X" % c for c in flat))
    w("};\n")
    w("struct Decomposition { char32_t cp; uint16_t canon_offset; uint8_t canon_len;"
      " uint16_t compat_offset; uint8_t compat_len; };\n")
    assert len(flat) < 65536
    w("inline constexpr Decomposition kDecompositions[] = {\n")
    w(rows("{0x%X,%d,%d,%d,%d}" % e for e in entries))
    w("};\n\n")

    pairs = []
    for cp in range(MAX):
        if cp in HANGUL:
            continue
        d = unicodedata.decomposition(chr(cp))
        if not d or d.startswith("<"):
            continue
        parts = [int(p, 16) for p in d.split()]
        if len(parts) != 2:
            continue
        # Composition exclusions (and non-starter decompositions) are the composites NFC does
        # not produce.
        if unicodedata.normalize("NFC", chr(cp)) != chr(cp):
            continue
        if cp in lib_decomp and lib_decomp[cp][0] == chr(cp):  # the library does not know it
            continue
        pairs.append((parts[0], parts[1], cp))
    pairs.sort()
    w("struct Composition { char32_t first, second, composite; };\n")
    w("inline constexpr Composition kCompositions[] = {\n")
    w(rows("{0x%X,0x%X,0x%X}" % p for p in pairs))
    w("};\n\n")

    lower_flat = []
    lower = []
    for cp in sorted(lib_lower):  # Rust's char::to_lowercase, as the library has it
        lo = lib_lower[cp]
        lower.append((cp, len(lower_flat), len(lo)))
        lower_flat += [ord(c) for c in lo]
    w("inline constexpr char32_t kLowercaseData[] = {\n")
    w(rows("0x%X" % c for c in lower_flat))
    w("};\n")
    w("struct Lowercase { char32_t cp; uint16_t offset; uint8_t len; };\n")
    w("inline constexpr Lowercase kLowercase[] = {\n")
    w(rows("{0x%X,%d,%d}" % e for e in lower))
    w("};\n\n")

    w("struct CodeRange { char32_t first, last; };\n")
    w("inline constexpr CodeRange kWhiteSpace[] = {\n")
    w(rows("{0x%X,0x%X}" % (a, b) for a, b in WHITE_SPACE))
    w("};\n")
    names = [("other", "kLibraryOther", "BertNormalizer clean_text drops (Cc Cf Co, Unicode 8.0)"),
             ("punct", "kLibraryPunctuation", "BertPreTokenizer / Punctuation isolate (P*)"),
             ("mn", "kLibraryNonspacingMark", "BertNormalizer strip_accents drops (Mn)"),
             ("marks", "kLibraryMark", "StripAccents drops (Mn Mc Me)"),
             ("word", "kLibraryWord", "\\w of the Whitespace pattern"),
             ("letter", "kLibraryLetter", "\\p{L} of the GPT-2 pattern"),
             ("number", "kLibraryNumber", "\\p{N} of the GPT-2 pattern"),
             ("numeric", "kLibraryNumeric", "Digits' char::is_numeric")]
    for key, name, what in names:
        w("// %s\n" % what)
        w("inline constexpr CodeRange %s[] = {\n" % name)
        w(rows("{0x%X,0x%X}" % (a, b) for a, b in set_ranges(lib[key])))
        w("};\n")
    w("// clang-format on\n")


if __name__ == "__main__":
    main()
