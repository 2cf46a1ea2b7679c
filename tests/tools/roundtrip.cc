// ferry_roundtrip IN OUT: import an ONNX model into Ferry's IR and export it again.
// Used by tests/differential/roundtrip_ort.py to check that export keeps models loadable and
// numerically identical under ONNX Runtime.
#include <cstdio>

#include "ir/onnx_io.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: ferry_roundtrip IN.onnx OUT.onnx\n");
    return 2;
  }
  auto m = ferry::ir::LoadModel(argv[1]);
  if (!m.ok()) {
    std::fprintf(stderr, "ferry_roundtrip: %s\n", m.status().message().c_str());
    return m.status().exit_code();
  }
  ferry::Status st = ferry::ir::SaveModel(*m.value(), argv[2]);
  if (!st.ok()) {
    std::fprintf(stderr, "ferry_roundtrip: %s\n", st.message().c_str());
    return st.exit_code();
  }
  return 0;
}
