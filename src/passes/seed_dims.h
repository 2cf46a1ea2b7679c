// Dims for the seeded inputs of the equivalence check (check.h) that the model can run: where
// the graph tells them, a dynamic input dim gets the size the graph needs, else 1.
//  - exact: a Reshape to a constant shape, a Concat or broadcasting op with a constant, a
//    MatMul/Gemm weight, a Conv weight's channels fix the size (the only one that works);
//  - minimum: a Conv or pooling window (kernel, dilation, pads, strides, through the convs and
//    pools before it) or a reflect Pad needs at least so many elements.
// The analysis follows each dynamic input dim through shape-keeping ops (elementwise, Cast,
// normalizations, Transpose, Unsqueeze/Squeeze, Pad, convolutions and pools, If/Loop bodies);
// dims that share a symbol share a size ("?", paddle2onnx's name for every unknown dim, is no
// symbol). Dims fixed by `given` (--shape) are taken as given and
// bind the symbols they carry.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "ir/graph.h"

namespace ferry::passes {

struct SeedDims {
  std::map<std::string, Shape> shapes;  // per real tensor input of known rank
  std::vector<std::string> notes;       // how a dim other than 1 was chosen, for messages
};

// The dims for the real inputs of graphs[0]. Every graph is followed (the check passes the
// original and the rewritten model: a rewrite that folded constants shows the pads and shapes
// the original computes) and their needs add up: the first exact size found wins, minimums
// take the largest. Never fails: inputs of unknown rank are left out of `shapes`.
SeedDims ChooseSeedDims(const std::vector<const ir::Graph*>& graphs,
                        const std::map<std::string, Shape>& given);

}  // namespace ferry::passes
