// Reference kernels: Cast, CastLike.
//
// Conversions between every pair of Ferry's element types:
// - to float16/bfloat16: one round-to-nearest-even step from the exact source value (no double
//   rounding through float), overflow to inf, NaN kept NaN;
// - float to integer: truncation toward zero; a value outside the target's range wraps modulo 2^N
//   when it fits int64 (what numpy does on common hardware, e.g. -1.0 -> uint8 255), NaN gives 0
//   and anything larger saturates (the spec leaves these cases undefined);
// - integer to integer wraps modulo 2^N; anything to bool is `value != 0` (NaN is true);
// - number to string as numpy's str(): shortest round-trip digits, positional for
//   1e-4 <= |x| < 1e16 ("0.5", "100.0"), scientific otherwise ("1e-05", "1.5e+16"), "nan",
//   "inf", "-inf"; bool as "True"/"False";
// - string to number as Python's float()/int(): surrounding whitespace allowed, "NaN", "INF",
//   "+INF", "-INF", "Infinity" in any case; a string that is not a number is an error.
#include <charconv>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "ops/reference/common.h"

namespace ferry::ops {

namespace {

static_assert(std::numeric_limits<float>::is_iec559 && std::numeric_limits<double>::is_iec559);
static_assert(std::numeric_limits<long double>::digits >= 64, "long double must hold any int64");

template <typename T>
constexpr bool kIsFloatT =
    std::is_floating_point_v<T> || std::is_same_v<T, Float16> || std::is_same_v<T, BFloat16>;

// ---- target type ----

struct TypeName {
  std::string_view name;
  int code;
};
// TensorProto.DataType names (Cast-1 takes `to` as one of these strings).
constexpr TypeName kTypeNames[] = {
    {"UNDEFINED", 0},       {"FLOAT", 1},         {"UINT8", 2},           {"INT8", 3},
    {"UINT16", 4},          {"INT16", 5},         {"INT32", 6},           {"INT64", 7},
    {"STRING", 8},          {"BOOL", 9},          {"FLOAT16", 10},        {"DOUBLE", 11},
    {"UINT32", 12},         {"UINT64", 13},       {"COMPLEX64", 14},      {"COMPLEX128", 15},
    {"BFLOAT16", 16},       {"FLOAT8E4M3FN", 17}, {"FLOAT8E4M3FNUZ", 18}, {"FLOAT8E5M2", 19},
    {"FLOAT8E5M2FNUZ", 20}, {"UINT4", 21},        {"INT4", 22},           {"FLOAT4E2M1", 23},
};

std::string_view CodeName(int64_t code) {
  for (const TypeName& t : kTypeNames)
    if (t.code == code) return t.name;
  return "unknown";
}

// The dtype named by Cast's `to` attribute (an int, or a string before opset 6).
Result<DType> CastTarget(const OpContext& ctx) {
  const ir::Attribute* a = ctx.node().attr("to");
  if (!a) return NodeError(ctx, "attribute 'to' is missing");
  int64_t code = a->i;
  if (a->type == ir::AttrType::kString) {
    code = -1;
    for (const TypeName& t : kTypeNames)
      if (t.name == a->s) code = t.code;
    if (code < 0)
      return NodeError(ctx, "attribute 'to' is '{}', not a TensorProto type name", a->s);
  }
  if (code <= 0 || code > 23)
    return NodeError(ctx, "attribute 'to' is {}, not a valid type code", code);
  std::optional<DType> dt = DTypeFromCode(static_cast<int>(code));
  if (!dt)
    return NodeUnsupported(ctx, "cast to {} (code {}) is not supported", CodeName(code), code);
  return *dt;
}

// ---- number to number ----

// Rounds v to the nearest value (ties to even) of a binary format with kMantBits fraction bits
// and smallest normal exponent kMinExp (subnormals below it). The result is exact in float, so
// converting it to Float16/BFloat16 afterwards does no second rounding. Overflow gives inf.
template <int kMantBits, int kMinExp>
float RoundToSmallFloat(long double v) {
  if (!std::isfinite(v)) return static_cast<float>(v);
  long double a = std::fabs(v);
  int e = 0;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): the leading bit has exponent e - 1
  int lead = std::max(e - 1, kMinExp);
  long double ulp = std::ldexp(1.0L, lead - kMantBits);
  long double q = a / ulp;  // exact: division by a power of two
  long double r = std::floor(q);
  long double diff = q - r;
  if (diff > 0.5L || (diff == 0.5L && std::fmod(r, 2.0L) != 0)) r += 1;
  long double rounded = r * ulp;
  if (rounded > std::numeric_limits<float>::max()) rounded = std::numeric_limits<float>::infinity();
  return std::copysign(static_cast<float>(rounded), static_cast<float>(v));
}

// Float to integer: see the file comment.
template <typename To>
To FloatToInt(long double v) {
  if (std::isnan(v)) return To(0);
  long double t = std::trunc(v);
  constexpr int kDigits = std::numeric_limits<To>::digits;  // value bits: 7 for int8, 8 for uint8
  long double lo = std::is_signed_v<To> ? -std::ldexp(1.0L, kDigits) : 0.0L;
  if (t >= lo && t < std::ldexp(1.0L, kDigits)) return static_cast<To>(t);
  if (t >= -std::ldexp(1.0L, 63) && t < std::ldexp(1.0L, 63))
    return static_cast<To>(static_cast<int64_t>(t));  // modular, as integer casts are in C++20
  return t < 0 ? std::numeric_limits<To>::lowest() : std::numeric_limits<To>::max();
}

// The exact value of a numeric or bool element.
template <typename From>
long double Wide(From x) {
  return static_cast<long double>(static_cast<ComputeType<From>>(x));
}

template <typename To, typename From>
To ConvertNumber(From x) {
  if constexpr (std::is_same_v<To, From>) {
    return x;
  } else if constexpr (std::is_same_v<To, bool>) {
    return static_cast<ComputeType<From>>(x) != 0;
  } else if constexpr (std::is_same_v<To, Float16>) {
    return Float16(RoundToSmallFloat<10, -14>(Wide(x)));
  } else if constexpr (std::is_same_v<To, BFloat16>) {
    return BFloat16(RoundToSmallFloat<7, -126>(Wide(x)));
  } else if constexpr (std::is_floating_point_v<To>) {
    return static_cast<To>(static_cast<ComputeType<From>>(x));  // one IEEE rounding
  } else if constexpr (kIsFloatT<From>) {
    return FloatToInt<To>(Wide(x));
  } else {
    return static_cast<To>(x);  // integer or bool to integer: modular
  }
}

// ---- number to string (numpy str()) ----

// Shortest digits that read back as the same value of T, as "[-]d.ddde[+-]xx".
template <typename T>
std::string ShortestScientific(T v) {
  char buf[64];
  if constexpr (std::is_floating_point_v<T>) {
    auto r = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific);
    return std::string(buf, r.ptr);
  } else {
    const double d = static_cast<float>(v);
    for (int precision = 0;; ++precision) {  // 5 significant digits always suffice
      auto r = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific, precision);
      std::string s(buf, r.ptr);
      if (ConvertNumber<T>(std::strtod(s.c_str(), nullptr)).bits == v.bits || precision >= 16)
        return s;
    }
  }
}

