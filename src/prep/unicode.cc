// Tables: prep/unicode_tables.inc (tools/gen_unicode_tables.py). Lookups are binary searches.
#include "prep/unicode.h"

#include <algorithm>
#include <cstdint>

namespace ferry::prep::unicode {
namespace {

#include "prep/unicode_tables.inc"

constexpr char32_t kSBase = 0xAC00, kLBase = 0x1100, kVBase = 0x1161, kTBase = 0x11A7;
constexpr int kLCount = 19, kVCount = 21, kTCount = 28, kNCount = kVCount * kTCount,
              kSCount = kLCount * kNCount;

// The range of `table` (sorted by .first, disjoint) that holds c, or nullptr.
template <typename T, size_t N>
const T* FindRange(const T (&table)[N], char32_t c) {
  const T* it =
      std::upper_bound(table, table + N, c, [](char32_t v, const T& r) { return v < r.first; });
  if (it == table) return nullptr;
  --it;
  return c <= it->last ? it : nullptr;
}

template <typename T, size_t N>
const T* FindCp(const T (&table)[N], char32_t c) {
  const T* it =
      std::lower_bound(table, table + N, c, [](const T& r, char32_t v) { return r.cp < v; });
  return it != table + N && it->cp == c ? it : nullptr;
}

void Decompose(char32_t c, bool compat, std::u32string* out) {
  if (c >= kSBase && c < kSBase + kSCount) {
    int s = static_cast<int>(c - kSBase);
    out->push_back(kLBase + s / kNCount);
    out->push_back(kVBase + (s % kNCount) / kTCount);
    if (s % kTCount != 0) out->push_back(kTBase + s % kTCount);
    return;
  }
  const Decomposition* d = FindCp(kDecompositions, c);
  if (d == nullptr) {
    out->push_back(c);
    return;
  }
  const char32_t* p = kDecompositionData + (compat ? d->compat_offset : d->canon_offset);
  out->append(p, compat ? d->compat_len : d->canon_len);
}

// The primary composite of (a, b), or 0.
char32_t Compose(char32_t a, char32_t b) {
  if (a >= kLBase && a < kLBase + kLCount && b >= kVBase && b < kVBase + kVCount)
    return kSBase + ((a - kLBase) * kVCount + (b - kVBase)) * kTCount;
  if (a >= kSBase && a < kSBase + kSCount && (a - kSBase) % kTCount == 0 && b > kTBase &&
      b < kTBase + kTCount)
    return a + (b - kTBase);
  const Composition* it =
      std::lower_bound(std::begin(kCompositions), std::end(kCompositions), std::pair(a, b),
                       [](const Composition& r, const std::pair<char32_t, char32_t>& v) {
                         return r.first < v.first || (r.first == v.first && r.second < v.second);
                       });
  if (it != std::end(kCompositions) && it->first == a && it->second == b) return it->composite;
  return 0;
}

}  // namespace

const char* Version() {
  return kUnicodeVersion;
}

bool DecodeUtf8(std::string_view text, std::u32string* out, size_t* bad_offset) {
  out->reserve(out->size() + text.size());
  size_t i = 0, n = text.size();
  auto fail = [&]() {
    if (bad_offset != nullptr) *bad_offset = i;
    return false;
  };
  while (i < n) {
    auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      out->push_back(b);
      ++i;
      continue;
    }
    int len;
    char32_t c, min;
    if ((b & 0xE0) == 0xC0) {
      len = 2, c = b & 0x1F, min = 0x80;
    } else if ((b & 0xF0) == 0xE0) {
      len = 3, c = b & 0x0F, min = 0x800;
    } else if ((b & 0xF8) == 0xF0) {
      len = 4, c = b & 0x07, min = 0x10000;
    } else {
      return fail();
    }
    if (i + len > n) return fail();
    for (int k = 1; k < len; ++k) {
      auto cb = static_cast<unsigned char>(text[i + k]);
      if ((cb & 0xC0) != 0x80) return fail();
      c = (c << 6) | (cb & 0x3F);
    }
    if (c < min || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) return fail();
    out->push_back(c);
    i += len;
  }
  return true;
}

