// Accuracy-aware layer selection behind `ferry quantize --accuracy-budget / --max-error`:
// rank the quantizable layers by sensitivity (each quantized alone, every other layer float),
// then keep the most sensitive ones in float, greedily, re-measuring the whole model after each,
// until the metric is within budget. The metric is any "lower is better" number measured on a
// model quantized with a given set of layers kept float (QuantizeFile's: accuracy drop in points,
// or the largest absolute output error); this file only orders the measurements.
#pragma once

#include <functional>
#include <set>
#include <string>
#include <vector>

#include "core/status.h"

namespace ferry::quant {

struct LayerCost {
  std::string layer;
  double solo = 0;  // metric with only this layer quantized
};

struct SelectStep {
  std::string layer;  // kept float at this step
  double solo = 0;    // its solo sensitivity
  double metric = 0;  // metric of the whole model after this step
};

struct Selection {
  double budget = 0;
  double metric_all = 0;           // every layer quantized
  std::vector<LayerCost> ranking;  // most sensitive first (ties: original order)
  std::vector<SelectStep> steps;   // layers kept float, in the order chosen
  std::vector<std::string> kept_float;
  double metric = 0;  // final metric (metric_all when no step was needed)
  bool met = false;   // metric <= budget with at least one layer still quantized
  int64_t measurements = 0;
};

// measure(float_layers): the metric with `float_layers` kept float and every other layer of
// `layers` quantized. Called once per layer (solo: every other layer float), once with none
// float, then once per greedy step. The greedy never floats the last quantized layer: when
// the budget needs every layer float, met is false (steps hold what was tried). Errors from
// measure are returned as is; kUsage for an empty layer list or a NaN budget.
using MeasureFn = std::function<Result<double>(const std::set<std::string>& float_layers)>;
Result<Selection> SelectLayers(const std::vector<std::string>& layers, double budget,
                               const MeasureFn& measure,
                               const std::function<void(size_t, size_t)>& progress = nullptr);

}  // namespace ferry::quant
