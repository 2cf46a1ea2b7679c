#include "core/npy.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <unistd.h>

namespace ferry {

Result<std::string> ReadFileBytes(const std::string& path) {
  // One allocation of the file's size and one read: a model file is read without the repeated
  // growth (and page faults) of streaming into a string. Files that report no size (/proc) are
  // read to their end in chunks.
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) return InvalidError("cannot read '{}': {}", path, std::strerror(errno));
  const std::streamoff size = f.tellg();
  std::string bytes(static_cast<size_t>(std::max<std::streamoff>(size, 0)), '\0');
  f.seekg(0);
  f.read(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (f.gcount() != static_cast<std::streamsize>(bytes.size()))
    return InvalidError("cannot read '{}': short read", path);
  char buf[65536];
  while (f.read(buf, sizeof buf) || f.gcount() > 0)
    bytes.append(buf, static_cast<size_t>(f.gcount()));
  if (f.bad()) return InvalidError("cannot read '{}'", path);
  return bytes;
}

Status WriteFileAtomic(const std::string& path, const std::string& bytes) {
  std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return InvalidError("cannot write '{}': {}", path, std::strerror(errno));
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return InvalidError("cannot write '{}': {}", path, std::strerror(errno));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return InvalidError("cannot write '{}': {}", path, std::strerror(errno));
  }
  return Status::Ok();
}

namespace {

struct Descr {
  DType dtype = DType::kUndefined;
  size_t unicode_chars = 0;  // for '<U'
};

Result<Descr> ParseDescr(const std::string& d, const std::string& what) {
  if (d.size() >= 2 && d[1] == 'O')
    return InvalidError(
        "'{}': a .npy array of Python objects ('{}') cannot be read safely (its data is a pickle); "
        "save strings as a unicode array, e.g. np.save(path, np.asarray(x, dtype=str))",
        what, d);
  if (d.size() < 3) return InvalidError("'{}': bad .npy dtype '{}'", what, d);
  char order = d[0], kind = d[1];
  std::string size_s = d.substr(2);
  if (order == '>')
    return InvalidError("'{}': big-endian .npy data ('{}') is not supported", what, d);
  int size = std::atoi(size_s.c_str());
  Descr r;
  if (kind == 'U') {
    r.dtype = DType::kString;
    r.unicode_chars = static_cast<size_t>(size);
    return r;
  }
  switch (kind) {
    case 'f':
      r.dtype = size == 4   ? DType::kFloat
                : size == 8 ? DType::kDouble
                : size == 2 ? DType::kFloat16
                            : DType::kUndefined;
      break;
    case 'i':
      r.dtype = size == 1   ? DType::kInt8
                : size == 2 ? DType::kInt16
                : size == 4 ? DType::kInt32
                : size == 8 ? DType::kInt64
                            : DType::kUndefined;
      break;
    case 'u':
      r.dtype = size == 1   ? DType::kUint8
                : size == 2 ? DType::kUint16
                : size == 4 ? DType::kUint32
                : size == 8 ? DType::kUint64
                            : DType::kUndefined;
      break;
    case 'b':
      r.dtype = size == 1 ? DType::kBool : DType::kUndefined;
      break;
    default:
      break;
  }
  if (r.dtype == DType::kUndefined)
    return InvalidError("'{}': unsupported .npy dtype '{}'", what, d);
  return r;
}

// Finds the value text after 'key': in the header dict.
bool FindKey(const std::string& h, const std::string& key, std::string* out) {
  size_t p = h.find("'" + key + "'");
  if (p == std::string::npos) return false;
  p = h.find(':', p);
  if (p == std::string::npos) return false;
  ++p;
  while (p < h.size() && h[p] == ' ') ++p;
  size_t e = p;
  if (p < h.size() && (h[p] == '\'' || h[p] == '"')) {
    char q = h[p];
    e = h.find(q, p + 1);
    if (e == std::string::npos) return false;
    *out = h.substr(p + 1, e - p - 1);
    return true;
  }
  if (p < h.size() && h[p] == '(') {
    e = h.find(')', p);
    if (e == std::string::npos) return false;
    *out = h.substr(p + 1, e - p - 1);
    return true;
  }
  while (e < h.size() && h[e] != ',' && h[e] != '}') ++e;
  *out = h.substr(p, e - p);
  return true;
}

}  // namespace

