// An Identity between layout-aware kernels (paddle2onnx writes one after most nodes) passes
// the provider layout on as a view instead of forcing a plain copy and a reorder back (PP-OCRv6's
// detector: 22 ms of reorders per run, 160 -> 79 ms); an Identity whose reader needs plain, or
// that is a graph output, still gives plain; one right after a fusing kernel (before its
// activation) joins its fused chain. Equal to the reference either way.
#include <gtest/gtest.h>

#include "cpu/cpu_harness.h"

namespace ferry {
namespace {

using namespace cpu_test;

TEST(CpuIdentityLayout, IdentityBetweenConvsIsAChannelsLastView) {
  GraphBuilder b;
  b.Input("x", Rand({1, 16, 23, 17}, 5200));
  b.Const("w1", Rand({32, 16, 3, 3}, 5201, -0.2f, 0.2f));
  b.Const("w2", Rand({32, 32, 1, 1}, 5202, -0.2f, 0.2f));
  b.Const("w3", Rand({32, 32, 1, 1}, 5203, -0.2f, 0.2f));
  SetInts(b.Node("Conv", {"x", "w1"}, {"c1"}), "pads", {1, 1, 1, 1});
  b.Node("Relu", {"c1"}, {"r0"});
  b.Node("Identity", {"r0"}, {"i1"}).name = "i1";
  b.Node("Conv", {"i1", "w3"}, {"c3"});
  b.Node("Relu", {"c3"}, {"r1"});
  b.Node("Identity", {"r1"}, {"i2"}).name = "i2";
  b.Node("Conv", {"i2", "w2"}, {"c2"});
  b.Node("Add", {"c2", "i2"}, {"s"});
  b.Node("Identity", {"s"}, {"i3"}).name = "i3";     // joins c2's fused Add (any layout)
  b.Node("Softsign", {"i3"}, {"ss"});                // a reference-only reader: i3 must be plain
  b.Node("Identity", {"c2"}, {"out"}).name = "out";  // a graph output
  b.Output("ss").Output("out");
  auto report = ExpectMatchesReference(b, 1e-5, 1e-6);
  EXPECT_EQ(ProviderOfNode(report, "i1"), "cpu (channels-last view)");
  EXPECT_EQ(ProviderOfNode(report, "i2"), "cpu (channels-last view)");
  EXPECT_NE(ProviderOfNode(report, "i3"), "cpu (channels-last view)");
  EXPECT_NE(ProviderOfNode(report, "out"), "cpu (channels-last view)");
}

}  // namespace
}  // namespace ferry
