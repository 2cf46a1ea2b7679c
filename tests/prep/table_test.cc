// prep tables (prep/table.h): the CSV reader's quoting and limits, and one column of each kind.
#include <gtest/gtest.h>

#include "prep/spec.h"
#include "prep/table.h"

namespace ferry::prep {
namespace {

TEST(PrepTable, CsvQuotingAndLineEnds) {
  auto t = ParseCsv("a,b\r\n\"x, \"\"y\"\"\",2\n\n3,\"multi\nline\"\n", "t.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->rows.size(), 2u);
  EXPECT_EQ(t->rows[0][0], "x, \"y\"");
  EXPECT_EQ(t->rows[1][1], "multi\nline");
  EXPECT_EQ(t->lines[1], 4);  // the blank line 3 is skipped
}

TEST(PrepTable, FieldLimitBoundsMemory) {
  // 5,000 empty fields per row, 4,000 rows: 20 million fields from 20 MB of commas would hold
  // ~640 MB of std::string; refused past 2^24 fields.
  std::string header;
  for (int i = 0; i < 5000; ++i) header += (i ? ",c" : "c") + std::to_string(i);
  std::string text = header + "\n";
  const std::string row = std::string(4999, ',') + "\n";
  for (int r = 0; r < 4000; ++r) text += row;
  auto t = ParseCsv(text, "big.csv");
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("fields in all"), std::string::npos);
}

TEST(PrepTable, ColumnsOfEachKind) {
  TableSpec spec;
  ColumnSpec n;
  n.field = "n";
  n.has_missing = true;
  n.missing = 4;
  n.mean = 1;
  n.std = 2;
  ColumnSpec c;
  c.field = "c";
  c.kind = ColumnSpec::Kind::kCategory;
  c.vocabulary = {"p", "q"};
  c.unknown_zeros = true;
  spec.columns = {n, c};
  auto t = PreprocessTable(spec, "c,n\nq,3\nz,\n", "t.csv");
  ASSERT_TRUE(t.ok()) << t.status().message();
  ASSERT_EQ(t->shape(), (Shape{2, 3}));
  const float* d = t->data<float>();
  EXPECT_EQ(std::vector<float>(d, d + 6), (std::vector<float>{1, 0, 1, 1.5f, 0, 0}));
}

}  // namespace
}  // namespace ferry::prep