Result<Tensor> ParseNpy(const std::string& b, const std::string& what) {
  if (b.size() < 10 || std::memcmp(b.data(), "\x93NUMPY", 6) != 0)
    return InvalidError("'{}' is not a .npy file (missing \\x93NUMPY magic)", what);
  uint8_t major = static_cast<uint8_t>(b[6]);
  size_t header_len, off;
  if (major == 1) {
    header_len =
        static_cast<uint8_t>(b[8]) | (static_cast<size_t>(static_cast<uint8_t>(b[9])) << 8);
    off = 10;
  } else if (major == 2 || major == 3) {
    if (b.size() < 12) return InvalidError("'{}': truncated .npy header", what);
    header_len = 0;
    for (int i = 0; i < 4; ++i)
      header_len |= static_cast<size_t>(static_cast<uint8_t>(b[8 + i])) << (8 * i);
    off = 12;
  } else {
    return InvalidError("'{}': unsupported .npy version {}", what, major);
  }
  if (off + header_len > b.size()) return InvalidError("'{}': truncated .npy header", what);
  std::string h = b.substr(off, header_len);
  std::string descr_s, fortran_s, shape_s;
  if (!FindKey(h, "descr", &descr_s) || !FindKey(h, "fortran_order", &fortran_s) ||
      !FindKey(h, "shape", &shape_s))
    return InvalidError("'{}': malformed .npy header", what);
  FERRY_ASSIGN_OR_RETURN(Descr descr, ParseDescr(descr_s, what));
  Shape shape;
  {
    std::string tok;
    for (char c : shape_s + ",") {
      if (c == ',') {
        size_t s = tok.find_first_not_of(' ');
        if (s != std::string::npos) {
          char* endp = nullptr;
          long long v = std::strtoll(tok.c_str() + s, &endp, 10);
          if (v < 0 || endp == tok.c_str() + s)
            return InvalidError("'{}': bad .npy shape ({})", what, shape_s);
          shape.push_back(v);
        }
        tok.clear();
      } else {
        tok += c;
      }
    }
  }
  bool fortran = fortran_s.find("True") != std::string::npos;
  const char* data = b.data() + off + header_len;
  size_t avail = b.size() - off - header_len;
  // The header's shape is checked against the bytes that follow before anything is allocated
  // (every element takes at least one byte: a 2^40-element header on a small file is refused).
  size_t elem = descr.dtype == DType::kString ? descr.unicode_chars * 4 : DTypeSize(descr.dtype);
  uint64_t need = 1;
  for (int64_t d : shape) need = d == 0 ? 0 : need;  // an empty array needs no bytes at all
  for (int64_t d : shape) {
    if (need != 0 && need > avail / static_cast<uint64_t>(d))
      return InvalidError(
          "'{}': truncated .npy data: shape {} needs more than the {} bytes the "
          "file has",
          what, ShapeToString(shape), avail);
    need *= static_cast<uint64_t>(d);
  }
  const int64_t n = static_cast<int64_t>(need);  // elements, at most the bytes available
  if (n > 0 && elem == 0)
    return InvalidError("'{}': .npy dtype '{}' has no bytes per element", what, descr_s);
  if (need > 0 && need > avail / elem)
    return InvalidError("'{}': truncated .npy data: shape {} needs {} bytes, file has {}", what,
                        ShapeToString(shape), need * elem, avail);
  // Read in file order, with the file's shape reversed when Fortran-ordered; then transpose.
  Shape file_shape = shape;
  if (fortran) std::reverse(file_shape.begin(), file_shape.end());
  Tensor t(descr.dtype, file_shape);
  if (descr.dtype == DType::kString) {
    for (int64_t i = 0; i < n; ++i) {
      std::string s;
      for (size_t c = 0; c < descr.unicode_chars; ++c) {
        uint32_t cp;
        std::memcpy(&cp, data + (static_cast<size_t>(i) * descr.unicode_chars + c) * 4, 4);
        if (cp == 0) break;
        if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
          return InvalidError("'{}': string {} holds U+{:X}, which is not a Unicode scalar value",
                              what, i, cp);
        if (cp < 0x80) {
          s += static_cast<char>(cp);
        } else if (cp < 0x800) {
          s += static_cast<char>(0xC0 | (cp >> 6));
          s += static_cast<char>(0x80 | (cp & 0x3F));
        } else if (cp < 0x10000) {
          s += static_cast<char>(0xE0 | (cp >> 12));
          s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          s += static_cast<char>(0x80 | (cp & 0x3F));
        } else {
          s += static_cast<char>(0xF0 | (cp >> 18));
          s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
          s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
          s += static_cast<char>(0x80 | (cp & 0x3F));
        }
      }
      t.data<std::string>()[i] = std::move(s);
    }
  } else if (n > 0) {
    std::memcpy(t.raw(), data, static_cast<size_t>(n) * elem);
    if (descr.dtype == DType::kBool) NormalizeBoolBytes(t.raw(), n);
  }
  if (!fortran || shape.size() < 2 || n == 0) return t.Reshaped(shape);
  // Transpose from reversed (column-major) order into row-major.
  Tensor out(descr.dtype, shape);
  size_t r = shape.size();
  std::vector<int64_t> fstr = Strides(file_shape);
  std::vector<int64_t> idx(r, 0);
  for (int64_t i = 0; i < n; ++i) {
    int64_t src = 0;
    for (size_t d = 0; d < r; ++d) src += idx[d] * fstr[r - 1 - d];
    if (descr.dtype == DType::kString)
      out.data<std::string>()[i] = t.data<std::string>()[src];
    else
      std::memcpy(static_cast<char*>(out.raw()) + i * elem,
                  static_cast<const char*>(t.raw()) + src * elem, elem);
    for (int64_t d = static_cast<int64_t>(r) - 1; d >= 0; --d) {
      if (++idx[static_cast<size_t>(d)] < shape[static_cast<size_t>(d)]) break;
      idx[static_cast<size_t>(d)] = 0;
    }
  }
  return out;
}

