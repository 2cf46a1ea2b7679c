// Tabular inputs: CSV text (RFC 4180: a header row, `,` separators, `"` quoting with `""`
// escapes, LF or CRLF line ends) to the [rows, features] tensor a model takes, column by column
// as the spec says (prep/spec.h TableSpec): numbers with a missing-value policy, clipping and
// standardisation; categories from a vocabulary as one-hot or index; text passed through.
// Reentrant (no globals).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"
#include "core/tensor.h"

namespace ferry::prep {

struct TableSpec;  // prep/spec.h

// A parsed CSV document: the header's field names and the rows (every row as many fields as the
// header). Limits: 1,000,000 rows, 10,000 fields per row,
// 2^24 fields in all (the tensor: 2^28 elements, 2^24 for strings). Errors (kInvalid, naming `what`
// and the 1-based line): an unterminated quote, a quote inside an unquoted field, a row with
// another field count than the header, an empty document.
struct CsvTable {
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> lines;  // the line each row starts on (for messages)
};
Result<CsvTable> ParseCsv(std::string_view text, const std::string& what);

// The table through the spec's columns: [rows, width] of the spec's dtype (width = the sum of
// the columns' widths: 1 per number or text or index category, the vocabulary size per one-hot
// category). Errors (kInvalid, naming `what`, the line and the field): a field the header lacks,
// an empty field without `missing`, a number that does not parse (the whole field must), a
// category outside the vocabulary with unknown: error, an int64 table given a fraction.
Result<Tensor> TableToTensor(const TableSpec& spec, const CsvTable& table, const std::string& what);

// ParseCsv then TableToTensor.
Result<Tensor> PreprocessTable(const TableSpec& spec, std::string_view text,
                               const std::string& what);

}  // namespace ferry::prep