void AppendUtf8(char32_t c, std::string* out) {
  if (c < 0x80) {
    out->push_back(static_cast<char>(c));
  } else if (c < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (c >> 6)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else if (c < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (c >> 12)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (c >> 18)));
    out->push_back(static_cast<char>(0x80 | ((c >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((c >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
}

std::string EncodeUtf8(std::u32string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char32_t c : text) AppendUtf8(c, &out);
  return out;
}

Category GetCategory(char32_t c) {
  const CategoryRange* r = FindRange(kCategoryRanges, c);
  return r == nullptr ? Category::kCn : static_cast<Category>(r->category);
}

bool IsLibraryOther(char32_t c) {
  return FindRange(kLibraryOther, c) != nullptr;
}
bool IsLibraryPunctuation(char32_t c) {
  return FindRange(kLibraryPunctuation, c) != nullptr;
}
bool IsLibraryNonspacingMark(char32_t c) {
  return FindRange(kLibraryNonspacingMark, c) != nullptr;
}
bool IsLibraryMark(char32_t c) {
  return FindRange(kLibraryMark, c) != nullptr;
}
bool IsWordChar(char32_t c) {
  return FindRange(kLibraryWord, c) != nullptr;
}
bool IsLibraryLetter(char32_t c) {
  return FindRange(kLibraryLetter, c) != nullptr;
}
bool IsLibraryNumber(char32_t c) {
  return FindRange(kLibraryNumber, c) != nullptr;
}
bool IsLibraryNumeric(char32_t c) {
  return FindRange(kLibraryNumeric, c) != nullptr;
}

bool IsWhiteSpace(char32_t c) {
  return FindRange(kWhiteSpace, c) != nullptr;
}

uint8_t CombiningClass(char32_t c) {
  const CombiningRange* r = FindRange(kCombiningRanges, c);
  return r == nullptr ? 0 : r->ccc;
}

void AppendLowercase(char32_t c, std::u32string* out) {
  if (c < 0x80) {
    out->push_back(c >= 'A' && c <= 'Z' ? c + 32 : c);
    return;
  }
  const Lowercase* l = FindCp(kLowercase, c);
  if (l == nullptr) {
    out->push_back(c);
    return;
  }
  out->append(kLowercaseData + l->offset, l->len);
}

std::u32string Normalize(std::u32string_view text, Form form) {
  bool compat = form == Form::kNfkd || form == Form::kNfkc;
  std::u32string d;
  d.reserve(text.size());
  for (char32_t c : text) {
    if (c < 0x80) {
      d.push_back(c);
      continue;
    }
    Decompose(c, compat, &d);
  }
  // Canonical ordering: a stable sort of each run of non-starters by combining class.
  for (size_t i = 0; i < d.size();) {
    if (CombiningClass(d[i]) == 0) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < d.size() && CombiningClass(d[j]) != 0) ++j;
    if (j - i > 1)
      std::stable_sort(
          d.begin() + static_cast<std::ptrdiff_t>(i), d.begin() + static_cast<std::ptrdiff_t>(j),
          [](char32_t a, char32_t b) { return CombiningClass(a) < CombiningClass(b); });
    i = j;
  }
  if (form == Form::kNfd || form == Form::kNfkd) return d;
  // Canonical composition.
  std::u32string out;
  out.reserve(d.size());
  size_t starter = 0;
  bool has_starter = false;
  for (char32_t c : d) {
    uint8_t cc = CombiningClass(c);
    if (has_starter) {
      bool adjacent = out.size() - 1 == starter;
      uint8_t prev = CombiningClass(out.back());
      if (adjacent || (prev != 0 && prev < cc)) {
        char32_t composite = Compose(out[starter], c);
        if (composite != 0) {
          out[starter] = composite;
          continue;
        }
      }
    }
    if (cc == 0) {
      starter = out.size();
      has_starter = true;
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace ferry::prep::unicode