Result<Tensor> ReadNpy(const std::string& path) {
  FERRY_ASSIGN_OR_RETURN(std::string bytes, ReadFileBytes(path));
  return ParseNpy(bytes, path);
}

namespace {
std::vector<uint32_t> Utf8ToCodepoints(const std::string& s) {
  std::vector<uint32_t> out;
  for (size_t i = 0; i < s.size();) {
    unsigned char c = static_cast<unsigned char>(s[i]);
    uint32_t cp;
    int len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if ((c >> 5) == 6) {
      cp = c & 0x1F;
      len = 2;
    } else if ((c >> 4) == 14) {
      cp = c & 0x0F;
      len = 3;
    } else if ((c >> 3) == 30) {
      cp = c & 0x07;
      len = 4;
    } else {
      cp = c;
      len = 1;
    }
    for (int k = 1; k < len && i + static_cast<size_t>(k) < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + static_cast<size_t>(k)]) & 0x3F);
    out.push_back(cp);
    i += static_cast<size_t>(len);
  }
  return out;
}
}  // namespace

std::string SerializeNpy(const Tensor& t) {
  std::string descr;
  size_t uchars = 0;
  std::vector<std::vector<uint32_t>> cps;
  switch (t.dtype()) {
    case DType::kFloat:
      descr = "<f4";
      break;
    case DType::kDouble:
      descr = "<f8";
      break;
    case DType::kFloat16:
      descr = "<f2";
      break;
    case DType::kBFloat16:
      descr = "<u2";
      break;  // numpy has no bfloat16: raw bits
    case DType::kInt8:
      descr = "|i1";
      break;
    case DType::kInt16:
      descr = "<i2";
      break;
    case DType::kInt32:
      descr = "<i4";
      break;
    case DType::kInt64:
      descr = "<i8";
      break;
    case DType::kUint8:
      descr = "|u1";
      break;
    case DType::kUint16:
      descr = "<u2";
      break;
    case DType::kUint32:
      descr = "<u4";
      break;
    case DType::kUint64:
      descr = "<u8";
      break;
    case DType::kBool:
      descr = "|b1";
      break;
    case DType::kString:
      for (int64_t i = 0; i < t.size(); ++i) {
        cps.push_back(Utf8ToCodepoints(t.data<std::string>()[i]));
        uchars = std::max(uchars, cps.back().size());
      }
      uchars = std::max<size_t>(uchars, 1);
      descr = "<U" + std::to_string(uchars);
      break;
    default:
      descr = "|V1";
      break;
  }
  std::string shape = "(";
  for (size_t i = 0; i < t.shape().size(); ++i) {
    if (i) shape += ", ";
    shape += std::to_string(t.shape()[i]);
  }
  shape += t.shape().size() == 1 ? ",)" : ")";
  std::string h = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape + ", }";
  size_t total = 10 + h.size() + 1;
  size_t pad = (64 - total % 64) % 64;
  h += std::string(pad, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(1);
  out += static_cast<char>(0);
  out += static_cast<char>(h.size() & 0xff);
  out += static_cast<char>((h.size() >> 8) & 0xff);
  out += h;
  if (t.dtype() == DType::kString) {
    for (auto& v : cps) {
      v.resize(uchars, 0);
      out.append(reinterpret_cast<const char*>(v.data()), v.size() * 4);
    }
  } else {
    out.append(static_cast<const char*>(t.raw()), t.nbytes());
  }
  return out;
}

}  // namespace ferry
