// Reference kernels: the opset-20 string ops StringConcat, StringSplit and RegexFullMatch
// (StringNormalizer and TfIdfVectorizer are in misc.cc).
//
// Strings are byte strings (UTF-8 by convention); nothing here decodes them except
// RegexFullMatch, whose pattern and inputs RE2 reads as UTF-8 (RE2 syntax, as the spec and
// ONNX Runtime use: https://github.com/google/re2/wiki/Syntax; matching is linear in the input,
// so a model's pattern cannot make a run take exponential time).
#include <re2/re2.h>

#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

Status RequireStrings(const OpContext& ctx, size_t i, std::string_view what) {
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, i, what));
  return RequireDType(ctx, i, {DType::kString});
}

// ---- StringConcat: elementwise x + y with numpy broadcasting ----
Status PrepareStringConcat(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireStrings(ctx, 0, "X"));
  FERRY_RETURN_IF_ERROR(RequireStrings(ctx, 1, "Y"));
  FERRY_ASSIGN_OR_RETURN(Shape out,
                         BroadcastShapes(ctx, {ctx.input(0).shape(), ctx.input(1).shape()}));
  ctx.set_output(0, DType::kString, out);
  return Status::Ok();
}

void RunStringConcat(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& y = ctx.input(1);
  Tensor& out = ctx.output(0);
  BroadcastIndexer xi(x.shape(), out.shape()), yi(y.shape(), out.shape());
  const std::string* xs = x.data<std::string>();
  const std::string* ys = y.data<std::string>();
  std::string* o = out.data<std::string>();
  for (int64_t i = 0; i < out.size(); ++i) o[i] = xs[xi(i)] + ys[yi(i)];
}

// ---- StringSplit ----
// Without a delimiter (absent or ""), runs of whitespace separate and leading/trailing
// whitespace is dropped, as Python's str.split() in the onnx reference; whitespace is ASCII
// (space, \t, \n, \v, \f, \r). (ONNX Runtime 1.30 separates on ' ' only and trims the
// remainder after maxsplit; the spec says whitespace.) With one, every occurrence separates
// (consecutive ones delimit empty strings). At most `maxsplit` splits when the attribute is set;
// the rest of the string is the last piece.
bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

std::vector<std::string_view> SplitOne(std::string_view s, std::string_view delim,
                                       int64_t maxsplit) {
  std::vector<std::string_view> parts;
  if (delim.empty()) {
    size_t i = 0;
    while (true) {
      while (i < s.size() && IsSpace(s[i])) ++i;
      if (i == s.size()) break;
      if (maxsplit >= 0 && static_cast<int64_t>(parts.size()) == maxsplit) {
        parts.push_back(s.substr(i));  // the rest, trailing whitespace included
        break;
      }
      size_t j = i;
      while (j < s.size() && !IsSpace(s[j])) ++j;
      parts.push_back(s.substr(i, j - i));
      i = j;
    }
    return parts;
  }
  size_t start = 0;
  while (maxsplit < 0 || static_cast<int64_t>(parts.size()) < maxsplit) {
    size_t at = s.find(delim, start);
    if (at == std::string_view::npos) break;
    parts.push_back(s.substr(start, at - start));
    start = at + delim.size();
  }
  parts.push_back(s.substr(start));
  return parts;
}

struct SplitAttrs {
  std::string delimiter;
  int64_t maxsplit = -1;  // -1: no limit
};

Result<SplitAttrs> GetSplitAttrs(const OpContext& ctx) {
  SplitAttrs a;
  a.delimiter = ctx.attr_string("delimiter", "");
  if (ctx.has_attr("maxsplit")) {
    a.maxsplit = ctx.attr_int("maxsplit", -1);
    if (a.maxsplit < 0) return NodeError(ctx, "maxsplit is {}, expected >= 0", a.maxsplit);
  }
  return a;
}

// substrings: X's shape + [the most pieces of any element]; length: X's shape (int64).
Status PrepareStringSplit(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireStrings(ctx, 0, "X"));
  FERRY_ASSIGN_OR_RETURN(SplitAttrs a, GetSplitAttrs(ctx));
  const Tensor& x = ctx.input(0);
  int64_t widest = 0;
  for (const std::string& s : x.span<std::string>())
    widest = std::max<int64_t>(widest, SplitOne(s, a.delimiter, a.maxsplit).size());
  Shape out = x.shape();
  out.push_back(widest);
  ctx.set_output(0, DType::kString, out);
  if (ctx.num_outputs() > 1) ctx.set_output(1, DType::kInt64, x.shape());
  return Status::Ok();
}

void RunStringSplit(OpContext& ctx) {
  SplitAttrs a = GetSplitAttrs(ctx).value();
  const Tensor& x = ctx.input(0);
  Tensor& subs = ctx.output(0);
  const int64_t width = subs.shape().back();
  std::string* o = subs.data<std::string>();
  int64_t* lengths = ctx.num_outputs() > 1 ? ctx.output(1).data<int64_t>() : nullptr;
  for (int64_t i = 0; i < x.size(); ++i) {
    std::vector<std::string_view> parts =
        SplitOne(x.data<std::string>()[i], a.delimiter, a.maxsplit);
    for (int64_t k = 0; k < width; ++k)
      o[i * width + k] = k < static_cast<int64_t>(parts.size()) ? std::string(parts[k]) : "";
    if (lengths) lengths[i] = static_cast<int64_t>(parts.size());
  }
}

// ---- RegexFullMatch: Y[i] = the whole of X[i] matches `pattern` ----
struct RegexState : OpState {
  explicit RegexState(const std::string& pattern) : re(pattern, RE2::Quiet) {}
  RE2 re;
};

Status PrepareRegexFullMatch(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireStrings(ctx, 0, "X"));
  if (!ctx.has_attr("pattern"))
    return NodeError(ctx, "is missing the required attribute 'pattern'");
  auto st = std::make_unique<RegexState>(ctx.attr_string("pattern", ""));
  if (!st->re.ok())
    return NodeError(ctx, "pattern '{}' is not a valid RE2 expression: {}",
                     ctx.attr_string("pattern", ""), st->re.error());
  ctx.set_state(std::move(st));
  ctx.set_output(0, DType::kBool, ctx.input(0).shape());
  return Status::Ok();
}

void RunRegexFullMatch(OpContext& ctx) {
  const RE2& re = ctx.state<RegexState>()->re;
  const Tensor& x = ctx.input(0);
  bool* y = ctx.output(0).data<bool>();
  for (int64_t i = 0; i < x.size(); ++i) y[i] = RE2::FullMatch(x.data<std::string>()[i], re);
}

constexpr OpDef kOps[] = {
    {"", "StringConcat", 20, nullptr, PrepareStringConcat, RunStringConcat},
    {"", "StringSplit", 20, nullptr, PrepareStringSplit, RunStringSplit},
    {"", "RegexFullMatch", 20, nullptr, PrepareRegexFullMatch, RunRegexFullMatch},
};

}  // namespace

std::span<const OpDef> StringOps() {
  return kOps;
}

}  // namespace ferry::ops