template <typename T>
std::string FormatFloat(T v) {
  const long double x = Wide(v);
  if (std::isnan(x)) return "nan";
  if (std::isinf(x)) return x < 0 ? "-inf" : "inf";
  std::string sci = ShortestScientific(v);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  size_t e_pos = sci.find('e');
  int exp = std::atoi(sci.c_str() + e_pos + 1);
  std::string digits;
  for (size_t i = 0; i < e_pos; ++i)
    if (sci[i] != '.') digits += sci[i];
  while (digits.size() > 1 && digits.back() == '0') digits.pop_back();

  const long double a = std::fabs(x);
  if (a == 0 || (a >= 1e-4L && a < 1e16L)) {  // positional, at least one fraction digit
    if (exp < 0) return sign + "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    size_t int_len = static_cast<size_t>(exp) + 1;
    if (digits.size() <= int_len)
      return sign + digits + std::string(int_len - digits.size(), '0') + ".0";
    return sign + digits.substr(0, int_len) + "." + digits.substr(int_len);
  }
  std::string mant = digits.substr(0, 1);
  if (digits.size() > 1) mant += "." + digits.substr(1);
  return fmt::format("{}{}e{}{:02d}", sign, mant, exp < 0 ? '-' : '+', std::abs(exp));
}

template <typename From>
std::string FormatNumber(From x) {
  if constexpr (std::is_same_v<From, bool>)
    return x ? "True" : "False";
  else if constexpr (kIsFloatT<From>)
    return FormatFloat(x);
  else if constexpr (std::is_signed_v<From>)
    return std::to_string(static_cast<int64_t>(x));
  else
    return std::to_string(static_cast<uint64_t>(x));
}

// ---- string to number (Python float()/int()) ----

