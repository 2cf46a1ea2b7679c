// Tabular inputs (prep/table.h).
#include "prep/table.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include <fmt/format.h>

#include "prep/spec.h"

namespace ferry::prep {

namespace {

constexpr size_t kMaxRows = 1'000'000;
constexpr size_t kMaxFields = 10'000;
// Fields held at once (rows x header fields): each is a std::string, so a CSV of empty fields
// would otherwise cost ~32 bytes of memory per byte of input.
constexpr size_t kMaxCells = size_t{1} << 24;

// The whole field as a finite double (strtod's syntax, no leading or trailing spaces).
bool ParseDouble(const std::string& s, double* out) {
  if (s.empty() || std::isspace(static_cast<unsigned char>(s.front())) ||
      std::isspace(static_cast<unsigned char>(s.back())))
    return false;
  errno = 0;
  char* end = nullptr;
  double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v)) return false;
  *out = v;
  return true;
}

}  // namespace

Result<CsvTable> ParseCsv(std::string_view text, const std::string& what) {
  CsvTable t;
  std::vector<std::string> row;
  std::string field;
  int64_t line = 1, row_line = 1;
  size_t i = 0;
  bool any = false;  // the current row has content (a field separator or a character)
  auto end_row = [&]() -> Status {
    row.push_back(std::move(field));
    field.clear();
    if (t.header.empty()) {
      t.header = std::move(row);
    } else {
      if (row.size() != t.header.size())
        return InvalidError("{}: line {}: {} fields, the header has {}", what, row_line, row.size(),
                            t.header.size());
      if (t.rows.size() >= kMaxRows) return InvalidError("{}: more than {} rows", what, kMaxRows);
      if ((t.rows.size() + 1) * t.header.size() > kMaxCells)
        return InvalidError("{}: more than {} fields in all", what, kMaxCells);
      t.rows.push_back(std::move(row));
      t.lines.push_back(row_line);
    }
    row.clear();
    any = false;
    return Status::Ok();
  };
  while (i < text.size()) {
    char c = text[i];
    if (c == '"' && field.empty() &&
        (i == 0 || text[i - 1] == ',' || text[i - 1] == '\n' || text[i - 1] == '\r')) {
      // A quoted field: up to the closing quote, "" is one quote.
      size_t start_line = line;
      ++i;
      bool closed = false;
      while (i < text.size()) {
        if (text[i] == '"') {
          if (i + 1 < text.size() && text[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          closed = true;
          ++i;
          break;
        }
        if (text[i] == '\n') ++line;
        field += text[i++];
      }
      if (!closed) return InvalidError("{}: line {}: a quoted field never ends", what, start_line);
      if (i < text.size() && text[i] != ',' && text[i] != '\n' && text[i] != '\r')
        return InvalidError("{}: line {}: text after a closing quote", what, line);
      any = true;
      continue;
    }
    if (c == '"')
      return InvalidError("{}: line {}: a quote inside an unquoted field (quote the field)", what,
                          line);
    if (c == ',') {
      row.push_back(std::move(field));
      field.clear();
      if (row.size() > kMaxFields)
        return InvalidError("{}: line {}: more than {} fields", what, line, kMaxFields);
      any = true;
      ++i;
      continue;
    }
    if (c == '\r' || c == '\n') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      ++i;
      if (any || !field.empty()) FERRY_RETURN_IF_ERROR(end_row());
      ++line;
      row_line = line;
      continue;
    }
    field += c;
    any = true;
    ++i;
  }
  if (any || !field.empty()) FERRY_RETURN_IF_ERROR(end_row());
  if (t.header.empty()) return InvalidError("{}: empty (expected a header row)", what);
  return t;
}

Result<Tensor> TableToTensor(const TableSpec& spec, const CsvTable& table,
                             const std::string& what) {
  std::map<std::string, size_t> index;
  for (size_t k = 0; k < table.header.size(); ++k) index.emplace(table.header[k], k);
  std::vector<size_t> at;
  for (const auto& c : spec.columns) {
    auto it = index.find(c.field);
    if (it == index.end()) return InvalidError("{}: no field '{}' in the header", what, c.field);
    at.push_back(it->second);
  }
  const int64_t rows = static_cast<int64_t>(table.rows.size()), width = spec.width();
  const int64_t limit = spec.dtype == DType::kString ? int64_t{1} << 24 : int64_t{1} << 28;
  if (rows * width > limit)
    return InvalidError("{}: {} rows x {} features is over {} elements", what, rows, width, limit);
  Tensor out(spec.dtype, {rows, width});
  for (int64_t r = 0; r < rows; ++r) {
    const auto& row = table.rows[static_cast<size_t>(r)];
    const int64_t line = table.lines[static_cast<size_t>(r)];
    int64_t col = r * width;
    for (size_t k = 0; k < spec.columns.size(); ++k) {
      const ColumnSpec& c = spec.columns[k];
      const std::string& f = row[at[k]];
      auto where = [&] { return fmt::format("{}: line {}, field '{}'", what, line, c.field); };
      if (c.kind == ColumnSpec::Kind::kText) {
        out.data<std::string>()[col++] = f;
        continue;
      }
      if (c.kind == ColumnSpec::Kind::kCategory) {
        auto pos = std::find(c.vocabulary.begin(), c.vocabulary.end(), f);
        int64_t id = pos == c.vocabulary.end() ? -1 : pos - c.vocabulary.begin();
        if (id < 0 && !c.unknown_zeros)
          return InvalidError("{}: '{}' is not in the vocabulary ({} values)", where(), f,
                              c.vocabulary.size());
        const int64_t n = c.one_hot ? static_cast<int64_t>(c.vocabulary.size()) : 1;
        for (int64_t j = 0; j < n; ++j) {
          double v = c.one_hot ? (j == id ? 1.0 : 0.0) : static_cast<double>(id);
          if (spec.dtype == DType::kFloat)
            out.data<float>()[col + j] = static_cast<float>(v);
          else
            out.data<int64_t>()[col + j] = static_cast<int64_t>(v);
        }
        col += n;
        continue;
      }
      double v = 0;
      if (f.empty()) {
        if (!c.has_missing)
          return InvalidError("{}: empty (the spec gives no `missing` value)", where());
        v = c.missing;
      } else if (!ParseDouble(f, &v)) {
        return InvalidError("{}: '{}' is not a number", where(), f);
      }
      if (c.has_clip) v = std::clamp(v, c.clip_min, c.clip_max);
      v = (v * c.scale - c.mean) / c.std;
      if (spec.dtype == DType::kFloat) {
        out.data<float>()[col++] = static_cast<float>(v);
      } else {
        if (v != std::floor(v) || std::fabs(v) > 9.0e15)
          return InvalidError("{}: {} is not an integer (dtype int64)", where(), v);
        out.data<int64_t>()[col++] = static_cast<int64_t>(v);
      }
    }
  }
  return out;
}

Result<Tensor> PreprocessTable(const TableSpec& spec, std::string_view text,
                               const std::string& what) {
  FERRY_ASSIGN_OR_RETURN(CsvTable t, ParseCsv(text, what));
  return TableToTensor(spec, t, what);
}

}  // namespace ferry::prep
