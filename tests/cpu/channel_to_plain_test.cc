// A per-channel binary op (squeeze-and-excitation's scale: x * hardsigmoid(gap(x))) on a
// channels-last / blocked convolution output whose reader takes plain only: the cpu kernel
// converts the big operand to plain first instead of declining to the reference (PP-OCR's
// detector: 8 such Muls were 30 ms of 160 on the reference). Equal to the reference, on cpu.
#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry {
namespace {

using namespace cpu_test;

TEST(CpuChannelToPlain, ScaleOfABlockedConvOutputBeforeAnIdentity) {
  for (const char* op : {"Mul", "Add", "Sub", "Div"}) {
    SCOPED_TRACE(op);
    GraphBuilder b;
    b.Input("x", Rand({1, 8, 21, 19}, 5100));
    b.Const("w", Rand({32, 8, 3, 3}, 5101, -0.2f, 0.2f));
    SetInts(b.Node("Conv", {"x", "w"}, {"c"}), "pads", {1, 1, 1, 1});
    b.Node("GlobalAveragePool", {"c"}, {"g"});
    b.Node("HardSigmoid", {"g"}, {"s"});
    b.Node(op, {"c", "s"}, {"m"});
    b.Node("Identity", {"m"}, {"id"});
    b.Node("Add", {"c", "id"}, {"sum"});  // c also read by a layout-aware reader
    b.Output("id").Output("sum");
    auto report = ExpectMatchesReference(b, 1e-5, 1e-6);
    EXPECT_EQ(ProviderOfOp(report, op), "cpu");
  }
}

}  // namespace
}  // namespace ferry