std::string_view Trim(std::string_view s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

// Decimal float syntax incl. inf/infinity/nan in any case; no hex (Python rejects it too).
bool ParseDouble(std::string_view s, double* out) {
  s = Trim(s);
  if (s.empty() || s.find_first_of("xX") != std::string_view::npos) return false;
  std::string buf(s);
  char* end = nullptr;
  *out = std::strtod(buf.c_str(), &end);
  return end == buf.c_str() + buf.size();
}

// An integer literal ("-12", "+7") as int64, or as uint64 when beyond int64.
template <typename To>
bool ParseInteger(std::string_view s, To* out) {
  s = Trim(s);
  if (!s.empty() && s[0] == '+') s.remove_prefix(1);
  if (s.empty()) return false;
  int64_t i = 0;
  auto r = std::from_chars(s.data(), s.data() + s.size(), i);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) {
    *out = static_cast<To>(i);
    return true;
  }
  uint64_t u = 0;
  r = std::from_chars(s.data(), s.data() + s.size(), u);
  if (r.ec == std::errc() && r.ptr == s.data() + s.size()) {
    *out = static_cast<To>(u);
    return true;
  }
  return false;
}

template <typename To>
bool ParseNumber(const std::string& s, To* out) {
  if constexpr (std::is_same_v<To, bool>) {
    if (EqualsIgnoreCase(Trim(s), "true") || EqualsIgnoreCase(Trim(s), "false")) {
      *out = EqualsIgnoreCase(Trim(s), "true");
      return true;
    }
  } else if constexpr (std::is_integral_v<To>) {
    if (ParseInteger(s, out)) return true;  // exact, even beyond 2^53
  }
  double d = 0;
  if (!ParseDouble(s, &d)) return false;
  *out = ConvertNumber<To>(d);
  return true;
}

// ---- kernels ----

Status PrepareCastTo(OpContext& ctx, DType to) {
  const Tensor& x = ctx.input(0);
  if (x.dtype() == DType::kString && to != DType::kString) {
    // Strings are data: check here that every one reads as a number, so run cannot fail.
    const std::string* s = x.data<std::string>();
    int64_t bad = -1;
    VisitDType(to, [&](auto tag) {
      using To = typename decltype(tag)::type;
      if constexpr (!std::is_same_v<To, std::string>) {
        To unused{};
        for (int64_t i = 0; i < x.size() && bad < 0; ++i)
          if (!ParseNumber(s[i], &unused)) bad = i;
      }
    });
    if (bad >= 0)
      return NodeError(ctx, "input element {} is '{}', which cannot be read as {}", bad, s[bad],
                       DTypeName(to));
  }
  ctx.set_output(0, to, x.shape());
  return Status::Ok();
}

Status PrepareCast(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 1, 1));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_ASSIGN_OR_RETURN(DType to, CastTarget(ctx));
  return PrepareCastTo(ctx, to);
}

Status PrepareCastLike(OpContext& ctx) {
  FERRY_RETURN_IF_ERROR(CheckArity(ctx, 2, 2));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 0, "input"));
  FERRY_RETURN_IF_ERROR(RequireTensor(ctx, 1, "target_type"));
  return PrepareCastTo(ctx, ctx.input(1).dtype());
}

template <typename From, typename To>
To ConvertElement(const From& x) {
  if constexpr (std::is_same_v<From, To>) {
    return x;
  } else if constexpr (std::is_same_v<To, std::string>) {
    return FormatNumber(x);
  } else if constexpr (std::is_same_v<From, std::string>) {
    To y{};
    ParseNumber(x, &y);  // prepare checked every string parses
    return y;
  } else {
    return ConvertNumber<To>(x);
  }
}

void RunCast(OpContext& ctx) {
  const Tensor& x = ctx.input(0);
  Tensor& y = ctx.output(0);
  VisitDType(x.dtype(), [&](auto from_tag) {
    using From = typename decltype(from_tag)::type;
    VisitDType(y.dtype(), [&](auto to_tag) {
      using To = typename decltype(to_tag)::type;
      const From* in = x.data<From>();
      To* out = y.data<To>();
      ParallelFor(ctx, x.size(), 1 << 14, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) out[i] = ConvertElement<From, To>(in[i]);
      });
    });
  });
}

constexpr OpDef kOps[] = {
    {"", "Cast", 1, nullptr, PrepareCast, RunCast},
    {"", "CastLike", 15, nullptr, PrepareCastLike, RunCast},
};

}  // namespace

std::span<const OpDef> CastOps() {
  return kOps;
}

}  // namespace ferry::ops
